"""Lexically constrained decoding (:mod:`service.constraints`) against fairseq's own
``fairseq-interactive --constraints`` n-best lists (tests/fixtures/fairseq/*/constraints_*.json,
made by fairseq itself: ``MODELS=constraints bash tests/fixtures/fairseq/make_fixture.sh``).

Each converted fairseq model decodes the 120 sources of the fixture with their phrases
(one to three, one or two words each, mostly words its unconstrained translation lacks),
ordered and unordered, beam 5 (and beam 2): every n-best list must be fairseq's, token for
token, in its order, with its scores; the phrases must tokenise as fairseq encoded them.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from export.convert import main
from service.bundle import load_bundle
from service.limits import validate_constraints
from service.loop import decode
from service.sessions import RuntimeConfig
from tests.export.test_fairseq import DATA, FIXTURE, _argv

# model -> its input (the text its fairseq-interactive read) and its constraint files
MODELS = {
    "lstm_word": ("constraints_words.json", {
        "constraints_ordered.json": (True, 5),
        "constraints_unordered.json": (False, 5),
        "constraints_beam2.json": (False, 2),
    }),
    "lstm_bi2_bpe": ("constraints_words.json", {
        "constraints_ordered.json": (True, 5),
        "constraints_unordered.json": (False, 5),
    }),
    "lstm_wiseman_spm": ("constraints_raw.json", {
        "constraints_ordered.json": (True, 5),
        "constraints_unordered.json": (False, 5),
    }),
}  # fmt: skip
RUNS = [(model, file) for model, (_, files) in MODELS.items() for file in files]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    out = {}
    for name in MODELS:
        path = tmp_path_factory.mktemp("fairseq-constraints") / name / "1"
        assert main(_argv(name, path, "--beam-sentences", "2")) == 0
        out[name] = load_bundle(path, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    return out


def _run(bundle, name: str, file: str):
    """(fairseq's sentences, this decoder's n-best lists, the phrases' pieces)."""
    inputs = json.loads((DATA / MODELS[name][0]).read_text(encoding="utf-8"))
    ordered, beam = MODELS[name][1][file]
    data = json.loads((FIXTURE / name / file).read_text(encoding="utf-8"))
    assert f"--constraints {'ordered' if ordered else 'unordered'}" in data["command"]
    assert f"--beam {beam} " in data["command"]
    sentences = data["sentences"]
    assert [e["constraints"] for e in inputs] == [s["constraints"] for s in sentences]
    options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=beam)
    sources = [bundle.src_tokenizer.encode(e["source"]) for e in inputs]
    asked = [(e["constraints"], ordered) for e in inputs]
    constraints = validate_constraints(
        asked, sources, options, bundle.tgt_tokenizer, bundle.special
    )
    got = decode(
        bundle.model, sources, options=options, special=bundle.special, constraints=constraints
    )
    pieces = [[bundle.tgt_tokenizer.pieces(list(p)) for p in c.phrases] for c in constraints]
    return sentences, got, pieces


@pytest.mark.parametrize("name, file", RUNS)
def test_constrained_nbest_lists_are_fairseqs(bundles, name, file):
    bundle = bundles[name]
    sentences, got, pieces = _run(bundle, name, file)
    assert len(sentences) == 120
    tgt = bundle.tgt_tokenizer
    assert pieces == [s["constraint_tokens"] for s in sentences]
    differ = [
        i
        for i, (hyps, s) in enumerate(zip(got, sentences, strict=True))
        if [tgt.pieces(h.tokens) for h in hyps] != [w["tokens"] for w in s["hypotheses"]]
    ]
    assert differ == []
    diffs = np.array(
        [abs(h.score - w["score"]) for hyps, s in zip(got, sentences, strict=True)
         for h, w in zip(hyps, s["hypotheses"], strict=True)]
    )  # fmt: skip
    assert len(diffs) == 120 * MODELS[name][1][file][1]
    assert np.all(np.isfinite(diffs)) and diffs.max() < 5e-5


def test_the_phrases_change_the_translations(bundles):
    """Most phrases were picked outside the unconstrained best: fairseq's and this
    search's best translations change with them (a comparison of unchanged outputs
    would prove little)."""
    sentences, got, _ = _run(bundles["lstm_word"], "lstm_word", "constraints_unordered.json")
    plain = json.loads((FIXTURE / "lstm_word" / "beam5.json").read_text(encoding="utf-8"))
    tgt = bundles["lstm_word"].tgt_tokenizer
    changed = sum(
        tgt.pieces(hyps[0].tokens) != p["hypotheses"][0]["tokens"]
        for hyps, p in zip(got, plain["sentences"][:120], strict=True)
    )
    assert changed >= 90, changed
