"""``nmt-convert ensemble`` against Marian's own ensembles (tests/fixtures/marian/ensembles,
decoded by Marian with ``--models a b ... --weights ...``) and fairseq's
(tests/fixtures/fairseq/ensembles, ``fairseq-interactive --path a:b``; neither imported
here), its gate
against wrong combinations and NaN, its refusals, and ensembles of this project's model
variants (coverage, local-p, LSTM + GRU) served like any bundle."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from export import ensemble_graphs
from export.convert import main
from export.ensemble import EnsembleError, Member, validate
from export.spec import BundleConfig
from service.bundle import load_bundle, sha256_file
from service.decoding import pad_batch
from service.loop import decode
from service.runtime import OnnxModel
from service.sessions import RuntimeConfig
from tests.export.helpers import (
    SAMPLE,
    assert_decodes_alone_as_batched,
    cli_args,
    printed_score_errors,
    tiny_model,
)
from tests.service.server_fixtures import ServerFactory
from tests.service.server_helpers import stub_for

MARIAN = Path(__file__).resolve().parents[1] / "fixtures" / "marian"
SOURCES = MARIAN.parent / "fairseq" / "data" / "train.en"  # word tokens, the members' input
# as tests/fixtures/marian/make_outputs.py's ENSEMBLES: members and Marian's --weights
ENSEMBLES = {
    "gru_deep_stack": (["s2s_gru", "s2s_deep", "nematus_stack"], [1.0, 1.0, 1.0]),
    "gru_amunln_weighted": (["s2s_gru", "amun_ln"], [1.0, 0.5]),
}
CPU = RuntimeConfig(providers=("cpu",), intra_op_threads=1)
FAIRSEQ = MARIAN.parent / "fairseq"
EOLE = MARIAN.parent / "eole"
ONMT = MARIAN.parent / "onmt_py"


@pytest.fixture(scope="module")
def members(tmp_path_factory) -> dict[str, Path]:
    """The Marian fixtures the ensembles use, converted (small gates: their own tests
    check them against Marian in full)."""
    root = tmp_path_factory.mktemp("members")
    out = {}
    for name in sorted({m for names, _ in ENSEMBLES.values() for m in names}):
        path = root / name / "1"
        argv = ["marian", str(MARIAN / name / "model.npz"), "--out", str(path), "--parity-src",
                str(SOURCES), "--parity-limit", "40", "--beam-sentences", "5"]  # fmt: skip
        assert main(argv) == 0
        out[name] = path
    return out


def _ensemble(members: dict[str, Path], out: Path, names, *extra: str) -> list[str]:
    return ["ensemble", *(str(members[n]) for n in names), "--out", str(out),
            "--parity-src", str(SOURCES), "--beam-sentences", "20", *extra]  # fmt: skip


@pytest.fixture(scope="module", params=sorted(ENSEMBLES))
def ensembled(request, members, tmp_path_factory):
    names, weights = ENSEMBLES[request.param]
    out = tmp_path_factory.mktemp("ensemble") / request.param / "1"
    assert main(_ensemble(members, out, names, "--weights", *map(str, weights))) == 0
    return request.param, out


def _marian(name: str, run: str) -> list[list[dict]]:
    data = json.loads((MARIAN / "ensembles" / name / f"{run}.json").read_text(encoding="utf-8"))
    names, weights = ENSEMBLES[name]
    # the fixture was decoded with the members and weights this test composes
    assert f"weights={weights!r}" in data["command"]
    assert all(f"'{n}/model.npz'" in data["command"] for n in names)
    return data["outputs"]


def _decode(out: Path, beam: int, lines: list[str]) -> list[list[tuple[str, float]]]:
    bundle = load_bundle(out, CPU)
    options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=beam)
    sources = [bundle.src_tokenizer.encode(line) for line in lines]
    nbest = decode(bundle.model, sources, options=options, special=bundle.special)
    return [[(bundle.tgt_tokenizer.decode(h.tokens), h.score) for h in hyps] for hyps in nbest]


@pytest.mark.parametrize(("run", "beam"), [("greedy", 1), ("beam5", 5)])
def test_ensemble_is_marians_with_its_scores(ensembled, run, beam):
    """Greedy and 5-best lists of all 300 sources as Marian's ensemble gives them (its
    shrinking beam and length limit, from the members' decoding defaults), each score
    Marian's weighted sum of the members' log-probs."""
    name, out = ensembled
    want = _marian(name, run)
    got = _decode(out, beam, SOURCES.read_text(encoding="utf-8").splitlines())
    differ = [i for i, (g, w) in enumerate(zip(got, want, strict=True))
              if [t for t, _ in g] != [h["text"] for h in w]]  # fmt: skip
    assert differ == [] and len(got) == 300
    errors = printed_score_errors(got, want)
    assert len(errors) == 300 * beam and np.all(np.isfinite(errors)) and errors.max() < 1e-4
    # and the ensemble is not one of its members: Marian's members disagree on the best
    members = [f"F{i}" for i in range(len(ENSEMBLES[name][0]))]
    assert any(w[0]["score"] != w[0][members[0]] for w in want)


def test_the_served_top_k_is_chunked(ensembled):
    """A log-linear ensemble's top-k gets the server's exact two-level rewrite
    (service.topk), as a single model's does."""
    _, out = ensembled
    on = dataclasses.replace(CPU, chunked_topk="on")
    assert load_bundle(out, on).model.chunked_topk


def test_fairseq_ensemble_is_fairseqs(tmp_path):
    """``--combine linear`` over two converted fairseq models: fairseq-interactive's own
    ensemble (``--path a:b``, the mean of the members' probabilities), greedy and 5-best
    lists token for token on all 300 sources, with its length-normalised scores."""
    bundles = []
    for name in ("lstm_word", "lstm_word2"):
        bundles.append(tmp_path / name / "1")
        argv = ["fairseq", str(FAIRSEQ / name / "checkpoint_best.pt"), "-s", "en", "-t", "es",
                "--out", str(bundles[-1]), "--parity-src", str(SOURCES), "--parity-limit", "40",
                "--beam-sentences", "5"]  # fmt: skip
        assert main(argv) == 0
    out = tmp_path / "pair" / "1"
    argv = ["ensemble", *map(str, bundles), "--combine", "linear", "--out", str(out),
            "--parity-src", str(SOURCES), "--beam-sentences", "20"]  # fmt: skip
    assert main(argv) == 0
    bundle = load_bundle(out, CPU)
    assert not bundle.model.chunked_topk  # its combination is no sum of log-probs
    sources = [bundle.src_tokenizer.encode(x) for x in SOURCES.read_text().splitlines()]
    for run, beam in (("greedy", 1), ("beam5", 5)):
        data = json.loads((FAIRSEQ / "ensembles" / "word_pair" / f"{run}.json").read_text())
        assert "--path tests/fixtures/fairseq/lstm_word/checkpoint_best.pt:" in data["command"]
        want = [s["hypotheses"] for s in data["sentences"]]
        options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=beam)
        got = decode(bundle.model, sources, options=options, special=bundle.special)
        tokens = [[bundle.tgt_tokenizer.pieces(h.tokens) for h in g] for g in got]
        assert tokens == [[h["tokens"] for h in w] for w in want]
        gaps = [abs(h.score - x["score"]) for g, w in zip(got, want, strict=True)
                for h, x in zip(g, w, strict=True)]  # fmt: skip
        assert len(gaps) == 300 * beam and np.all(np.isfinite(gaps)) and max(gaps) < 1e-5


@pytest.fixture(scope="module")
def eole_members(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("eole")
    out = []
    for name in ("brnn_gru1_inputfeed_dot", "brnn_lstm2_inputfeed_general"):
        out.append(root / name / "1")
        argv = ["eole", str(EOLE / name), "--out", str(out[-1]), "--parity-src",
                str(EOLE / "src.txt"), "--parity-limit", "40", "--beam-sentences", "5"]  # fmt: skip
        assert main(argv) == 0
    return out


def _eole_lists(out: Path, beam: int) -> tuple[list, list]:
    """The bundle's and Eole's ensemble's n-best lists of ``(text, score)``."""
    lines = (EOLE / "src.txt").read_text(encoding="utf-8").splitlines()
    got = _decode(out, beam, lines)
    data = json.loads((EOLE / "ensembles" / "gru_dot_lstm_general" / f"beam{beam}.json"
                       if beam > 1 else EOLE / "ensembles" / "gru_dot_lstm_general" /
                       "greedy.json").read_text(encoding="utf-8"))  # fmt: skip
    want = [[(h["tokens"], h["score"]) for h in (w["nbest"] if beam > 1 else [w])] for w in data]
    return got, want


def test_eole_ensemble_is_eoles_with_renormalize(eole_members, tmp_path):
    """Eole's ensemble (``eole predict -model_path a b``) normalises the mean of its
    members' logits: ``--weights 0.5 0.5 --renormalize`` gives its greedy translations and
    its 5-best lists on all 300 sources, with its scores; without ``--renormalize`` the
    greedy choices are the same (a constant per row) but most 5-best lists are not."""
    out = tmp_path / "eole" / "1"
    argv = ["ensemble", *map(str, eole_members), "--weights", "0.5", "0.5", "--renormalize",
            "--out", str(out), "--parity-src", str(EOLE / "src.txt"),
            "--beam-sentences", "20"]  # fmt: skip
    assert main(argv) == 0
    assert json.loads((out / "manifest.json").read_text())["source_model"]["renormalize"]
    assert load_bundle(out, dataclasses.replace(CPU, chunked_topk="on")).model.chunked_topk
    for beam in (1, 5):
        got, want = _eole_lists(out, beam)
        assert [[t for t, _ in g] for g in got] == [[t for t, _ in w] for w in want]
        gaps = [abs(a - b) for g, w in zip(got, want, strict=True)
                for (_, a), (_, b) in zip(g, w, strict=True)]  # fmt: skip
        assert len(gaps) == 300 * beam and np.all(np.isfinite(gaps)) and max(gaps) < 1e-4
    plain = tmp_path / "plain" / "1"
    argv = [a for a in argv if a != "--renormalize"]
    argv[argv.index(str(out))] = str(plain)
    assert main(argv) == 0
    got, want = _eole_lists(plain, 5)
    assert [g[0][0] for g in _eole_lists(plain, 1)[0]] == [w[0][0] for w in _eole_lists(out, 1)[1]]
    assert sum([t for t, _ in g] == [t for t, _ in w] for g, w in zip(got, want, strict=True)) < 150


def test_opennmt_py_ensemble_is_onmt_translates_with_renormalize(tmp_path):
    """OpenNMT-py 3.5.1's ensemble (``onmt_translate -model a.pt b.pt``: its generators
    return logits, their mean is normalised) is ``--weights 0.5 0.5 --renormalize``:
    greedy translations and 5-best lists on all 300 sources, with its scores (printed to
    4 decimals by ``-verbose``)."""
    members = []
    for name in ("brnn_lstm2_inputfeed_general", "brnn_gru2_bridge"):
        members.append(tmp_path / name / "1")
        argv = ["opennmt-py", str(ONMT / name / "model.pt"), "--out", str(members[-1]),
                "--parity-src", str(ONMT / "src.txt"), "--parity-limit", "40",
                "--beam-sentences", "5"]  # fmt: skip
        assert main(argv) == 0
    out = tmp_path / "pair" / "1"
    argv = ["ensemble", *map(str, members), "--weights", "0.5", "0.5", "--renormalize",
            "--out", str(out), "--parity-src", str(ONMT / "src.txt"),
            "--beam-sentences", "20"]  # fmt: skip
    assert main(argv) == 0
    lines = (ONMT / "src.txt").read_text(encoding="utf-8").splitlines()
    fixture = ONMT / "ensembles" / "lstm2_general_gru2_bridge"
    for run, beam in (("greedy", 1), ("beam5", 5)):
        data = json.loads((fixture / f"{run}.json").read_text(encoding="utf-8"))
        want = [[(h["tokens"], h["score"]) for h in (w["nbest"] if beam > 1 else [w])]
                for w in data]  # fmt: skip
        got = _decode(out, beam, lines)
        assert [[t for t, _ in g] for g in got] == [[t for t, _ in w] for w in want]
        gaps = [abs(a - b) for g, w in zip(got, want, strict=True)
                for (_, a), (_, b) in zip(g, w, strict=True)]  # fmt: skip
        assert len(gaps) == 300 * beam and np.all(np.isfinite(gaps)) and max(gaps) < 1e-4


def test_manifest_records_the_members(ensembled, members):
    name, out = ensembled
    names, weights = ENSEMBLES[name]
    manifest = json.loads((out / "manifest.json").read_text())
    source = manifest["source_model"]
    assert source["framework"] == "ensemble" and source["weights"] == weights
    assert source["combine"] == "log-linear"
    assert [m["path"] for m in source["members"]] == [str(members[n]) for n in names]
    own = [json.loads((members[n] / "manifest.json").read_text()) for n in names]
    assert manifest["parameters"] == sum(m["parameters"] for m in own)
    assert manifest["decoding"] == own[0]["decoding"]
    assert manifest["max_source_tokens"] == min(m["max_source_tokens"] for m in own)
    want = [f"m{i}_{s}" for i, m in enumerate(own) for s in m["state_names"]]
    assert manifest["state_names"] == want
    assert (
        manifest["parity"]["greedy_mismatches"] == 0
        and manifest["parity"]["greedy_sentences"] == 300
    )
    assert manifest["parity"]["reference"] == "members"
    for f, digest in manifest["files"].items():
        assert sha256_file(out / f) == digest
    memory = manifest["graphs"]["encoder"]["outputs"][0]
    widths = [m["graphs"]["encoder"]["outputs"][0]["shape"][-1] for m in own]
    assert memory["name"] == "memory" and memory["shape"][-1] == sum(widths)


def test_a_sentence_decodes_the_same_alone_and_batched(ensembled):
    _, out = ensembled
    assert_decodes_alone_as_batched(out, SOURCES.read_text(encoding="utf-8").splitlines()[:40])


def test_an_ensembles_forced_scores_are_its_combination(ensembled, members):
    """``Score`` through an ensemble (log-linear, Marian's rule): each forced token's
    log-prob is the weighted sum of the members' own (each member forced alone), on
    Marian's scorer's pairs for s2s_gru (tests/fixtures/marian/s2s_gru/score.json)."""
    from nmt_api.nmt.v1 import translator_pb2 as pb
    from service.messages import to_score_options

    name, out = ensembled
    names, weights = ENSEMBLES[name]
    pairs = json.loads((MARIAN / "s2s_gru" / "score.json").read_text(encoding="utf-8"))["pairs"]

    def forced(bundle_dir: Path) -> list[tuple[float, ...]]:
        bundle = load_bundle(bundle_dir, CPU)
        options = to_score_options(pb.ScoreOptions(), max_length=256, defaults=bundle.decoding)
        eos = bundle.special.eos
        ids = [bundle.src_tokenizer.encode(p["source"]) for p in pairs]
        targets = [(*bundle.tgt_tokenizer.encode(p["target"]), eos) for p in pairs]
        got = decode(bundle.model, ids, options=options, special=bundle.special, prefixes=targets)
        return [h[0].token_log_probs for h in got]

    ensemble = forced(out)
    each = [forced(members[n]) for n in names]
    gaps = [
        abs(e - sum(w * m[i][j] for w, m in zip(weights, each, strict=True)))
        for i, tokens in enumerate(ensemble)
        for j, e in enumerate(tokens)
    ]
    assert len(gaps) > 300 and max(gaps) < 1e-4


def test_served_through_the_grpc_server(members, tmp_path):
    """The ensemble as nmt-serve loads it (greedy steps, lanes, the real gRPC server):
    Marian's ensemble translations."""
    names, weights = ENSEMBLES["gru_amunln_weighted"]
    out = tmp_path / "repo" / "ens" / "1"
    assert main(_ensemble(members, out, names, "--weights", *map(str, weights))) == 0
    factory = ServerFactory(tmp_path / "repo")
    try:
        server = factory()
        channel, stub = stub_for(server.port)
        from nmt_api.nmt.v1 import translator_pb2 as pb

        texts = SOURCES.read_text(encoding="utf-8").splitlines()[:12]
        reply = stub.Translate(pb.TranslateRequest(texts=texts), timeout=60)
        want = _marian("gru_amunln_weighted", "greedy")
        assert [t.hypotheses[0].text for t in reply.translations] == [
            w[0]["text"] for w in want[:12]
        ]
        channel.close()
    finally:
        factory.close()


def _full_log_probs(model: OnnxModel, enc, rows, prev, config: BundleConfig) -> np.ndarray:
    """``(rows, V)`` float64: the step's top-k over the whole vocabulary, EOS included."""
    vocab = config.tgt_vocab_size
    out = model.step(prev_tokens=prev, parent_rows=rows, row_sentence=rows, memory=enc.memory,
                     keys=enc.keys, mask=enc.mask, states=enc.states, top_k=vocab)  # fmt: skip
    full = np.full((len(rows), vocab), np.nan)
    np.put_along_axis(full, out.topk_ids, out.topk_values, axis=1)
    full[:, config.eos_id] = out.eos_values
    return full


def test_linear_is_the_mean_of_the_members_probabilities(members, tmp_path):
    """``--combine linear`` (fairseq's rule): each log-prob is ``log mean_i p_i`` of the
    members' own, computed here in float64 from the member bundles."""
    names = ["s2s_gru", "s2s_deep"]
    out = tmp_path / "linear" / "1"
    assert main(_ensemble(members, out, names, "--combine", "linear")) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source_model"]["weights"] == [0.5, 0.5]
    # a mixture's weights are scaled to sum to 1
    scaled = tmp_path / "scaled" / "1"
    assert (
        main(_ensemble(members, scaled, names, "--combine", "linear", "--weights", "3", "1")) == 0
    )
    assert json.loads((scaled / "manifest.json").read_text())["source_model"]["weights"] == [
        0.75,
        0.25,
    ]
    ens = load_bundle(out, CPU)
    parts = [load_bundle(members[n], CPU) for n in names]
    lines = SOURCES.read_text(encoding="utf-8").splitlines()[:6]
    src, lengths = pad_batch([ens.src_tokenizer.encode(x) for x in lines], ens.config.pad_id)
    rows = np.arange(len(lines))
    prev = np.full(len(lines), ens.config.bos_id)
    cfg = ens.config
    each = [_full_log_probs(p.model, p.model.encode(src, lengths), rows, prev, cfg) for p in parts]
    with np.errstate(divide="ignore"):  # log 0: pad and bos, which no member emits
        want = np.log(np.mean(np.exp(np.stack(each)), axis=0))
    got = _full_log_probs(ens.model, ens.model.encode(src, lengths), rows, prev, cfg)
    finite = np.isfinite(want)
    assert np.array_equal(finite, np.isfinite(got)) and finite.sum() > cfg.tgt_vocab_size
    assert np.abs(got[finite] - want[finite]).max() < 1e-5
    # a mean of probabilities is not a mean of log-probs
    assert np.abs(np.mean(np.stack(each), axis=0)[finite] - want[finite]).max() > 1e-2


def test_gate_fails_on_a_wrong_combination(members, tmp_path, capsys, monkeypatch):
    compose = ensemble_graphs.compose_decoder

    def wrong(members, weights, combine, path, *rest):
        return compose(members, [w * 1.01 for w in weights], combine, path, *rest)

    monkeypatch.setattr(ensemble_graphs, "compose_decoder", wrong)
    out = tmp_path / "wrong" / "1"
    assert main(_ensemble(members, out, ["s2s_gru", "s2s_deep"])) == 1
    err = capsys.readouterr().err
    assert "gate failed, nothing written: combined log-probs differ by" in err
    assert not out.exists() and not [p for p in out.parent.iterdir()]


def test_gate_fails_on_nan(members, tmp_path, capsys, monkeypatch):
    """A NaN in the composed graph (here its second weight) fails the gate."""
    compose = ensemble_graphs.compose_decoder

    def poisoned(members, weights, combine, path, *rest):
        compose(members, weights, combine, path, *rest)
        model = onnx.load(str(path))
        for w in model.graph.initializer:
            if w.name == "ensemble/ranked_w1":
                w.CopyFrom(onnx.numpy_helper.from_array(np.array(np.nan, np.float32), w.name))
        onnx.save(model, str(path))

    monkeypatch.setattr(ensemble_graphs, "compose_decoder", poisoned)
    out = tmp_path / "nan" / "1"
    assert main(_ensemble(members, out, ["s2s_gru", "s2s_deep"], "--weights", "1", "0.5")) == 1
    assert "non-finite values in combined log-probs" in capsys.readouterr().err
    assert not out.exists()


def test_an_empty_parity_file_is_an_error(members, tmp_path, capsys):
    empty = tmp_path / "empty.en"
    empty.write_text("\n  \n")
    argv = _ensemble(members, tmp_path / "e" / "1", ["s2s_gru", "s2s_deep"])
    argv[argv.index(str(SOURCES))] = str(empty)
    assert main(argv) == 2
    assert "no parity sentences" in capsys.readouterr().err


def _edited(members, tmp_path: Path, edit) -> Path:
    """A copy of the s2s_deep member with ``edit(manifest, directory)`` applied."""
    copy = tmp_path / "edited" / "1"
    shutil.copytree(members["s2s_deep"], copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    edit(manifest, copy)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


@pytest.mark.parametrize("graphs", [[], {"encoder": {"outputs": ["memory"]}}, None])
def test_a_manifest_without_the_memorys_width_is_one_line(members, tmp_path, capsys, graphs):
    other = _edited(members, tmp_path, _set("graphs", graphs))
    argv = ["ensemble", str(members["s2s_gru"]), str(other), "--out", str(tmp_path / "o" / "1")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "the manifest does not give the width of the encoder's 'memory'" in err
    assert "\n" not in err


def _set(key, value):
    return lambda manifest, _: manifest.__setitem__(key, value)


def _other_vocabulary(manifest, directory):
    target = manifest["tokenizers"]["target"]["file"]
    (directory / target).write_bytes((directory / target).read_bytes() + b"\n")
    manifest["files"][target] = sha256_file(directory / target)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set("precision", "fp16"), "differ in their precision"),
        (_set("decoding", {"length_penalty": 0.6}), "differ in their decoding defaults"),
        (
            _other_vocabulary,
            r"differ in their tokenizer file target\.\w+\.\w+ \(sha256\) \(\w{12} vs \w{12}\)",
        ),
        (lambda m, _: m["special_ids"].__setitem__("unk", 5), "differ in their special ids"),
    ],
)
def test_members_that_differ_are_refused_by_name(members, tmp_path, capsys, edit, message):
    other = _edited(members, tmp_path, edit)
    argv = ["ensemble", str(members["s2s_gru"]), str(other), "--out", str(tmp_path / "o" / "1")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert re.search(f"^nmt-convert: error: member 2 .* and member 1 .* {message}", err)
    assert "\n" not in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--weights", "1"], "1 weights for 2 bundles; give one each"),
        (["--weights", "1", "0"], "weights must be numbers from 1e-06 to 1e+06, got 0.0"),
        (["--weights", "1", "nan"], "weights must be numbers from 1e-06 to 1e+06, got nan"),
        (["--weights", "inf", "1"], "got inf"),
        (["--weights", "1e-46", "1"], "got 1e-46"),  # 0 in float32
        (["--weights", "1e39", "1"], "got 1e+39"),  # infinity in float32
        (["--max-source-tokens", "100000"], "is above what the members were verified for"),
        (["--beam-sentences", "0"], "--beam-sentences must be >= 1, got 0"),
    ],
)
def test_bad_options_are_one_line_errors(members, tmp_path, capsys, extra, message):
    argv = _ensemble(members, tmp_path / "o" / "1", ["s2s_gru", "s2s_deep"], *extra)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.startswith("nmt-convert: error: ") and "\n" not in err


def test_what_is_not_an_ensemble_is_refused(members, tmp_path, capsys):
    out = ["--out", str(tmp_path / "o" / "1")]
    assert main(["ensemble", str(members["s2s_gru"]), *out]) == 2
    assert "at least two bundles, got 1" in capsys.readouterr().err
    assert main(["ensemble", str(members["s2s_gru"]), str(tmp_path / "nothing"), *out]) == 2
    assert "member 2 (" in (err := capsys.readouterr().err) and "not a bundle directory" in err
    (tmp_path / "empty").mkdir()
    assert main(["ensemble", str(members["s2s_gru"]), str(tmp_path / "empty"), *out]) == 2
    assert "has no manifest.json" in capsys.readouterr().err
    deep = members["s2s_deep"]
    for out in (deep, deep / "sub" / "1", deep.parent):  # --force replaces --out whole
        argv = _ensemble(members, out, ["s2s_gru", "s2s_deep"], "--force")
        assert main(argv) == 2
        assert "is member 2's directory, inside it or holds it" in capsys.readouterr().err
    assert (members["s2s_deep"] / "manifest.json").is_file()
    taken = tmp_path / "taken" / "1"
    taken.mkdir(parents=True)
    (taken / "x").write_text("x")
    argv = _ensemble(members, taken, ["s2s_gru", "s2s_deep"])
    assert main(argv) == 2
    assert "exists and is not empty; pass --force" in capsys.readouterr().err


def test_two_coverage_members_are_refused():
    def member(i: int, states: tuple[str, ...]) -> Member:
        config = BundleConfig(10, 10, 0, 1, 2, 3, states)
        manifest = {"special_ids": {}, "files": {}, "precision": "fp32"}
        return Member(i, Path(f"m{i}"), manifest, config, 4, 4, states)

    with pytest.raises(EnsembleError, match="members 1 and 2 both have coverage attention"):
        validate([member(0, ("hidden", "coverage")), member(1, ("hidden", "coverage"))],
                 [1.0, 1.0], "log-linear")  # fmt: skip
    validate([member(0, ("hidden", "coverage")), member(1, ("hidden",))], [1.0, 1.0], "linear")


VARIANTS = {
    "gru_additive": dict(),
    "lstm_luong_general": dict(rnn_type="lstm", placement="luong", attention="general"),
    "coverage": dict(coverage=True),
    "local_p": dict(placement="luong", attention="local-p"),
}


@pytest.fixture(scope="module")
def variant_bundles(tmp_path_factory, tokenizers) -> dict[str, Path]:
    """This project's model variants, exported with the same tokenizers."""
    from export.cli import main as export_main
    from models.checkpoint import save_checkpoint

    src, tgt = tokenizers
    root = tmp_path_factory.mktemp("variants")
    out = {}
    for seed, (name, overrides) in enumerate(sorted(VARIANTS.items())):
        model = tiny_model(seed=seed, src_vocab_size=src.vocab_size,
                           tgt_vocab_size=tgt.vocab_size, **overrides)  # fmt: skip
        ckpt = root / name / "model.pt"
        ckpt.parent.mkdir()
        save_checkpoint(ckpt, model, src, tgt, meta={"step": 0})
        assert export_main(cli_args(ckpt, root / name / "1")) == 0
        out[name] = root / name / "1"
    return out


@pytest.mark.parametrize("combine", ["log-linear", "linear"])
def test_every_variant_in_one_ensemble(variant_bundles, tmp_path, combine):
    """GRU and LSTM, Bahdanau and Luong, coverage (its state keeps its name, which the
    server's pool widens) and local-p in one ensemble: the gate passes, a sentence decodes
    the same alone and batched (scores within the 1e-5 of its members: this project's fp32
    bundles are not bit-exact there), and nmt-serve's loader takes it."""
    out = tmp_path / "variants" / "1"
    argv = ["ensemble", *(str(variant_bundles[n]) for n in sorted(VARIANTS)), "--out", str(out),
            "--parity-src", str(SAMPLE / "sample.en"), "--parity-limit", "30",
            "--beam-sentences", "10", "--combine", combine]  # fmt: skip
    assert main(argv) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert "coverage" in manifest["state_names"]
    assert manifest["parity"]["beam_mismatches"] == 0
    lines = (SAMPLE / "sample.en").read_text(encoding="utf-8").splitlines()[:30]
    assert_decodes_alone_as_batched(out, lines, score_atol=1e-5)


def test_int8_members_make_an_int8_ensemble(variant_bundles, tmp_path):
    """Members exported with --int8 (integer matrix products, per-row scales) compose
    like fp32 ones: the ensemble is int8 and decodes alike alone and batched."""
    from export.cli import main as export_main

    members = []
    for name in ("gru_additive", "lstm_luong_general"):
        members.append(tmp_path / name / "1")
        ckpt = variant_bundles[name].parent / "model.pt"
        assert export_main(cli_args(ckpt, members[-1], "--int8")) == 0
    out = tmp_path / "int8" / "1"
    argv = ["ensemble", *map(str, members), "--out", str(out), "--parity-src",
            str(SAMPLE / "sample.en"), "--parity-limit", "30",
            "--beam-sentences", "10"]  # fmt: skip
    assert main(argv) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["precision"] == "int8"
    ops = [n.op_type for n in onnx.load(str(out / "decoder.onnx")).graph.node]
    assert ops.count("MatMulInteger") >= 2 and ops.count("TopK") == 1
    lines = (SAMPLE / "sample.en").read_text(encoding="utf-8").splitlines()[:30]
    assert_decodes_alone_as_batched(out, lines, score_atol=1e-5)


def test_an_encoder_without_lengths_and_copies_of_one_model(tmp_path):
    """The PyTorch tutorial's modules (its encoder takes no lengths: encoded in groups of
    equal length) ensembled with themselves at weights 1/2: the ensemble keeps the rule
    and translates every sample sentence as the model alone does, scores included."""
    import importlib

    from export.user import export_modules

    tutorial = importlib.import_module("tests.export.user_models.pytorch_tutorial")
    member = tmp_path / "tutorial" / "1"
    export_modules(tutorial.load(), member, parity_src=SAMPLE / "sample.en", parity_limit=30,
                   beam_sentences=5)  # fmt: skip
    out = tmp_path / "twice" / "1"
    argv = ["ensemble", str(member), str(member), "--weights", "0.5", "0.5", "--out", str(out),
            "--parity-src", str(SAMPLE / "sample.en"), "--beam-sentences", "10"]  # fmt: skip
    assert main(argv) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["exact_lengths"] is True
    lines = (SAMPLE / "sample.en").read_text(encoding="utf-8").splitlines()
    for beam in (1, 5):
        one = _decode(member, beam, lines)
        both = _decode(out, beam, lines)
        assert [[t for t, _ in g] for g in both] == [[t for t, _ in g] for g in one]
        gaps = [abs(a - b) for g, h in zip(both, one, strict=True)
                for (_, a), (_, b) in zip(g, h, strict=True)]  # fmt: skip
        assert len(gaps) == 300 * beam and max(gaps) < 1e-5


def test_an_ensemble_of_ensembles(members, tmp_path, capsys):
    """An ensemble is a bundle, so it can be a member: its states get a second prefix and
    the gate passes; --renormalize refuses it (its top-k reads a sum, not log-probs plus
    the blocked row) unless it was itself renormalised."""
    inner = tmp_path / "inner" / "1"
    assert main(_ensemble(members, inner, ["s2s_gru", "s2s_deep"])) == 0
    outer = tmp_path / "outer" / "1"
    argv = ["ensemble", str(inner), str(members["amun_ln"]), "--out", str(outer),
            "--parity-src", str(SOURCES), "--beam-sentences", "10"]  # fmt: skip
    assert main(argv) == 0
    names = json.loads((outer / "manifest.json").read_text())["state_names"]
    assert names[0].startswith("m0_m0_") and names[-1].startswith("m1_")
    assert main([*argv, "--renormalize", "--force"]) == 2
    err = capsys.readouterr().err
    assert "member 1 (" in err and "which --renormalize needs" in err
