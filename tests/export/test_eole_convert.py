"""``nmt-convert eole`` against Eole 0.6.4's own outputs (tests/fixtures/eole, made by
Eole itself; no eole import here): convert -> bundle -> the service's decode loop with the
bundle's decoding defaults must give Eole's greedy translations token for token and its
beam-5 n-best lists; one converted model is served through the real gRPC server. The
sentencepiece-transform model translates raw text: its sources and Eole's outputs are text."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from export.convert import main
from export.eole import EOLE_DECODING
from export.parity import max_abs_diff
from models.scoring import ScoringRules
from service.bundle import load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig
from tests.export.helpers import forced_score_errors
from tests.service.server_fixtures import ServerFactory
from tests.service.server_helpers import proto_options, stub_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "eole"
MODELS = sorted(p.name for p in FIXTURE.iterdir() if (p / "config.json").is_file())
SOURCES = (FIXTURE / "src.txt").read_text(encoding="utf-8").splitlines()
# Models trained through a subword transform, and the bundle tokenizer kind that
# reproduces it (the others: whitespace tokens, "words").
SUBWORD_MODELS = {
    "brnn_lstm1_spm_shared": "pieces",
    "rnn_gru1_onmt_bpe": "onmt",
    "rnn_gru1_subword_nmt": "bpe",
}
# Those that translate raw text (the bpe transform's model takes word tokens).
RAW_MODELS = {"brnn_lstm1_spm_shared", "rnn_gru1_onmt_bpe"}


def _sources(name: str) -> list[str]:
    """What eole predict was given for ``name``: its own src.txt (raw text) or the words."""
    own = FIXTURE / name / "src.txt"
    return own.read_text(encoding="utf-8").splitlines() if own.is_file() else SOURCES


# n-best lists (of 5) that differ from Eole's, out of 300 per model: in each, the 4th/5th
# hypothesis of a sentence whose beam reached the length limit (README: Eole checkpoints).
KNOWN_NBEST_DIFFERENCES: dict[str, int] = {}


@pytest.fixture(scope="module", params=MODELS)
def converted(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("eole") / request.param / "1"
    argv = [
        "eole",
        str(FIXTURE / request.param),
        "--out",
        str(out),
        "--parity-src",
        str(FIXTURE / request.param / "src.txt")
        if request.param in RAW_MODELS
        else str(FIXTURE / "src.txt"),
        "--beam-sentences",
        "10",
    ]
    assert main(argv) == 0
    return request.param, out


def _eole(name: str, kind: str) -> list:
    return json.loads((FIXTURE / name / f"{kind}.json").read_text(encoding="utf-8"))


def _decode(bundle, beam: int, name: str):
    """(text, score) n-best lists of the fixture's sources, texts as eole predict writes
    them (space-joined words, or the sentencepiece transform's detokenised text)."""
    options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=beam)
    sources = [bundle.src_tokenizer.encode(line) for line in _sources(name)]
    nbest = decode(bundle.model, sources, options=options, special=bundle.special)
    return [[(bundle.tgt_tokenizer.decode(h.tokens), h.score) for h in hyps] for hyps in nbest]


def test_manifest_records_eole_and_its_decoding(converted):
    name, out = converted
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["decoding"] == EOLE_DECODING
    assert manifest["source_model"]["origin"]["converter"] == "eole"
    assert manifest["parity"]["greedy_sentences"] == 300
    assert manifest["parity"]["greedy_mismatches"] == 0
    kind = SUBWORD_MODELS.get(name, "words")
    assert {t["kind"] for t in manifest["tokenizers"].values()} == {kind}
    assert all(t.get("decode_bytes", True) for t in manifest["tokenizers"].values())
    # Eole's specials are not 0/1/2/3: <unk> 0, <blank> 1, <s> 2, </s> 3
    vocab = json.loads((FIXTURE / name / "vocab.json").read_text())
    ids = manifest["special_ids"]
    assert vocab["tgt"][ids["pad"]] == "<blank>" and vocab["tgt"][ids["unk"]] == "<unk>"


def test_greedy_is_eoles_token_for_token(converted):
    name, out = converted
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    got = _decode(bundle, 1, name)
    want = _eole(name, "greedy")
    same = [g[0][0] == w["tokens"] for g, w in zip(got, want, strict=True)]
    assert sum(same) == 300, [i for i, s in enumerate(same) if not s][:10]
    scores = np.array([g[0][1] for g in got]), np.array([w["score"] for w in want])
    assert np.all(np.isfinite(scores[0]))
    np.testing.assert_allclose(*scores, atol=1e-4)


def test_beam_is_eoles(converted):
    name, out = converted
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    got = _decode(bundle, 5, name)
    want = _eole(name, "beam5")
    best = sum(g[0][0] == w["nbest"][0]["tokens"] for g, w in zip(got, want, strict=True))
    lists = sum(
        [t for t, _ in g] == [h["tokens"] for h in w["nbest"]]
        for g, w in zip(got, want, strict=True)
    )
    assert best == 300
    assert lists == 300 - KNOWN_NBEST_DIFFERENCES.get(name, 0)
    diffs = [
        abs(s - h["score"])
        for g, w in zip(got, want, strict=True)
        for (t, s), h in zip(g, w["nbest"], strict=False)
        if t == h["tokens"]
    ]
    assert max(diffs) < 1e-4


@pytest.mark.parametrize("converted", ["brnn_gru1_inputfeed_dot"], indirect=True)
def test_target_prefixes_are_eoles(converted, monkeypatch):
    """``target_prefix`` against ``eole predict --tgt_file_prefix`` (prefix.json: 40
    sources, each forced to start with 1-3 words of another source's reference): greedy
    and 5-best lists token for token, with Eole's scores, which drop the prefix's
    log-prob (its search resets it after the prefix) but count its tokens in the length
    (ScoringRules.prefix_scored). Source 26 ends right after its prefix, as in Eole."""
    name, out = converted
    data = json.loads((FIXTURE / name / "prefix.json").read_text(encoding="utf-8"))
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    sentences = data["sentences"]
    sources = [bundle.src_tokenizer.encode(s["source"]) for s in sentences]
    prefixes = [tuple(bundle.tgt_tokenizer.encode(s["prefix"])) for s in sentences]
    for run, beam in (("greedy", 1), ("beam5", 5)):
        options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=beam)
        got = decode(
            bundle.model, sources, options=options, special=bundle.special, prefixes=prefixes
        )
        for g, s in zip(got, sentences, strict=True):
            want = s[run]
            assert [bundle.tgt_tokenizer.pieces(h.tokens) for h in g] == [w["tokens"] for w in want]
            assert [h.score for h in g] == pytest.approx([w["score"] for w in want], abs=1e-4)
    assert sentences[26]["greedy"][0]["tokens"] == sentences[26]["prefix"].split()
    # counting the prefix's log-prob (the standard rule) ranks other 5-best lists
    standard = ScoringRules.of

    def counted(options):
        return dataclasses.replace(standard(options), prefix_scored=True)

    monkeypatch.setattr(ScoringRules, "of", counted)
    options = dataclasses.replace(bundle.decoding, beam_size=5, n_best=5)
    got = decode(bundle.model, sources, options=options, special=bundle.special, prefixes=prefixes)
    same = sum(
        [bundle.tgt_tokenizer.pieces(h.tokens) for h in g] == [w["tokens"] for w in s["beam5"]]
        for g, s in zip(got, sentences, strict=True)
    )
    assert same < 20, same  # 4 of 40 on 2026-11-29


SCORED = ("brnn_gru1_inputfeed_dot", "rnn_gru1_subword_nmt")  # with a score.json


@pytest.mark.parametrize("converted", SCORED, indirect=True)
def test_scores_of_given_targets_are_eoles(converted):
    """``Score`` (forced decoding) against Eole 0.6.4's own gold scores (``eole predict
    --tgt``; each token's term read from its ``_score_target``): the model's own greedy
    outputs and the data's references."""
    name, out = converted
    tokens, totals = forced_score_errors(out, FIXTURE / name / "score.json")
    assert len(totals) == 40 and len(tokens) > 300
    assert tokens.max() < 1e-4 and totals.max() < 1e-4


def test_this_projects_beam_is_what_differs(converted):
    """Without the Eole search the best hypotheses already mostly agree, the n-best lists
    do not: the option is what closes the gap."""
    name, out = converted
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    bundle.decoding = dataclasses.replace(bundle.decoding, search="standard")
    got = _decode(bundle, 5, name)
    want = _eole(name, "beam5")
    lists = sum(
        [t for t, _ in g] == [h["tokens"] for h in w["nbest"]]
        for g, w in zip(got, want, strict=True)
    )
    assert lists < 290


def test_served_with_attention(tmp_path_factory):
    name = "brnn_lstm2_inputfeed_general"
    repo = tmp_path_factory.mktemp("eole-served")
    out = repo / "eole" / "1"
    assert (
        main(
            [
                "eole",
                str(FIXTURE / name),
                "--out",
                str(out),
                "--parity-limit",
                "20",
                "--beam-sentences",
                "3",
            ]
        )
        == 0
    )
    factory = ServerFactory(repo)
    try:
        server = factory()
        channel, stub = stub_for(server.port)
        from nmt_api.nmt.v1 import translator_pb2 as pb

        texts = SOURCES[:8]
        reply = stub.Translate(
            pb.TranslateRequest(
                texts=texts, options=proto_options(beam=5, n_best=5, return_attention=True)
            ),
            timeout=60,
        )
        want = _eole(name, "beam5")
        for i, t in enumerate(reply.translations):
            # Eole's search depends on n_best (it stops once n_best have finished): the
            # fixture was decoded with n_best 5
            assert [" ".join(h.tokens) for h in t.hypotheses] == [
                h["tokens"] for h in want[i]["nbest"]
            ]
            hyp = t.hypotheses[0]
            att = np.array(hyp.attention.values).reshape(hyp.attention.rows, hyp.attention.cols)
            assert att.shape == (len(hyp.tokens) + 1, len(texts[i].split()))
            assert np.all(np.isfinite(att)) and np.allclose(att.sum(1), 1.0, atol=1e-4)
        channel.close()
    finally:
        factory.close()


@pytest.mark.parametrize("name", sorted(SUBWORD_MODELS))
def test_subword_model_served_as_text(tmp_path_factory, name):
    """Text in, Eole's detokenised n-best texts out through the real gRPC server; the
    tokens and the attention's columns are subwords of Eole's own vocabulary."""
    repo = tmp_path_factory.mktemp("eole-raw-served")
    out = repo / "eole-raw" / "1"
    argv = ["eole", str(FIXTURE / name), "--out", str(out), "--beam-sentences", "3"]
    assert main([*argv, "--parity-limit", "20"]) == 0
    factory = ServerFactory(repo)
    try:
        server = factory()
        channel, stub = stub_for(server.port)
        from nmt_api.nmt.v1 import translator_pb2 as pb

        texts = _sources(name)[:8]
        reply = stub.Translate(
            pb.TranslateRequest(
                texts=texts, options=proto_options(beam=5, n_best=5, return_attention=True)
            ),
            timeout=60,
        )
        want = _eole(name, "beam5")
        vocab = json.loads((FIXTURE / name / "vocab.json").read_text(encoding="utf-8"))
        bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
        for i, t in enumerate(reply.translations):
            assert [h.text for h in t.hypotheses] == [h["tokens"] for h in want[i]["nbest"]]
            hyp = t.hypotheses[0]
            assert set(hyp.tokens) <= set(vocab["tgt"])
            att = np.array(hyp.attention.values).reshape(hyp.attention.rows, hyp.attention.cols)
            pieces = len(bundle.src_tokenizer.encode(texts[i]))
            assert att.shape == (len(hyp.tokens) + 1, pieces) and pieces > len(texts[i].split())
        channel.close()
    finally:
        factory.close()


@pytest.mark.parametrize("name", sorted(SUBWORD_MODELS))
def test_subword_model_refuses_word_options(tmp_path, capsys, name):
    out = tmp_path / "out" / "1"
    argv = ["eole", str(FIXTURE / name), "--out", str(out), "--lowercase"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--lowercase: this model's " in err
    assert not out.exists()


def test_converted_bundle_serves_without_torch(converted):
    """Word vocabularies, Eole's special ids and decoding defaults: all torch-free."""
    from tests.export.helpers import serve_without_torch

    _, out = converted
    got = serve_without_torch(out, SOURCES[:4])
    assert got["loaded"] == []
    assert all(len(hyps) == 3 for hyps in got["tokens"])


def _truncate_weights(model: Path) -> None:
    shard = model / "model.00.safetensors"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])


def _grow_src_vocab(model: Path) -> None:
    """Another model's vocab.json: one source entry more than the embeddings have rows."""
    vocab = json.loads((model / "vocab.json").read_text())
    vocab["src"].append("anotherword")
    (model / "vocab.json").write_text(json.dumps(vocab))


def _nest_in_run(model: Path) -> None:
    """The run directory given instead of its model/ inside."""
    inner = model / "model"
    inner.mkdir()
    for file in list(model.iterdir()):
        if file.is_file():
            file.rename(inner / file.name)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: (d / "vocab.json").write_text('{"tgt": []}'), "not a readable Eole model"),
        (lambda d: (d / "config.json").write_text("[]"), "not a readable Eole model"),
        (lambda d: (d / "config.json").unlink(), "config.json is missing"),
        (_truncate_weights, "unreadable safetensors file"),
        (
            _grow_src_vocab,
            "src vocabulary has 1161 entries but the model's src embeddings have 1160 rows",
        ),
        (_nest_in_run, "config.json is missing; an Eole run keeps its models below it, e.g. "),
    ],
    ids=["vocab-without-src", "config-not-an-object", "no-config", "truncated", "vocab", "run"],
)
def test_malformed_model_directories_are_one_line(tmp_path, capsys, edit, message):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(FIXTURE / "rnn_gru1_std_mlp_bridge", model)
    edit(model)
    assert main(["eole", str(model), "--out", str(tmp_path / "out" / "1")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_reduced_precision_variant_keeps_every_tokenizer_file(tmp_path):
    """A subword bundle has two files per side; the int8 variant must carry all four."""
    name = "brnn_lstm1_spm_shared"
    ref = tmp_path / "ref.es"
    ref.write_text("".join(h["tokens"] + "\n" for h in _eole(name, "greedy")), encoding="utf-8")
    out = tmp_path / "int8" / "1"
    argv = ["eole", str(FIXTURE / name), "--out", str(out), "--int8", "--force"]
    argv += ["--parity-src", str(FIXTURE / name / "src.txt"), "--parity-ref", str(ref)]
    assert main([*argv, "--parity-limit", "30", "--beam-sentences", "2"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    files = {"source.spm.model", "source.vocab.json", "target.spm.model", "target.vocab.json"}
    assert manifest["precision"] == "int8" and files <= set(manifest["files"])
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    assert bundle.src_tokenizer.kind == "pieces"


# -- Eole's own outputs for the token-banning options (tests/fixtures/eole/options) ------

OPTIONS = FIXTURE / "options"
GNMT = {"length_penalty": 0.6, "length_penalty_form": "gnmt"}
# eole predict flags of each run (make_options.sh) -> the same request here
OPTION_RUNS = {
    "greedy": {"beam_size": 1, "n_best": 1},
    "greedy_ban_unk": {"beam_size": 1, "n_best": 1, "ban_unk": True},
    "greedy_block2": {"beam_size": 1, "n_best": 1, "block_ngram_repeat": 2},
    "beam5_block2_ban_unk": {"beam_size": 5, "n_best": 5, "block_ngram_repeat": 2, "ban_unk": True},
    "beam5_block3_ignore": {"beam_size": 5, "n_best": 5, "block_ngram_repeat": 3},
    "beam5": {"beam_size": 5, "n_best": 5},
    "beam5_coverage": {"beam_size": 5, "n_best": 5, "coverage_penalty": 0.2},
    # -length_penalty wu -alpha 0.6 / -length_penalty none
    "beam5_wu": {"beam_size": 5, "n_best": 5, **GNMT},
    "greedy_wu": {"beam_size": 1, "n_best": 1, **GNMT},
    "beam5_lp_none": {"beam_size": 5, "n_best": 5, "length_penalty": 0.0},
}


def test_banning_options_are_eoles(converted):
    """100 dictionary glosses each model never saw (most words unknown to it): Eole's
    n-best lists with -ban_unk_token, -block_ngram_repeat and -ignore_when_blocking,
    -coverage_penalty wu and -length_penalty wu / none, reproduced text for text and
    score for score."""
    name, out = converted
    fixture = json.loads((OPTIONS / f"{name}.json").read_text(encoding="utf-8"))
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    texts = (OPTIONS / ("src.raw.txt" if name in RAW_MODELS else "src.words.txt")).read_text(
        encoding="utf-8"
    )
    sources = [bundle.src_tokenizer.encode(line) for line in texts.splitlines()]
    ignore = tuple(bundle.target_index[t] for t in fixture["ignore_when_blocking"])
    texts_of = {}
    for run, fields in OPTION_RUNS.items():
        if "block_ngram_repeat" in fields and run.endswith("ignore"):
            fields = {**fields, "ignore_when_blocking": ignore}
        options = dataclasses.replace(bundle.decoding, **fields)
        nbest = decode(bundle.model, sources, options=options, special=bundle.special)
        want = fixture["runs"][run]
        got = [[bundle.tgt_tokenizer.decode(h.tokens) for h in hyps] for hyps in nbest]
        same = [g == [h["tokens"] for h in w] for g, w in zip(got, want, strict=True)]
        assert all(same), (run, [i for i, s in enumerate(same) if not s][:10])
        ours = [h.score for hyps in nbest for h in hyps]
        theirs = [w["score"] for ws in want for w in ws]
        assert len(ours) == len(theirs) and np.all(np.isfinite(ours))
        # float32 scores: 1e-4 plus the part that grows with the score (the parity gate's
        # rule); coverage scores reach -22 (rnn_gru1_subword_nmt: 2.2e-4 apart there)
        assert max_abs_diff(ours, theirs, rtol=1e-5) < 1e-4, run
        texts_of[run] = got
    # each option changed some of Eole's outputs (else the check would prove nothing)
    for run in ("beam5_block2_ban_unk", "beam5_block3_ignore", "beam5_coverage", "beam5_wu",
                "beam5_lp_none"):  # fmt: skip
        assert texts_of[run] != texts_of["beam5"], run
    assert texts_of["greedy_block2"] != texts_of["greedy"]


def test_ban_unk_is_tested_where_eole_emits_unk():
    """The model trained with words seen once left out of its vocabularies emits <unk>
    (its targets had them); with -ban_unk_token Eole's outputs have none. Our outputs are
    Eole's in both runs (test_banning_options_are_eoles), so the ban is checked there."""
    runs = json.loads((OPTIONS / "rnn_lstm1_unk_vocab.json").read_text(encoding="utf-8"))["runs"]

    def with_unk(run: str) -> int:
        return sum(any("<unk>" in h["tokens"].split() for h in hyps) for hyps in runs[run])

    assert with_unk("beam5") >= 10
    assert with_unk("greedy_ban_unk") == with_unk("beam5_block2_ban_unk") == 0


def test_replace_unk_copies_what_eole_copies_or_the_word_itself(tmp_path_factory):
    """``replace_unk`` through the real server on the model that emits <unk>: where Eole
    (-replace_unk) copies a source word its vocabulary knows, the same word here; where
    the source word is unknown Eole copies its vocabulary entry, <unk>, and this server
    the word as written (CTranslate2's replace_unknowns)."""
    name = "rnn_lstm1_unk_vocab"
    repo = tmp_path_factory.mktemp("eole-replace-unk")
    out = repo / "unk" / "1"
    argv = ["eole", str(FIXTURE / name), "--out", str(out), "--beam-sentences", "3"]
    assert main([*argv, "--parity-limit", "20"]) == 0
    runs = json.loads((OPTIONS / f"{name}.json").read_text(encoding="utf-8"))["runs"]
    texts = (OPTIONS / "src.words.txt").read_text(encoding="utf-8").splitlines()
    vocab = set(json.loads((FIXTURE / name / "vocab.json").read_text(encoding="utf-8"))["src"])
    factory = ServerFactory(repo)
    try:
        server = factory()
        channel, stub = stub_for(server.port)
        from nmt_api.nmt.v1 import translator_pb2 as pb

        counts = {"copied": 0, "word": 0}
        for run, plain, beam in (
            ("greedy_replace_unk", "greedy", 1),
            ("beam5_replace_unk", "beam5", 5),
        ):
            options = proto_options(beam=beam, n_best=beam, replace_unk=True)
            translations = []
            for first in range(0, len(texts), 10):  # within the server's request limits
                request = pb.TranslateRequest(texts=texts[first : first + 10], options=options)
                translations += stub.Translate(request, timeout=120).translations
            for i, t in enumerate(translations):
                words = texts[i].split()
                assert not t.hypotheses[0].attention.values  # not asked for
                for h, w, p in zip(t.hypotheses, runs[run][i], runs[plain][i], strict=True):
                    ours, theirs, before = h.text.split(), w["tokens"].split(), p["tokens"].split()
                    assert list(h.tokens) == ours and len(ours) == len(theirs) == len(before)
                    for o, e, b in zip(ours, theirs, before, strict=True):
                        if b != "<unk>":
                            assert o == e == b
                        elif e != "<unk>":  # Eole copied a source word its vocabulary has
                            assert o == e and e in words
                            counts["copied"] += 1
                        else:  # an unknown source word: Eole copies <unk>, we the word
                            assert o in words and o not in vocab, (o, words)
                            counts["word"] += 1
        assert counts["word"] >= 10 and counts["copied"] >= 10, counts
        channel.close()
    finally:
        factory.close()


def test_normalize_transform_is_eoles(tmp_path):
    """``transforms: [normalize, sentencepiece]`` (tests/fixtures/eole/normalize: the
    sentencepiece fixture model with that config; eole predict reads transforms at predict
    time): Eole's own greedy outputs on sources with typographic punctuation, text for
    text; without the normalisation 35 of them differ."""
    here = FIXTURE / "normalize"
    model = tmp_path / "model"
    shutil.copytree(FIXTURE / "brnn_lstm1_spm_shared", model)
    shutil.copyfile(here / "model-config.json", model / "config.json")
    out = tmp_path / "bundle" / "1"
    argv = ["eole", str(model), "--out", str(out), "--parity-src", str(here / "sources.txt")]
    assert main([*argv, "--beam-sentences", "3"]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["tokenizers"]["source"]["normalize"]["lang"] == "en"
    assert "normalize" not in manifest["tokenizers"]["target"]  # the source side only
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    lines = (here / "sources.txt").read_text(encoding="utf-8").splitlines()
    sources = [bundle.src_tokenizer.encode(line) for line in lines]
    options = dataclasses.replace(bundle.decoding, beam_size=1, n_best=1)
    got = [
        hyps[0] for hyps in decode(bundle.model, sources, options=options, special=bundle.special)
    ]
    want = json.loads((here / "greedy.json").read_text(encoding="utf-8"))
    texts = [bundle.tgt_tokenizer.decode(h.tokens) for h in got]
    assert texts == [w["tokens"] for w in want]
    assert max_abs_diff([h.score for h in got], [w["score"] for w in want], rtol=1e-5) < 1e-4
    plain = json.loads((here / "greedy_without_normalize.json").read_text(encoding="utf-8"))
    assert sum(p["tokens"] != w["tokens"] for p, w in zip(plain, want, strict=True)) >= 30


def test_onmt_tokenize_vocabulary_threshold_is_eoles(tmp_path, capsys):
    """onmt_tokenize with ``src_subword_vocab`` and ``src_vocab_threshold: 3``
    (tests/fixtures/eole/onmt_vocab: the onmt_tokenize fixture model with that config;
    Eole reads transforms at predict time): Eole's greedy outputs, 300/300; 25 of them
    differ from the same model's without the restriction."""
    here = FIXTURE / "onmt_vocab"
    model = tmp_path / "model"
    shutil.copytree(FIXTURE / "rnn_gru1_onmt_bpe", model)
    shutil.copyfile(here / "model-config.json", model / "config.json")
    shutil.copyfile(here / "src.subword-vocab", model / "src.subword-vocab")
    out = tmp_path / "bundle" / "1"
    sources = FIXTURE / "rnn_gru1_onmt_bpe" / "src.txt"
    argv = ["eole", str(model), "--out", str(out), "--parity-src", str(sources)]
    assert main([*argv, "--beam-sentences", "3"]) == 0
    entries = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["tokenizers"]
    assert entries["source"]["vocabulary_threshold"] == 3 and "vocabulary_file" in entries["source"]
    assert "vocabulary_file" not in entries["target"]
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    ids = [bundle.src_tokenizer.encode(line) for line in sources.read_text("utf-8").splitlines()]
    options = dataclasses.replace(bundle.decoding, beam_size=1, n_best=1)
    got = [hyps[0] for hyps in decode(bundle.model, ids, options=options, special=bundle.special)]
    want = json.loads((here / "greedy.json").read_text(encoding="utf-8"))
    assert [bundle.tgt_tokenizer.decode(h.tokens) for h in got] == [w["tokens"] for w in want]
    assert max_abs_diff([h.score for h in got], [w["score"] for w in want], rtol=1e-5) < 1e-4
    plain = _eole("rnn_gru1_onmt_bpe", "greedy")
    assert sum(p["tokens"] != w["tokens"] for p, w in zip(plain, want, strict=True)) >= 20
    (model / "src.subword-vocab").unlink()  # named by the config, not on this machine
    capsys.readouterr()
    assert main([*argv, "--force"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "src_subword_vocab names ${MODEL_PATH}/src.subword-vocab" in err


def test_a_redirected_stderr_gets_nothing_but_the_outcome(tmp_path):
    """The README's promise for a piped or redirected stderr: torch's C++ tracer printed
    three "shape inference of prim::PackPadded type is missing" warnings there for every
    packed encoder (helper-79's audit)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "export.convert", "eole",
         str(FIXTURE / "brnn_gru1_inputfeed_dot"),
         "--out", str(tmp_path / "m" / "1"), "--parity-limit", "5", "--beam-sentences", "1"],
        cwd=root, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"wrote {tmp_path / 'm' / '1'}: greedy identical on 5")
