"""``nmt-convert fairseq`` against fairseq's own outputs (tests/fixtures/fairseq, made by
fairseq-train and fairseq-interactive themselves; no fairseq import here): convert ->
bundle -> the service's decode loop with the bundle's decoding defaults must give
fairseq-interactive's greedy translations and beam-5 n-best lists token for token, with
its scores; one converted model is served through the real gRPC server."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from export.convert import main
from service.alignment import hard_alignment, source_span
from service.bundle import load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig
from tests.export.helpers import assert_decodes_alone_as_batched, forced_score_errors
from tests.service.server_fixtures import ServerFactory
from tests.service.server_helpers import proto_options, stub_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "fairseq"
DATA = FIXTURE / "data"
# each model's fairseq-interactive text flags and its input (the word models read the
# word-tokenised sources, the SentencePiece one the raw text)
MODELS = {
    "lstm_word": ([], DATA / "train.en"),
    "lstm_word2": ([], DATA / "train.en"),  # bidirectional, lstm_word's dictionaries
    "lstm_bi2_bpe": (["--bpe", "subword_nmt", "--bpe-codes", str(DATA / "bpe300.codes")],
                     DATA / "train.en"),
    "lstm_wiseman_spm": (["--bpe", "sentencepiece", "--sentencepiece-model",
                          str(DATA / "spm400.model")], DATA / "raw.en"),
}  # fmt: skip
KINDS = {
    "lstm_word": "words",
    "lstm_word2": "words",
    "lstm_bi2_bpe": "bpe",
    "lstm_wiseman_spm": "pieces",
}


def _argv(name: str, out: Path, *extra: str) -> list[str]:
    flags, src = MODELS[name]
    return ["fairseq", str(FIXTURE / name / "checkpoint_best.pt"), "-s", "en", "-t", "es",
            *flags, "--out", str(out), "--parity-src", str(src), *extra]  # fmt: skip


@pytest.fixture(scope="module", params=sorted(MODELS))
def converted(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("fairseq") / request.param / "1"
    assert main(_argv(request.param, out, "--beam-sentences", "10")) == 0
    return request.param, out


def _fairseq(name: str, file: str) -> list[list[dict]]:
    data = json.loads((FIXTURE / name / file).read_text(encoding="utf-8"))
    return [s["hypotheses"] for s in data["sentences"]]


def _decode(out: Path, name: str, beam: int, n_best: int | None = None, **changes):
    """``(pieces, text, score)`` n-best lists of the model's sources (bundle defaults)."""
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=n_best or beam, **changes)
    lines = MODELS[name][1].read_text(encoding="utf-8").splitlines()
    sources = [bundle.src_tokenizer.encode(line) for line in lines]
    nbest = decode(bundle.model, sources, options=options, special=bundle.special)
    tgt = bundle.tgt_tokenizer
    return [[(tgt.pieces(h.tokens), tgt.decode(h.tokens), h.score) for h in hyps] for hyps in nbest]


def _same_lists(got, want) -> list[int]:
    """Indices of sentences whose n-best token lists differ."""
    return [i for i, (g, w) in enumerate(zip(got, want, strict=True))
            if [t for t, _, _ in g] != [h["tokens"] for h in w]]  # fmt: skip


def _score_diffs(got, want) -> np.ndarray:
    return np.array([abs(s - h["score"]) for g, w in zip(got, want, strict=True)
                     for (_, _, s), h in zip(g, w, strict=True)])  # fmt: skip


def test_manifest_records_fairseq_and_its_rules(converted):
    name, out = converted
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["decoding"] == {
        "max_length": 1024, "max_length_ratio": 0.0, "max_length_offset": 201,
        "min_length": 1, "length_penalty": 1.0, "search": "fairseq",
    }  # fmt: skip
    origin = manifest["source_model"]["origin"]
    assert (origin["converter"], origin["source_lang"], origin["target_lang"]) == (
        "fairseq", "en", "es")  # fmt: skip
    assert manifest["parity"]["greedy_sentences"] == 300
    assert manifest["parity"]["greedy_mismatches"] == 0
    assert manifest["special_ids"] == {"pad": 1, "unk": 3, "bos": 0, "eos": 2}
    source, target = manifest["tokenizers"]["source"], manifest["tokenizers"]["target"]
    assert source["kind"] == target["kind"] == KINDS[name]
    assert source["end_tokens"] == ["</s>"]  # fairseq appends EOS to every source
    assert not target.get("end_tokens")


def test_greedy_is_fairseqs_token_for_token(converted):
    name, out = converted
    got, want = _decode(out, name, 1), _fairseq(name, "greedy.json")
    assert _same_lists(got, want) == []
    assert [g[0][1] for g in got] == [w[0]["text"] for w in want]
    diffs = _score_diffs(got, want)
    assert len(diffs) == 300 and np.all(np.isfinite(diffs)) and diffs.max() < 1e-5


def test_beam_is_fairseqs(converted):
    name, out = converted
    got, want = _decode(out, name, 5), _fairseq(name, "beam5.json")
    assert _same_lists(got, want) == []
    assert [[t for _, t, _ in g] for g in got] == [[h["text"] for h in w] for w in want]
    diffs = _score_diffs(got, want)
    assert len(diffs) == 1500 and diffs.max() < 1e-5


SCORED = ("lstm_word", "lstm_bi2_bpe", "lstm_wiseman_spm")  # with a score.json and align.json


@pytest.mark.parametrize("converted", SCORED, indirect=True)
def test_hard_alignments_are_fairseqs(converted):
    """``return_alignment``'s rule (:mod:`service.alignment`) against fairseq-interactive
    ``--print-alignment hard`` on the beam-5 5-best lists of all 300 sources: every
    hypothesis's (source, target) index pairs, the source's EOS never aligned to (the
    models attend to it: counting it would change many)."""
    name, out = converted
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    options = dataclasses.replace(bundle.decoding, beam_size=5, n_best=5, return_attention=True)
    lines = MODELS[name][1].read_text(encoding="utf-8").splitlines()
    sources = [bundle.src_tokenizer.encode(line) for line in lines]
    nbest = decode(bundle.model, sources, options=options, special=bundle.special)
    want = _fairseq(name, "align.json")
    pairs, differ = 0, []
    for i, (ids, hyps, theirs) in enumerate(zip(sources, nbest, want, strict=True)):
        pieces = bundle.src_tokenizer.pieces(ids)
        span = source_span(pieces, bundle.source_marks, bundle.source_pad)
        assert pieces[span[1] :] == ["</s>"]  # fairseq's source EOS, left out
        for h, w in zip(hyps, theirs, strict=True):
            assert bundle.tgt_tokenizer.pieces(h.tokens) == w["tokens"]
            got = [[s, t] for t, s in enumerate(hard_alignment(h.attention, span, len(h.tokens)))]
            pairs += len(got)
            if got != w["alignment"]:
                differ.append((i, got, w["alignment"]))
    assert len(want) == 300 and pairs > 10_000
    assert differ == []


@pytest.mark.parametrize("converted", SCORED, indirect=True)
def test_scores_of_given_targets_are_fairseqs(converted):
    """``Score`` (forced decoding) against ``fairseq-generate --score-reference`` (its
    SequenceScorer's positional scores, full precision): the model's own greedy outputs
    and the data's references, many of whose tokens are far outside the top-k."""
    name, out = converted
    tokens, totals = forced_score_errors(out, FIXTURE / name / "score.json")
    assert len(totals) == 40 and len(tokens) > 300
    assert tokens.max() < 1e-4 and totals.max() < 1e-4


@pytest.mark.parametrize("converted", ["lstm_word"], indirect=True)
@pytest.mark.parametrize(
    ("text", "name"), [("<pad>", "padding"), ("<s>", "start"), ("</s>", "end-of-sentence")]
)
def test_a_word_vocabularys_special_tokens_are_refused_in_targets(converted, text, name):
    """A word vocabulary spells its specials as words: a target or prefix holding one is
    refused by name (the decoder ranks them at -inf: forced, they would end every beam)."""
    from service.errors import InvalidRequest
    from service.limits import validate_prefixes, validate_targets

    bundle = load_bundle(converted[1], RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    tgt, special, options = bundle.tgt_tokenizer, bundle.special, bundle.decoding
    with pytest.raises(InvalidRequest, match=rf"targets\[0\] tokenises to the {name} token"):
        validate_targets([f"una {text} casa"], [[4, 5]], options, tgt, special)
    with pytest.raises(InvalidRequest, match=rf"target_prefix\[0\] tokenises to the {name}"):
        validate_prefixes([text], [[4, 5]], options, tgt, special)


def test_this_projects_beam_is_what_differs(converted):
    """The standard beam keeps every EOS of a step's first ``beam`` continuations, where
    fairseq's stops at ``beam`` finished: a quarter of the lists differ without the
    ``fairseq`` search."""
    name, out = converted
    got = _decode(out, name, 5, search="standard")
    assert len(_same_lists(got, _fairseq(name, "beam5.json"))) > 30


def test_a_sentence_decodes_the_same_alone_and_batched(converted):
    """Bit for bit, scores too: the attention's sums over the source are batched
    products of two rows (``models.attention.weighted_sum``), whose order neither the
    batch size nor the padding changes."""
    name, out = converted
    lines = MODELS[name][1].read_text(encoding="utf-8").splitlines()[:60]
    assert_decodes_alone_as_batched(out, lines)


def test_generation_flags_as_fairseq_interactive_applies_them(tmp_path):
    """``--max-len-a 0.5 --max-len-b 2 --min-len 3 --lenpen 0.6`` (beam 4, 3-best), as
    fairseq-interactive was given them: its length limit (a x source tokens with the EOS,
    + b, before EOS), its minimum and its length penalty."""
    out = tmp_path / "o" / "1"
    flags = ["--max-len-a", "0.5", "--max-len-b", "2", "--min-len", "3", "--lenpen", "0.6"]
    assert main(_argv("lstm_word", out, *flags, "--parity-limit", "10")) == 0
    decoding = json.loads((out / "manifest.json").read_text())["decoding"]
    assert (decoding["max_length_ratio"], decoding["max_length_offset"]) == (0.5, 3)
    assert (decoding["min_length"], decoding["length_penalty"]) == (3, 0.6)
    got, want = _decode(out, "lstm_word", 4, 3), _fairseq("lstm_word", "options.json")
    assert _same_lists(got, want) == []
    lengths = [len(h["tokens"]) for w in want for h in w]
    assert min(lengths) == 3
    sources = [len(s.split()) + 1 for s in MODELS["lstm_word"][1].read_text().splitlines()]
    # the limit binds: some hypotheses are as long as it allows
    assert any(len(w[0]["tokens"]) == int(0.5 * n + 2) for w, n in zip(want, sources, strict=True))
    assert _score_diffs(got, want).max() < 1e-5


@pytest.mark.parametrize("name", ["lstm_bi2_bpe", "lstm_wiseman_spm"])
def test_served_as_text_with_attention(tmp_path_factory, name):
    """The subword models through the real gRPC server: fairseq's detokenised greedy
    text, the attention's columns the source's pieces and its ``</s>``."""
    repo = tmp_path_factory.mktemp("fairseq-served")
    out = repo / "fairseq" / "1"
    assert main(_argv(name, out, "--parity-limit", "20", "--beam-sentences", "3")) == 0
    factory = ServerFactory(repo)
    try:
        server = factory()
        channel, stub = stub_for(server.port)
        from nmt_api.nmt.v1 import translator_pb2 as pb

        texts = MODELS[name][1].read_text(encoding="utf-8").splitlines()[:8]
        reply = stub.Translate(
            pb.TranslateRequest(texts=texts, options=proto_options(return_attention=True)),
            timeout=60,
        )
        want = _fairseq(name, "greedy.json")
        for i, t in enumerate(reply.translations):
            hyp = t.hypotheses[0]
            assert hyp.text == want[i][0]["text"]
            assert list(hyp.tokens) == want[i][0]["tokens"]
            att = np.array(hyp.attention.values).reshape(hyp.attention.rows, hyp.attention.cols)
            assert att.shape[1] == len(hyp.attention.source_tokens) > len(texts[i].split())
            assert hyp.attention.source_tokens[-1] == "</s>"
            assert np.all(np.isfinite(att)) and np.allclose(att.sum(1), 1.0, atol=1e-4)
        channel.close()
    finally:
        factory.close()


def _model(tmp_path: Path, name: str = "lstm_word") -> Path:
    model = tmp_path / "model"
    model.mkdir()
    for f in ("checkpoint_best.pt", "dict.en.txt", "dict.es.txt"):
        shutil.copyfile(FIXTURE / name / f, model / f)
    return model


def _edit_checkpoint(change):
    def edit(model: Path) -> None:
        path = model / "checkpoint_best.pt"
        with torch.serialization.safe_globals([argparse.Namespace]):
            ckpt = torch.load(path, weights_only=True)
        change(ckpt)
        torch.save(ckpt, path)

    return edit


def _set_model(key: str, value):
    return _edit_checkpoint(lambda c: setattr(c["cfg"]["model"], key, value))


class _Code:  # a pickled object no weights-only load may construct
    pass


@pytest.mark.parametrize(
    ("edit", "extra", "message"),
    [
        (_set_model("arch", "transformer"), [], "arch: 'transformer' is not supported"),
        (_set_model("decoder_attention", "0"), [], "--decoder-attention: '0' is not supp"),
        (_edit_checkpoint(lambda c: c["cfg"]["criterion"].update(_name="adaptive_loss")), [],
         "adaptive softmax"),
        (_edit_checkpoint(lambda c: c["cfg"]["task"].update(_name="language_modeling")), [],
         "--task: 'language_modeling' is not supported"),
        (_edit_checkpoint(lambda c: c.update(extra=_Code())), [], "not a readable fairseq chec"),
        (lambda m: (m / "checkpoint_best.pt").write_bytes(b"no"), [], "not a fairseq checkpoint"),
        (lambda m: (m / "checkpoint_best.pt").write_bytes(
            (FIXTURE / "lstm_word" / "checkpoint_best.pt").read_bytes()[:5000]), [],
         "not a torch file, or one cut short"),
        (lambda m: (m / "checkpoint_best.pt").unlink(), [], "checkpoint not found: "),
        (_edit_checkpoint(lambda c: c["model"].pop("decoder.attention.input_proj.weight")), [],
         "weight 'decoder.attention.input_proj.weight' missing"),
        (lambda m: shutil.copyfile(FIXTURE / "lstm_bi2_bpe" / "checkpoint_best.pt",
                                   m / "checkpoint_best.pt"), [], "dict.en.txt gives 1160"),
        (lambda m: (m / "dict.es.txt").unlink(), [], "dictionary "),
        (lambda m: (m / "dict.en.txt").write_text("the\n"), [], "line 1: 'the' is not 'TOKEN C"),
        (lambda m: (m / "dict.en.txt").write_text("a 1\na 2\n"), [], "duplicate token 'a'"),
        (lambda m: None, ["--bpe", "subword_nmt"], "--bpe subword_nmt needs --bpe-codes"),
        (lambda m: None, ["--bpe-codes", str(DATA / "bpe300.codes")], "need --bpe"),
        (lambda m: None, ["--max-len-b", "-1"], "--max-len-b and --min-len must be >= 0"),
        (lambda m: None, ["--max-len-b", "0"], "--max-len-a 0 --max-len-b 0 leaves no target"),
    ],
    ids=["transformer", "no-attention", "adaptive", "task", "pickled-code", "not-torch",
         "cut-short", "no-checkpoint", "missing-weight", "other-checkpoint", "no-dict", "bad-dict",
         "duplicate", "bpe-no-codes", "codes-no-bpe", "max-len-b", "no-length"],
)  # fmt: skip
def test_what_the_bundle_cannot_express_is_refused_in_one_line(
    tmp_path, capsys, edit, extra, message
):
    model = _model(tmp_path)
    edit(model)
    argv = ["fairseq", str(model / "checkpoint_best.pt"), "-s", "en", "-t", "es",
            "--out", str(tmp_path / "o" / "1"), *extra]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "o" / "1").exists()


def test_half_precision_and_legacy_args_checkpoints_convert(tmp_path):
    """A checkpoint saved in half precision (``fairseq-train --fp16``) converts to a
    float32 bundle; one of fairseq < 0.10 (a single ``args`` Namespace, no ``cfg``)
    gives its options the same way."""
    model = _model(tmp_path)

    def legacy_half(ckpt):
        args = ckpt["cfg"]["model"]
        args.task, ckpt["args"], ckpt["cfg"] = "translation", args, None
        ckpt["model"] = {k: v.half() for k, v in ckpt["model"].items()}

    _edit_checkpoint(legacy_half)(model)
    out = tmp_path / "o" / "1"
    argv = ["fairseq", str(model / "checkpoint_best.pt"), "-s", "en", "-t", "es",
            "--out", str(out), "--parity-limit", "20", "--beam-sentences", "2"]  # fmt: skip
    assert main(argv) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parity"]["greedy_mismatches"] == 0
    assert manifest["decoding"]["max_length"] == 1024  # the args' max_target_positions
    # weights rounded to half precision keep (nearly) all of fairseq's float32
    # translations: none of the 300 changed on 2026-11-28
    differ = _same_lists(_decode(out, "lstm_word", 1), _fairseq("lstm_word", "greedy.json"))
    assert len(differ) < 10


def test_languages_come_from_the_data_directory(tmp_path, capsys):
    """Without ``-s``/``-t`` (the checkpoint's task names none when fairseq-train inferred
    them) the pair is read off fairseq-preprocess's file names, as fairseq infers it; with
    neither, a one-line error names the dictionaries found."""
    model = _model(tmp_path)
    argv = ["fairseq", str(model / "checkpoint_best.pt"), "--out", str(tmp_path / "o" / "1"),
            "--parity-limit", "5", "--beam-sentences", "1"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "give --source-lang and --target-lang" in err and "dict.en.txt, dict.es.txt" in err
    (model / "train.en-es.en.idx").write_bytes(b"")
    assert main(argv) == 0
    origin = json.loads((tmp_path / "o" / "1" / "manifest.json").read_text())
    assert origin["source_model"]["origin"]["source_lang"] == "en"


def test_a_wrong_data_directory_says_so(tmp_path, capsys):
    """A misspelt --data used to ask for the languages (helper-79's audit)."""
    model = _model(tmp_path)
    argv = ["fairseq", str(model / "checkpoint_best.pt"), "--out", str(tmp_path / "o" / "1")]
    assert main([*argv, "--data", str(tmp_path / "data-bn"), "-s", "en", "-t", "es"]) == 2
    assert f"data directory {tmp_path / 'data-bn'} not found: --data names" in (
        capsys.readouterr().err
    )
    for name in ("dict.en.txt", "dict.es.txt"):
        (model / name).unlink()
    assert main(argv) == 2  # the default, the checkpoint's directory, has none
    assert f"no dictionaries (dict.*.txt) in {model}: pass --data" in capsys.readouterr().err


def test_an_eole_directory_given_as_opennmt_py_is_named(capsys):
    eole = FIXTURE.parent / "eole" / "brnn_gru1_inputfeed_dot"
    assert main(["opennmt-py", str(eole), "--out", "o/1"]) == 2
    err = capsys.readouterr().err
    assert f"{eole} is an Eole model directory: convert it with `nmt-convert eole {eole}`" in err
