"""export/eole_modules.py against outputs recorded by Eole 0.6.4 itself (tests/fixtures/eole).

No eole import: the fixture holds Eole's checkpoints and its `eole predict` outputs. The
sentencepiece-transform model's sources and outputs are text; the others' are word tokens.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyonmttok
import pytest
import sentencepiece as spm

torch = pytest.importorskip("torch")

from export.eole_modules import EoleError, EoleModel  # noqa: E402
from export.eole_reader import load_eole  # noqa: E402
from export.eole_text import SideText  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "eole"
MODELS = sorted(p.name for p in FIXTURE.iterdir() if (p / "config.json").is_file())
# Models without a text transform: their outputs are vocabulary tokens joined by spaces.
WORD_MODELS = [
    m for m in MODELS if not json.loads((FIXTURE / m / "config.json").read_text()).get("transforms")
]
WORDS = [line.split() for line in (FIXTURE / "src.txt").read_text(encoding="utf-8").splitlines()]
MAX_LENGTH, MAX_LENGTH_RATIO = 250, 2.0  # Eole's predict defaults: min(250, 2 * src_len + 5)


@pytest.fixture(scope="module", params=MODELS)
def model(request: pytest.FixtureRequest) -> tuple[str, EoleModel]:
    return request.param, load_eole(FIXTURE / request.param)


def _transform(transform: str, side: SideText):
    """(tokenise, detokenise) as Eole's ``transform`` calls its library for ``side``."""
    if transform == "sentencepiece":
        sp = spm.SentencePieceProcessor(model_file=str(side.model))
        return (lambda line: sp.encode(line, out_type=str)), sp.decode_pieces
    if transform == "bpe":  # Eole's BPETransform over subword-nmt
        from subword_nmt.apply_bpe import BPE

        with open(side.model, encoding="utf-8") as codes:
            bpe = BPE(codes, vocab=set(side.vocabulary) if side.vocabulary else None)
        return (
            lambda line: bpe.segment_tokens(line.split(" ")),
            lambda tokens: re.sub(r"(@@ )|(@@ ?$)", "", " ".join(tokens)),
        )
    model = {"bpe": "bpe_model_path", "sentencepiece": "sp_model_path"}.get(side.subword_type)
    tok = pyonmttok.Tokenizer(**side.onmttok, **({model: str(side.model)} if model else {}))
    return tok, tok.detokenize


def sources(name: str, m: EoleModel) -> list[list[str]]:
    """The fixture's 300 sources as Eole tokenises them for this model."""
    if m.text is None:
        return WORDS
    tokenise, _ = _transform(m.text.transform, m.text.src)
    own = FIXTURE / name / "src.txt"  # raw text; the bpe transform's model takes words
    lines = (own if own.is_file() else FIXTURE / "src.txt").read_text(encoding="utf-8")
    return [tokenise(line) for line in lines.splitlines()]


def text(m: EoleModel, tokens: list[str]) -> str:
    """What eole predict writes for ``tokens``: detokenised by the transform, if any."""
    return (
        " ".join(tokens) if m.text is None else _transform(m.text.transform, m.text.tgt)[1](tokens)
    )


def encode(m: EoleModel, sents: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
    index = {tok: i for i, tok in enumerate(m.src_vocab)}
    lengths = torch.tensor([len(s) for s in sents])
    src = torch.full((len(sents), int(lengths.max())), m.src_pad_id, dtype=torch.long)
    for i, s in enumerate(sents):
        src[i, : len(s)] = torch.tensor([index.get(t, m.src_unk_id) for t in s])
    return src, lengths


@torch.no_grad()
def greedy(m: EoleModel, sents: list[list[str]]) -> list[tuple[list[str], float]]:
    """Batched greedy decoding, Eole's rules: stop at EOS or after max_length tokens;
    score = sum of log-probs (EOS included) / (tokens + EOS + 1), Eole's 'avg' penalty."""
    src, lengths = encode(m, sents)
    memory, hidden = m.encoder(src, lengths)
    mask = torch.arange(src.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
    feed = torch.zeros(len(sents), m.hidden_size)
    limit = [int(min(MAX_LENGTH, n * MAX_LENGTH_RATIO + 5)) for n in lengths.tolist()]
    token = torch.full((len(sents),), m.bos_id, dtype=torch.long)
    out: list[list[int]] = [[] for _ in sents]
    total = [0.0] * len(sents)
    done = [False] * len(sents)
    for step in range(max(limit)):
        log_probs, hidden, _, feed = m.decoder(
            token, hidden, memory, mask, feed, torch.full((len(sents),), step)
        )
        token = log_probs.argmax(-1)
        for b in range(len(sents)):
            if not done[b]:
                out[b].append(int(token[b]))
                total[b] += float(log_probs[b, token[b]])
                done[b] = out[b][-1] == m.eos_id or len(out[b]) == limit[b]
        if all(done):
            break
    results = []
    for ids, score in zip(out, total, strict=True):
        steps = len(ids)
        if ids and ids[-1] == m.eos_id:
            ids = ids[:-1]
        results.append(([m.tgt_vocab[i] for i in ids], score / (steps + 1)))
    return results


def test_greedy_matches_eole(model: tuple[str, EoleModel]) -> None:
    name, m = model
    expected = json.loads((FIXTURE / name / "greedy.json").read_text(encoding="utf-8"))
    src = sources(name, m)
    got = []
    for start in range(0, len(src), 50):
        got += greedy(m, src[start : start + 50])
    same = [text(m, g[0]) == e["tokens"] for g, e in zip(got, expected, strict=True)]
    assert all(same), f"{name}: {sum(same)}/{len(same)} greedy translations match Eole"
    worst = max(abs(g[1] - e["score"]) for g, e in zip(got, expected, strict=True))
    assert worst < 1e-4, f"{name}: greedy scores differ from Eole's by up to {worst}"


def test_padded_batch_equals_one_at_a_time(model: tuple[str, EoleModel]) -> None:
    name, m = model
    sents = sorted(sources(name, m)[:40], key=len)[::3]  # mixed lengths, heavy padding
    batched = greedy(m, sents)
    for sent, (tokens, score) in zip(sents, batched, strict=True):
        alone_tokens, alone_score = greedy(m, [sent])[0]
        assert tokens == alone_tokens
        assert abs(score - alone_score) < 1e-5


@pytest.mark.parametrize("name", WORD_MODELS)
def test_beam_best_score_is_eole_avg_of_forced_decode(name: str) -> None:
    """Eole's beam scores = sum(log p of generated tokens, EOS included) / (generated + 1);
    a hypothesis of max_length tokens ended without EOS. Check the best hypotheses (of the
    word-token models: a detokenised output does not give back its pieces)."""
    m = load_eole(FIXTURE / name)
    beams = json.loads((FIXTURE / name / "beam5.json").read_text(encoding="utf-8"))
    for i in range(0, 300, 10):
        hyp = beams[i]["nbest"][0]
        ids = [m.tgt_vocab.index(t) for t in hyp["tokens"].split()]
        if len(ids) < int(min(MAX_LENGTH, len(WORDS[i]) * MAX_LENGTH_RATIO + 5)):
            ids.append(m.eos_id)
        src, lengths = encode(m, [WORDS[i]])
        with torch.no_grad():
            memory, hidden = m.encoder(src, lengths)
            mask = torch.ones_like(src, dtype=torch.bool)
            feed, token, total = torch.zeros(1, m.hidden_size), torch.tensor([m.bos_id]), 0.0
            for step, nxt in enumerate(ids):
                log_probs, hidden, _, feed = m.decoder(
                    token, hidden, memory, mask, feed, torch.tensor([step])
                )
                total += float(log_probs[0, nxt])
                token = torch.tensor([nxt])
        assert abs(total / (len(ids) + 1) - hyp["score"]) < 1e-4, (name, i)


def test_onnx_export_matches_torch(model: tuple[str, EoleModel], tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    name, m = model
    sents = sources(name, m)
    src, lengths = encode(m, [sents[3], sents[0], sents[7]])
    with torch.no_grad():
        memory, hidden = m.encoder(src, lengths)
    h_names = ["h", "c"] if m.rnn_type == "lstm" else ["h"]
    torch.onnx.export(
        m.encoder,
        (src, lengths),
        tmp_path / "enc.onnx",
        input_names=["src", "lengths"],
        output_names=["memory", *h_names],
        opset_version=17,
        dynamo=False,
        dynamic_axes={
            "src": {0: "B", 1: "S"},
            "lengths": {0: "B"},
            "memory": {0: "B", 1: "S"},
            **{n: {1: "B"} for n in h_names},
        },
    )
    mask = torch.arange(src.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
    args = (
        torch.tensor([m.bos_id] * 3),
        hidden,
        memory,
        mask,
        torch.zeros(3, m.hidden_size),
        torch.zeros(3, dtype=torch.long),
    )
    names = ["token", *h_names, "memory", "mask", "feed", "step"]
    torch.onnx.export(
        m.decoder,
        args,
        tmp_path / "dec.onnx",
        input_names=names,
        output_names=["log_probs", *[n + "_out" for n in h_names], "attn", "feed_out"],
        opset_version=17,
        dynamo=False,
        dynamic_axes={
            "token": {0: "B"},
            "memory": {0: "B", 1: "S"},
            "mask": {0: "B", 1: "S"},
            "feed": {0: "B"},
            "step": {0: "B"},
            **{n: {1: "B"} for n in h_names},
        },
    )
    # a different batch and length than the traced one
    src2, lengths2 = encode(m, [sents[10], sents[11], sents[12], sents[13], sents[14]])
    enc = ort.InferenceSession(str(tmp_path / "enc.onnx"))
    got = enc.run(None, {"src": src2.numpy(), "lengths": lengths2.numpy()})
    with torch.no_grad():
        memory2, hidden2 = m.encoder(src2, lengths2)
    states = list(hidden2) if isinstance(hidden2, tuple) else [hidden2]
    for ref, out in zip([memory2, *states], got, strict=True):
        assert abs(ref.numpy() - out).max() < 1e-5
    mask2 = torch.arange(src2.shape[1]).unsqueeze(0) < lengths2.unsqueeze(1)
    args2 = [
        torch.tensor([m.bos_id, 5, 6, 7, 8]),
        hidden2,
        memory2,
        mask2,
        torch.randn(5, m.hidden_size),
        torch.tensor([0, 1, 2, 3, 4]),
    ]
    dec = ort.InferenceSession(str(tmp_path / "dec.onnx"))
    feeds = dict(zip(names, [args2[0], *states, memory2, mask2, args2[4], args2[5]], strict=True))
    used = {i.name for i in dec.get_inputs()}
    got = dec.run(None, {k: v.numpy() for k, v in feeds.items() if k in used})
    with torch.no_grad():
        lp, hid, attn, feed = m.decoder(*args2)
    hid = list(hid) if isinstance(hid, tuple) else [hid]
    for ref, out in zip([lp, *hid, attn, feed], got, strict=True):
        assert abs(ref.numpy() - out).max() < 1e-4


def _copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(FIXTURE / name, dst)
    return dst


def test_refuses_copy_attn(tmp_path: Path) -> None:
    path = _copy(tmp_path, MODELS[0])
    cfg = json.loads((path / "config.json").read_text())
    cfg["model"]["copy_attn"] = True
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(EoleError, match="copy_attn"):
        load_eole(path)


@pytest.mark.parametrize(
    "section,key,value,match",
    [
        ("decoder", "coverage_attn", True, r"coverage_attn .*rewrites the encoder memory"),
        ("decoder", "context_gate", "both", "context_gate"),
        ("decoder", "global_attention_function", "sparsemax", "global_attention_function"),
        ("encoder", "encoder_type", "transformer", "encoder_type"),
        ("embeddings", "position_encoding_type", "Learned", "Learned"),
    ],
)
def test_refuses_unsupported_options(
    tmp_path: Path, section: str, key: str, value: object, match: str
) -> None:
    path = _copy(tmp_path, MODELS[0])
    cfg = json.loads((path / "config.json").read_text())
    cfg["model"].setdefault(section, {})[key] = value
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(EoleError, match=match):
        load_eole(path)


def test_refuses_tokenising_transform(tmp_path: Path) -> None:
    path = _copy(tmp_path, MODELS[0])
    cfg = json.loads((path / "config.json").read_text())
    cfg["transforms"] = ["inlinetags", "filtertoolong"]  # tags rewritten: not reproduced
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(EoleError, match="transform 'inlinetags' .* is not supported"):
        load_eole(path)


def test_bpe_transform_files_and_shared_codes(tmp_path: Path) -> None:
    """The bpe transform: codes and the subword vocabulary found beside the model (Eole's
    ``${MODEL_PATH}``), the vocabulary only with a threshold above 0, the source's codes
    for the target when share_vocab and both vocabularies are the same (Eole's rule)."""
    name = "rnn_gru1_subword_nmt"
    path = _copy(tmp_path, name)
    text = load_eole(path).text
    assert text.transform == "bpe" and text.src.model == path / "joint_subword_nmt.codes"
    assert text.src.vocabulary and all(isinstance(p, str) for p in text.src.vocabulary)
    assert text.tgt.vocabulary is None and text.tgt is not text.src
    cfg = json.loads((path / "config.json").read_text())
    cfg["share_vocab"] = True
    (path / "config.json").write_text(json.dumps(cfg))
    assert load_eole(path).text.tgt is not load_eole(path).text.src  # vocabularies differ
    cfg["transforms_configs"]["bpe"]["src_vocab_threshold"] = 0  # no restriction either side
    (path / "config.json").write_text(json.dumps(cfg))
    text = load_eole(path).text
    assert text.src.vocabulary is None and text.tgt == text.src
    cfg["transforms_configs"]["bpe"]["src_vocab_threshold"] = 2
    (path / "config.json").write_text(json.dumps(cfg))
    (path / "joint_subword_nmt.vocab.en").unlink()
    with pytest.raises(
        EoleError,
        match="src_subword_vocab names .*joint_subword_nmt.vocab.en, "
        "which is not on this machine .*copy it into",
    ):
        load_eole(path)
    (path / "joint_subword_nmt.vocab.en").write_text("piece-without-count\n")
    with pytest.raises(EoleError, match="BPE vocabulary line 1 is 'piece-without-count'"):
        load_eole(path)


def test_sentencepiece_model_found_or_named(tmp_path: Path) -> None:
    spm_model = "brnn_lstm1_spm_shared"
    path = _copy(tmp_path, spm_model)
    assert load_eole(path).text.src.model == path / "joint_spm.model"
    moved = tmp_path / "moved.model"
    (path / "joint_spm.model").rename(moved)
    with pytest.raises(EoleError, match="pass --src-subword-model PATH"):
        load_eole(path)
    assert load_eole(path, moved, moved).text.tgt.model == moved
    with pytest.raises(EoleError, match="has no sentencepiece, onmt_tokenize or bpe transform"):
        load_eole(FIXTURE / WORD_MODELS[0], moved)


def test_refuses_missing_path(tmp_path: Path) -> None:
    with pytest.raises(EoleError, match="not found"):
        load_eole(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EoleError, match="config.json is missing"):
        load_eole(tmp_path / "empty")


def test_refuses_opennmt_py_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "model_step_1000.pt"
    torch.save({"model": {}, "generator": {}, "vocab": {"src": [], "tgt": []}, "opt": {}}, path)
    with pytest.raises(EoleError, match="OpenNMT-py checkpoint .*`nmt-convert opennmt-py "):
        load_eole(path)
