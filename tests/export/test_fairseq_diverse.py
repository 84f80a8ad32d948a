"""Diverse siblings (:class:`service.strategies.Siblings`) against fairseq's own
``fairseq-interactive --diversity-rate`` n-best lists (``DiverseSiblingsSearch``;
tests/fixtures/fairseq/*/diverse*.json, made by fairseq itself:
``MODELS=diverse bash tests/fixtures/fairseq/make_fixture.sh``).

Each converted model decodes the fixture's 300 sources: every n-best list must be
fairseq's, token for token, in its order, with fairseq's scores (which keep the
penalties), and the rate must change what plain beam search gives (a comparison of
unchanged lists would prove little).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from export.convert import main
from tests.export.test_fairseq import (
    FIXTURE,
    _argv,
    _decode,
    _fairseq,
    _same_lists,
    _score_diffs,
)

GENERATION = ["--max-len-a", "0.5", "--max-len-b", "2", "--min-len", "3", "--lenpen", "0.6"]
# (model, fixture, beam, n-best, rate, the converter's generation flags)
RUNS = [
    ("lstm_word", "diverse.json", 5, 5, 0.5, []),
    ("lstm_bi2_bpe", "diverse.json", 5, 5, 0.5, []),
    ("lstm_wiseman_spm", "diverse.json", 5, 5, 0.5, []),
    ("lstm_word", "diverse_options.json", 4, 3, 2.0, GENERATION),
]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = {}
    for name, file, *_, flags in RUNS:
        path = tmp_path_factory.mktemp("fairseq-diverse") / name / "1"
        assert main(_argv(name, path, *flags, "--parity-limit", "10")) == 0
        out[name, file] = path
    return out


@pytest.mark.parametrize(("name", "file", "beam", "n_best", "rate", "flags"), RUNS)
def test_diverse_nbest_lists_are_fairseqs(converted, name, file, beam, n_best, rate, flags):
    command = json.loads((FIXTURE / name / file).read_text(encoding="utf-8"))["command"]
    assert f"--diversity-rate {rate} " in command
    assert f"--beam {beam} --nbest {n_best}" in command and " ".join(flags) in command
    got = _decode(converted[name, file], name, beam, n_best, diversity_rate=rate)
    want = _fairseq(name, file)
    assert len(want) == 300
    assert _same_lists(got, want) == []
    diffs = _score_diffs(got, want)
    assert len(diffs) == 300 * n_best and np.all(np.isfinite(diffs)) and diffs.max() < 2e-5
    # and the rate mattered: fairseq's plain beam gives other lists
    if file == "diverse.json":
        plain = _fairseq(name, "beam5.json")
        assert len(_same_lists(got, plain)) > 100
