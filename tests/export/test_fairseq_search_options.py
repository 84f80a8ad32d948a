"""fairseq's search options against fairseq's own ``fairseq-interactive`` n-best lists
(tests/fixtures/fairseq/*/diverse*.json and norepeat*.json, made by fairseq itself:
``MODELS="diverse norepeat" bash tests/fixtures/fairseq/make_fixture.sh``):

* ``--diversity-rate`` (``DiverseSiblingsSearch``): diverse siblings,
  :class:`service.strategies.Siblings` (``diversity_rate``);
* ``--no-repeat-ngram-size`` (``NGramRepeatBlock``): ``block_ngram_repeat``.

Each converted model decodes the fixture's 300 sources: every n-best list must be
fairseq's, token for token, in its order, with fairseq's scores (diverse ones keep the
penalties), and the option must change what plain search gives (a comparison of
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
# (model, fixture, beam, n-best, diversity rate, the converter's generation flags)
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


# (model, fixture, beam, n-gram size, the plain search's fixture)
NO_REPEAT = [
    ("lstm_word", "norepeat2.json", 5, 2, "beam5.json"),
    ("lstm_word", "norepeat2_greedy.json", 1, 2, "greedy.json"),
    ("lstm_bi2_bpe", "norepeat2.json", 5, 2, "beam5.json"),
    ("lstm_wiseman_spm", "norepeat3.json", 5, 3, "beam5.json"),
]


@pytest.fixture(scope="module")
def plain_bundles(tmp_path_factory):
    out = {}
    for name in sorted({run[0] for run in NO_REPEAT}):
        path = tmp_path_factory.mktemp("fairseq-norepeat") / name / "1"
        assert main(_argv(name, path, "--parity-limit", "10")) == 0
        out[name] = path
    return out


@pytest.mark.parametrize(("name", "file", "beam", "size", "plain"), NO_REPEAT)
def test_no_repeat_ngram_lists_are_fairseqs(plain_bundles, name, file, beam, size, plain):
    """fairseq bans every token that would complete an n-gram the hypothesis already
    holds (its tokens start with the BOS it decodes from, which never comes again), as
    ``block_ngram_repeat`` does for n >= 2."""
    command = json.loads((FIXTURE / name / file).read_text(encoding="utf-8"))["command"]
    assert "NGramRepeatBlock's CPU fallback fixed as fairseq #5206" in command
    assert f"--no-repeat-ngram-size {size} --beam {beam} --nbest {beam}" in command
    got = _decode(plain_bundles[name], name, beam, beam, block_ngram_repeat=size)
    want = _fairseq(name, file)
    assert len(want) == 300
    assert _same_lists(got, want) == []
    diffs = _score_diffs(got, want)
    assert len(diffs) == 300 * beam and np.all(np.isfinite(diffs)) and diffs.max() < 2e-5
    assert len(_same_lists(got, _fairseq(name, plain))) >= 10  # the bans changed lists
