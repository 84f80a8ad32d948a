"""``nmt-convert joeynmt`` against Joey NMT 2.3.0's own outputs (tests/fixtures/joeynmt,
made by Joey NMT itself; no joeynmt import here): convert -> bundle -> the service's
decode loop with the bundle's decoding defaults must give Joey's greedy translations
token for token, with its scores, and its beam-5 n-best lists (beam_alpha 1.0); one
converted model is served through the real gRPC server."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from export.convert import main
from service.bundle import load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig
from tests.export.helpers import forced_score_errors, served_with_attention

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "joeynmt"
MODELS = sorted(p.name for p in FIXTURE.iterdir() if (p / "config.yaml").is_file())
# the bundle tokenizer of each model's level (the others: word level, "words")
KINDS = {"gru_luong_zero_bpe": "bpe", "gru_bahdanau_spm": "pieces"}
RAW = {"gru_bahdanau_spm"}  # SentencePiece: Joey was given the raw text


def _src_file(name: str) -> Path:
    return FIXTURE / ("raw_src.txt" if name in RAW else "src.txt")


def _sources(name: str) -> list[str]:
    return _src_file(name).read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module", params=MODELS)
def converted(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("joey") / request.param / "1"
    argv = ["joeynmt", str(FIXTURE / request.param / "config.yaml"), "--out", str(out),
            "--parity-src", str(_src_file(request.param)), "--beam-sentences", "10"]  # fmt: skip
    assert main(argv) == 0
    return request.param, out


def _joey(name: str, kind: str) -> list:
    return json.loads((FIXTURE / name / f"{kind}.json").read_text(encoding="utf-8"))


def _is_filler(h: dict) -> bool:
    """Joey fills an n-best list that found fewer than n hypotheses with ``(["<unk>"],
    -1.0)`` entries (after the real ones, whatever their scores): nothing it decoded."""
    return h["tokens"] == ["<unk>"] and h["score"] == -1.0 and not h["eos"]


def _joey_nbest(name: str) -> list[list[dict]]:
    return [[h for h in w["nbest"] if not _is_filler(h)] for w in _joey(name, "beam5")]


def _decode(out: Path, beam: int, **changes):
    """Token and score n-best lists of the fixture's sources (the bundle's defaults)."""
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=beam, **changes)
    sources = [bundle.src_tokenizer.encode(line) for line in _sources(out.parent.name)]
    nbest = decode(bundle.model, sources, options=options, special=bundle.special)
    tgt = bundle.tgt_tokenizer
    return [[(tgt.pieces(h.tokens), tgt.decode(h.tokens), h.score) for h in hyps] for hyps in nbest]


SCORED = ("gru_bahdanau_bridge", "gru_bahdanau_spm", "gru_luong_zero_bpe")  # with a score.json


@pytest.mark.parametrize("converted", ["gru_bahdanau_bridge"], indirect=True)
def test_token_scores_of_joeys_beam_add_up(converted):
    """``return_token_scores`` under Joey's beam search (which keeps finished rows in its
    beam, fed EOS): the same n-best lists and scores, each hypothesis's token log-probs
    adding up to its log-prob, and equal to what Score gives its tokens."""
    from nmt_api.nmt.v1 import translator_pb2 as pb
    from service.messages import to_score_options

    name, out = converted
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    sources = [bundle.src_tokenizer.encode(line) for line in _sources(name)[:40]]
    options = dataclasses.replace(bundle.decoding, beam_size=5, n_best=3)
    plain = decode(bundle.model, sources, options=options, special=bundle.special)
    kept_options = dataclasses.replace(options, return_token_scores=True)
    kept = decode(bundle.model, sources, options=kept_options, special=bundle.special)
    best = []
    for p, k in zip(plain, kept, strict=True):
        assert [(h.tokens, h.score) for h in p] == [(h.tokens, h.score) for h in k]
        for h in k:
            assert sum(h.token_log_probs) == pytest.approx(h.log_prob, abs=1e-4)  # float32 sums
        best.append(k[0])
    scoring = to_score_options(pb.ScoreOptions(), max_length=256, defaults=bundle.decoding)
    eos = bundle.special.eos
    forced = [(*h.tokens, eos) for h in best]
    scored = decode(bundle.model, sources, options=scoring, special=bundle.special, prefixes=forced)
    ended = [(h, s[0]) for h, s in zip(best, scored, strict=True)
             if len(h.token_log_probs) == len(h.tokens) + 1]  # fmt: skip
    assert len(ended) > 30
    for h, s in ended:
        assert h.token_log_probs == pytest.approx(s.token_log_probs, abs=1e-5)


@pytest.mark.parametrize("converted", SCORED, indirect=True)
def test_scores_of_given_targets_are_joeys(converted):
    """``Score`` (forced decoding) against Joey NMT's own ``return_prob: ref`` (its
    per-token log-probs of the reference, ``joeynmt test --save-scores``): the model's
    own greedy outputs and the data's references."""
    name, out = converted
    tokens, totals = forced_score_errors(out, FIXTURE / name / "score.json")
    assert len(totals) == 40 and len(tokens) > 300
    assert tokens.max() < 1e-4 and totals.max() < 1e-4


def test_manifest_records_joey_and_its_rules(converted):
    name, out = converted
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["decoding"] == {
        "max_length_ratio": 1.5, "max_length_offset": 1, "min_length": 1,
        "length_penalty": 0.0, "search": "joeynmt",
    }  # fmt: skip
    assert manifest["source_model"]["origin"]["converter"] == "joeynmt"
    assert manifest["parity"]["greedy_sentences"] == 300
    assert manifest["parity"]["greedy_mismatches"] == 0
    assert manifest["special_ids"] == {"pad": 1, "unk": 0, "bos": 2, "eos": 3}
    kind = KINDS.get(name, "words")
    source, target = manifest["tokenizers"]["source"], manifest["tokenizers"]["target"]
    assert source["kind"] == target["kind"] == kind
    assert source["end_tokens"] == ["</s>"]  # Joey appends EOS to every source
    assert not target.get("end_tokens")


def test_greedy_is_joeys_token_for_token(converted):
    name, out = converted
    got = _decode(out, 1)
    want = _joey(name, "greedy")
    same = [g[0][0] == w["tokens"] for g, w in zip(got, want, strict=True)]
    assert sum(same) == 300, [i for i, s in enumerate(same) if not s][:10]
    assert [g[0][1] for g in got] == [w["text"] for w in want]
    # Joey's score: summed log-probs, its EOS's too unless it stopped at the limit
    assert sum(not w["eos"] for w in want) > 0, "no sentence reached the length limit"
    scores = np.array([g[0][2] for g in got]), np.array([w["score"] for w in want])
    assert np.all(np.isfinite(scores[0]))
    # float32 sums over up to 60 steps: within 3e-5 a token
    steps = np.array([len(w["tokens"]) + 1 for w in want])
    assert np.all(np.abs(scores[0] - scores[1]) <= 3e-5 * steps)


def test_beam_is_joeys(converted):
    name, out = converted
    got = _decode(out, 5, length_penalty=1.0)  # the fixture's beam_alpha
    want = _joey_nbest(name)
    assert sum(len(w) < 5 for w in want) > 50  # lists Joey filled: fewer hypotheses here too
    lists = [[t for t, _, _ in g] == [h["tokens"] for h in w]
             for g, w in zip(got, want, strict=True)]  # fmt: skip
    assert sum(lists) == 300, [i for i, ok in enumerate(lists) if not ok][:10]
    diffs = [abs(s - h["score"]) / (len(h["tokens"]) + 1) for g, w in zip(got, want, strict=True)
             for (_, _, s), h in zip(g, w, strict=True)]  # fmt: skip
    assert max(diffs) < 3e-5


def test_this_projects_beam_is_what_differs(converted):
    """With this project's beam search the n-best lists mostly differ: the search
    option is what makes them Joey's."""
    name, out = converted
    got = _decode(out, 5, length_penalty=1.0, search="standard")
    want = _joey_nbest(name)
    lists = sum([t for t, _, _ in g] == [h["tokens"] for h in w]
                for g, w in zip(got, want, strict=True))  # fmt: skip
    assert lists < 200


@pytest.mark.parametrize("name", sorted(KINDS))
def test_served_as_text_with_attention(tmp_path_factory, name):
    """The subword models through the real gRPC server: Joey's detokenised greedy text,
    the attention's columns the source's pieces and its ``</s>``."""
    repo = tmp_path_factory.mktemp("joey-served")
    out = repo / "joey" / "1"
    argv = ["joeynmt", str(FIXTURE / name / "config.yaml"), "--out", str(out),
            "--parity-limit", "20", "--beam-sentences", "3"]  # fmt: skip
    assert main(argv) == 0
    texts = _sources(name)[:8]
    want = _joey(name, "greedy")
    served = served_with_attention(repo, texts)
    assert len(served) == len(texts)
    for i, (hyp, att) in enumerate(served):
        assert hyp.text == want[i]["text"]
        assert list(hyp.tokens) == want[i]["tokens"]
        assert att.shape[1] == len(hyp.attention.source_tokens) > len(texts[i].split())
        assert hyp.attention.source_tokens[-1] == "</s>"
        assert np.all(np.isfinite(att)) and np.allclose(att.sum(1), 1.0, atol=1e-4)


def _edit_config(model: Path, change) -> None:
    path = model / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    change(cfg)
    path.write_text(yaml.safe_dump(cfg))


def _set(section: str, key: str, value):
    def change(cfg):
        node = cfg
        for part in section.split("."):
            node = node.setdefault(part, {})
        if value is _DELETE:
            del node[key]
        else:
            node[key] = value

    return lambda model: _edit_config(model, change)


_DELETE = object()


def _other_checkpoint(model: Path) -> None:
    shutil.copyfile(FIXTURE / "lstm2_luong_last" / "best.ckpt", model / "best.ckpt")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set("model.encoder", "type", "transformer"), "model.encoder.type: 'transformer' is"),
        (_set("model.decoder", "activation", "relu"), "model.decoder.activation: 'relu' is"),
        (_set("model.encoder", "bidirectional", False), "model.encoder.bidirectional: False"),
        (_set("model.decoder", "attention", "dot"), "model.decoder.attention: 'dot' is not"),
        (_set("data.src", "level", "char"), "'char' is not supported (supported: word, bpe (Sen"),
        (_set("data.src", "normalize", True), "data.src.normalize: True is not supported"),
        (_set("data.trg", "tokenizer_cfg", {"pretokenizer": "moses"}), "pretokenizer: 'moses'"),
        (_set("data.special_symbols", "lang_tags", ["<de>"]), "special_symbols.lang_tags"),
        (lambda m: (m / "best.ckpt").unlink(), "checkpoint not found: "),
        (lambda m: (m / "best.ckpt").write_bytes(b"not a checkpoint"), "(not a torch file, or"),
        (lambda m: (m / "config.yaml").write_text("- a list\n"), "no model section"),
        (lambda m: (m / "config.yaml").write_text("model: {a: [}\n"), "not a readable Joey NMT c"),
        (_set("model.decoder", "type", _DELETE), "model.decoder.type: 'transformer' is"),
        (_set("testing", "no_repeat_ngram_size", 3), "testing.no_repeat_ngram_size: 3 is"),
        (_set("testing", "repetition_penalty", 1.5), "testing.repetition_penalty: 1.5 is"),
        (_set("data.src", "level", "bpe"), "data.src.tokenizer_cfg.model_file is not set: n"),
        (lambda m: (_set("data.src", "level", "bpe")(m), _set("data.src", "tokenizer_type",
                                                              "fastbpe")(m)),
         "data.src.tokenizer_type: 'fastbpe' is"),
        (_set("model", "encoder", "gru"), "config model.encoder: expected a mapping, got str"),
        (_set("data.special_symbols", "eos_id", "x"), "config eos_id: 'x' is not a number"),
        (_set("data.special_symbols", "eos_id", 5000), "special ids {'eos': 5000} lie outside"),
        # torch's "Error(s) in loading state_dict for GRU:" and the line that says what
        (_other_checkpoint, "does not fit config.yaml: Error(s) in loading state_dict for GRU"),
        (
            lambda m: shutil.copyfile(FIXTURE / "gru_luong_zero_bpe" / "src_vocab.txt",
                                      m / "src_vocab.txt"),  # fmt: skip
            "the src vocabulary has",
        ),
    ],
    ids=["transformer", "relu", "unidirectional", "attention", "char", "normalize", "moses",
         "lang-tags", "no-checkpoint", "bad-checkpoint", "bad-config", "yaml", "joey-default-type",
         "ngram", "repetition", "bpe-default-spm", "fastbpe", "section-type", "id-type", "id-range",
         "other-checkpoint", "other-vocab"],
)  # fmt: skip
def test_what_the_bundle_cannot_express_is_refused_in_one_line(tmp_path, capsys, edit, message):
    model = tmp_path / "model"
    shutil.copytree(FIXTURE / "gru_bahdanau_bridge", model)
    for name in ("greedy.json", "beam5.json"):
        (model / name).unlink(missing_ok=True)
    edit(model)
    assert main(["joeynmt", str(model / "config.yaml"), "--out", str(tmp_path / "o" / "1")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "o" / "1").exists()


def test_the_config_training_started_from_points_to_the_model_directory(tmp_path, capsys):
    """Joey writes its copy of the config, and the checkpoints, to model_dir: given the
    config it was started with (configs/small.yaml), the converter says which to give."""
    model = tmp_path / "model"
    shutil.copytree(FIXTURE / "gru_bahdanau_bridge", model)
    started = tmp_path / "configs" / "small.yaml"
    started.parent.mkdir()
    text = (model / "config.yaml").read_text()
    started.write_text(f"model_dir: {model}\n" + text.replace("model_dir:", "old_model_dir:"))
    assert main(["joeynmt", str(started), "--out", str(tmp_path / "o" / "1")]) == 2
    err = capsys.readouterr().err
    assert f"convert the model directory's copy, {model / 'config.yaml'}" in err, err


def test_a_checkpoint_elsewhere_is_given_by_path(tmp_path):
    """Joey keeps several checkpoints (``N.ckpt``, ``best.ckpt`` a link to one):
    ``--checkpoint`` picks one; the bundle records which."""
    model = tmp_path / "model"
    shutil.copytree(FIXTURE / "lstm2_luong_last", model)
    (model / "best.ckpt").rename(tmp_path / "3000.ckpt")
    out = tmp_path / "o" / "1"
    argv = ["joeynmt", str(model / "config.yaml"), "--checkpoint", str(tmp_path / "3000.ckpt"),
            "--out", str(out), "--parity-limit", "10", "--beam-sentences", "2"]  # fmt: skip
    assert main(argv) == 0
    origin = json.loads((out / "manifest.json").read_text())["source_model"]["origin"]
    assert origin["checkpoint"] == str(tmp_path / "3000.ckpt")


def test_testing_options_as_joey_applies_them(tmp_path):
    """``min_output_length`` is parsed by Joey 2.3 and never passed to its search (the
    bundle keeps 1, and its greedy output stays Joey's); a fixed ``max_output_length`` is
    the bundle's limit, EOS counted; the obsolete ``alpha`` wins over ``beam_alpha``."""
    model = tmp_path / "model"
    shutil.copytree(FIXTURE / "gru_bahdanau_bridge", model)
    _set("testing", "min_output_length", 4)(model)
    _set("testing", "beam_alpha", 0.5)(model)
    _set("testing", "alpha", 1.0)(model)
    out = tmp_path / "o" / "1"
    argv = ["joeynmt", str(model / "config.yaml"), "--out", str(out), "--parity-limit", "10",
            "--beam-sentences", "2"]  # fmt: skip
    assert main(argv) == 0
    decoding = json.loads((out / "manifest.json").read_text())["decoding"]
    assert decoding["min_length"] == 1 and decoding["length_penalty"] == 1.0
    got = _decode(out, 1)
    assert [g[0][0] for g in got] == [w["tokens"] for w in _joey("gru_bahdanau_bridge", "greedy")]
    _set("testing", "max_output_length", 300)(model)
    assert main([*argv, "--force"]) == 0
    decoding = json.loads((out / "manifest.json").read_text())["decoding"]
    assert (decoding["max_length"], decoding["max_length_ratio"]) == (301, 0.0)
    assert decoding["max_length_offset"] == 301


def test_tied_embeddings_take_the_source_scale():
    """Joey's tied target embeddings are the source's ``Embeddings`` object, its
    ``scale`` too, whatever the decoder's section says."""
    from export.joeynmt import JoeyConfig, _weights, build_modules

    cfg = JoeyConfig.read(FIXTURE / "lstm2_luong_last" / "config.yaml")
    w = _weights(FIXTURE / "lstm2_luong_last" / "best.ckpt")
    encoder, step = build_modules(cfg, w)
    assert encoder.scale and not step.scale  # the fixture scales the source side only
    tied = dataclasses.replace(cfg, tied_embeddings=True)
    encoder, step = build_modules(tied, w)
    assert encoder.scale and step.scale
