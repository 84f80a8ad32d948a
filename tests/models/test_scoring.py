"""The scoring rules (:mod:`models.scoring`) alone: length limit, EOS rules on the
candidate layout, and scores. How each search strategy applies them is tested with the
strategies (tests/service/test_decoding.py, tests/models/test_search.py)."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from models.options import DecodeOptions, DecodeOptionsError
from models.scoring import (
    FORCED_EOS_FLOOR,
    NEG_INF,
    Eos,
    ScoringRules,
    ban,
    eos_codes,
    restrict,
)


def test_torch_free():
    """The service imports this module: it must not pull torch in."""
    code = "import sys, models.scoring; print('torch' in sys.modules)"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("search", ["standard", "eole"])
def test_rules_of_options(search):
    options = DecodeOptions(
        min_length=3,
        max_length=40,
        max_length_ratio=1.5,
        max_length_offset=4,
        length_penalty=0.6,
        search=search,
    )
    rules = ScoringRules.of(options)
    assert (rules.min_length, rules.max_length, rules.length_penalty) == (3, 40, 0.6)
    assert (rules.max_length_ratio, rules.max_length_offset) == (1.5, 4)
    eole = search == "eole"
    assert rules.bos_in_length is eole and rules.eos_at_limit is not eole
    assert ScoringRules.of(DecodeOptions()) == ScoringRules()


def test_length_limit_arithmetic() -> None:
    default = ScoringRules()
    assert default.length_limit(5) == 2 * 5 + 10
    assert default.length_limit(1) == 12
    assert default.length_limit(200) == 256  # capped by max_length
    # floor(1.5 * 3) = 4: rounded down, as Eole/OpenNMT-py's int(ratio * src + 5) is
    assert ScoringRules(max_length_ratio=1.5, max_length_offset=0).length_limit(3) == 4
    # OpenNMT-py's default int(min(250, 1.25 * src + 5)) before EOS, for every length
    onmt = ScoringRules(max_length=251, max_length_ratio=1.25, max_length_offset=6)
    assert [onmt.length_limit(n) for n in range(1, 300)] == [
        int(min(250, n * 1.25 + 5)) + 1 for n in range(1, 300)
    ]
    assert ScoringRules(max_length_ratio=1.5, max_length_offset=2).length_limit(4) == 8
    assert ScoringRules(max_length=1).length_limit(30) == 1
    assert ScoringRules(max_length_ratio=0.0, max_length_offset=0).length_limit(7) == 1


@pytest.mark.parametrize(
    ("step", "limit", "min_length", "rule"),
    [
        (0, 10, 0, Eos.ALLOWED),
        (0, 10, 1, Eos.BLOCKED),
        (1, 10, 1, Eos.ALLOWED),
        (2, 10, 3, Eos.BLOCKED),
        (3, 10, 3, Eos.ALLOWED),
        (8, 10, 3, Eos.ALLOWED),
        (9, 10, 3, Eos.FORCED),  # the last position the limit allows (limit counts EOS)
        (0, 1, 0, Eos.FORCED),
        (0, 1, 5, Eos.FORCED),  # forcing wins over min_length
        (1, 2, 50, Eos.FORCED),
        (0, 2, 50, Eos.BLOCKED),
    ],
)
def test_eos_rule(step, limit, min_length, rule):
    assert ScoringRules(min_length=min_length).eos_rule(step, limit) is rule


def test_eos_codes_give_each_row_its_own_rule():
    """The vectorised rule (a step's rows at once) is the one-row rule for every row,
    whatever its batch mates."""
    rng = np.random.default_rng(0)
    steps, limits, mins = (
        rng.integers(0, 12, 500),
        rng.integers(1, 12, 500),
        rng.integers(0, 6, 500),
    )
    codes = eos_codes(steps, limits, mins)
    assert codes.shape == (500,) and set(codes.tolist()) == {0, 1, 2}
    rows = zip(steps.tolist(), limits.tolist(), mins.tolist(), strict=True)
    want = [Eos.FORCED if s >= n - 1 else Eos.BLOCKED if s < m else Eos.ALLOWED for s, n, m in rows]
    assert codes.tolist() == [int(w) for w in want]
    rules = [
        ScoringRules(min_length=int(m)).eos_rule(int(s), int(n))
        for s, n, m in zip(steps, limits, mins, strict=True)
    ]
    assert rules == want  # the one-row form is the same rule


def _candidates() -> np.ndarray:
    """Three rows of ``(k=2) + EOS`` candidates."""
    return np.array([[-0.5, -0.7, -0.2], [-0.1, -0.9, -0.3], [-1.0, -2.0, -3.0]], np.float32)


def test_restrict_applies_each_rows_rule_in_place():
    values = _candidates()
    out = restrict(values, [Eos.ALLOWED, Eos.BLOCKED, Eos.FORCED])
    assert out is values and values.dtype == np.float32
    np.testing.assert_array_equal(
        values,
        np.float32(
            [
                [-0.5, -0.7, -0.2],  # untouched
                [-0.1, -0.9, NEG_INF],  # EOS banned, the tokens keep their log-probs
                [NEG_INF, NEG_INF, -3.0],  # only EOS, with the model's own log-prob
            ]
        ),
    )


def test_a_forced_eos_the_model_gives_minus_inf_still_ends_the_row():
    """At its limit a row must end: EOS at -inf counts as the lowest finite float32,
    which beats the banned tokens; a NaN or finite EOS keeps its own value, and an
    allowed or blocked row with EOS at -inf is left alone."""
    values = np.float32(
        [
            [-0.1, -0.2, NEG_INF],  # forced, EOS -inf
            [-0.1, -0.2, np.nan],  # forced, EOS NaN (a broken model: NaN wins anyway)
            [-0.1, -0.2, NEG_INF],  # allowed
            [-0.1, -0.2, NEG_INF],  # blocked
        ]
    )
    restrict(values, [Eos.FORCED, Eos.FORCED, Eos.ALLOWED, Eos.BLOCKED])
    assert values[0, -1] == FORCED_EOS_FLOOR and np.isfinite(values[0, -1])
    assert np.isnan(values[1, -1])
    np.testing.assert_array_equal(values[2:, -1], [NEG_INF, NEG_INF])
    # the first best of each forced row is EOS (what greedy_pick and torch.argmax take)
    assert list(np.argmax(values[:2], axis=1)) == [2, 2]


def test_restrict_with_every_row_allowed_changes_nothing():
    values = _candidates()
    restrict(values, np.zeros(3, dtype=np.int64))
    np.testing.assert_array_equal(values, _candidates())


@pytest.mark.parametrize(
    ("penalty", "log_prob", "tokens", "score"),
    [
        (1.0, -6.0, 2, -2.0),  # length 3: two tokens and EOS
        (0.0, -6.0, 2, -6.0),  # no penalty: the log-prob
        (2.0, -8.0, 1, -2.0),
        (0.6, -3.0, 4, -3.0 / 5**0.6),
        (1.0, -6.0, 0, -6.0),  # the empty translation: EOS alone
    ],
)
def test_score_length_penalty(penalty, log_prob, tokens, score):
    rules = ScoringRules(length_penalty=penalty)
    assert rules.score(log_prob, tokens) == pytest.approx(score, rel=1e-12)
    # exactly the documented formula, float for float
    assert rules.score(log_prob, tokens) == log_prob / ((tokens + 1) ** penalty)


def test_score_eole_counts_bos_and_drops_an_unscored_eos():
    eole = ScoringRules.of(DecodeOptions(search="eole"))
    assert eole.score(-6.0, 2) == -6.0 / 4  # BOS, two tokens, EOS
    assert eole.score(-6.0, 2, eos=False) == -6.0 / 3  # BOS, two tokens
    assert eole.score(-6.0, 0, eos=False) == -6.0 / 2  # length never below 1 (+ BOS)
    assert ScoringRules().score(-6.0, 0, eos=False) == -6.0


def test_score_joeynmt_is_gnmts_penalty_with_beam_and_none_greedy():
    """Joey NMT's beam search divides by ``((5 + L) / 6) ** alpha``, L counting EOS, and
    stops at its limit without one; its greedy search has no length penalty."""
    beam = ScoringRules.of(DecodeOptions(search="joeynmt", beam_size=5, length_penalty=1.0))
    assert beam.wu_length and not beam.bos_in_length and not beam.eos_at_limit
    assert beam.score(-6.0, 4) == -6.0 / ((5.0 + 5) / 6.0)  # four tokens and EOS
    assert beam.score(-6.0, 4, eos=False) == -6.0 / ((5.0 + 4) / 6.0)
    half = ScoringRules.of(DecodeOptions(search="joeynmt", beam_size=5, length_penalty=0.5))
    assert half.score(-6.0, 4) == -6.0 / ((5.0 + 5) / 6.0) ** 0.5
    greedy = ScoringRules.of(DecodeOptions(search="joeynmt", length_penalty=1.0))
    assert greedy.score(-6.0, 4) == -6.0 and not greedy.eos_at_limit
    assert not ScoringRules.of(DecodeOptions(beam_size=5)).wu_length


@pytest.mark.parametrize(
    ("search", "form", "length"),
    [
        ("standard", "gnmt", 5),  # four tokens and EOS
        ("eole", "gnmt", 6),  # Eole counts BOS too (-length_penalty wu)
        ("joeynmt", "average", 5),  # a request may turn Joey's own form off
        ("fairseq", "", 5),  # the search's own: average
    ],
)
def test_a_length_penalty_form_replaces_the_searchs(search, form, length):
    options = DecodeOptions(search=search, beam_size=5, length_penalty=0.6,
                            length_penalty_form=form)  # fmt: skip
    rules = ScoringRules.of(options)
    if form == "gnmt":
        assert rules.score(-6.0, 4) == -6.0 / ((5.0 + length) / 6.0) ** 0.6
    else:
        assert rules.score(-6.0, 4) == -6.0 / length**0.6
    with pytest.raises(DecodeOptionsError, match="length_penalty_form must be 'average' or"):
        DecodeOptions(length_penalty_form="wu")
    # OpenNMT-tf's beam ranks its places by GNMT's form whatever the rules say: refused
    with pytest.raises(DecodeOptionsError, match="'average' does not apply to this model's"):
        DecodeOptions(search="opennmt-tf", beam_size=4, length_penalty_form="average")
    DecodeOptions(search="opennmt-tf", beam_size=4, length_penalty_form="gnmt")


@pytest.mark.parametrize("search", ["standard", "eole", "joeynmt", "fairseq"])
def test_eos_scored(search):
    rules = ScoringRules.of(DecodeOptions(search=search))
    assert rules.eos_scored(False)
    # fairseq forces EOS at its limit and scores it, as the standard search does
    assert rules.eos_scored(True) is (search in ("standard", "fairseq"))


def test_rules_are_frozen_values():
    rules = ScoringRules()
    with pytest.raises(AttributeError):
        rules.min_length = 3  # type: ignore[misc]
    assert hash(rules) == hash(ScoringRules())
    assert not math.isnan(rules.score(0.0, 0))


def test_coverage_penalty_is_gnmt_beta_sum_log_min_coverage_1():
    rules = ScoringRules(length_penalty=1.0, coverage_penalty=0.5)
    coverage = np.array([0.25, 1.0, 3.0, 0.5])
    # log .25 + log 1 + log 1 (capped) + log .5, times beta, added to -4 / (3 + 1)
    want = -1.0 + 0.5 * (math.log(0.25) + math.log(0.5))
    assert rules.score(-4.0, 3, coverage=coverage) == pytest.approx(want)
    # full coverage costs nothing
    assert rules.score(-4.0, 3, coverage=np.ones(4)) == pytest.approx(-1.0)
    # an unattended position costs a large but finite amount
    assert math.isfinite(rules.score(-4.0, 3, coverage=np.zeros(2)))


def test_no_coverage_penalty_by_default():
    rules = ScoringRules.of(DecodeOptions())
    assert rules.coverage_penalty == 0.0 and not rules.needs_coverage
    assert rules.score(-4.0, 3) == rules.score(-4.0, 3, coverage=np.zeros(3)) == -1.0
    assert ScoringRules.of(DecodeOptions(coverage_penalty=0.2)).coverage_penalty == 0.2
    with pytest.raises(ValueError, match="attention sums"):
        ScoringRules(coverage_penalty=0.2).score(-4.0, 3)


@pytest.mark.parametrize("beta", [-0.1, math.inf, math.nan])
def test_coverage_penalty_out_of_range(beta):
    from models.options import DecodeOptionsError

    with pytest.raises(DecodeOptionsError, match="coverage_penalty"):
        DecodeOptions(coverage_penalty=beta)


@pytest.mark.parametrize(
    ("options", "tokens", "banned"),
    [
        (DecodeOptions(), (5, 6, 5), []),
        (DecodeOptions(ban_unk=True), (), [1]),
        # bigrams: after "5" came 6 and 7 before; the last token is 5 again
        (DecodeOptions(block_ngram_repeat=2), (5, 6, 5, 7, 5), [6, 7]),
        (DecodeOptions(block_ngram_repeat=2), (5, 6, 5), [6]),
        (DecodeOptions(block_ngram_repeat=2), (5, 6), []),
        (DecodeOptions(block_ngram_repeat=1, ban_unk=True), (5, 6, 5), [1, 5, 6]),
        (DecodeOptions(block_ngram_repeat=3), (4, 5, 6, 4, 5), [6]),
        (DecodeOptions(block_ngram_repeat=3), (4, 5, 6, 4, 6), []),
        # an n-gram holding an ignored token is not blocked
        (DecodeOptions(block_ngram_repeat=2, ignore_when_blocking=(6,)), (5, 6, 5, 7, 5), [7]),
        (DecodeOptions(block_ngram_repeat=2, ignore_when_blocking=(5,)), (5, 6, 5, 7, 5), []),
        (DecodeOptions(block_ngram_repeat=1, ignore_when_blocking=(5,)), (5, 6, 5), [6]),
    ],
)
def test_banned_tokens(options, tokens, banned):
    rules = ScoringRules.of(options)
    assert rules.bans_tokens == bool(options.ban_unk or options.block_ngram_repeat)
    assert rules.banned(tokens, 1) == banned


def test_ban_sets_only_the_named_candidates():
    values = np.zeros((3, 4), dtype=np.float32)
    ids = np.array([[4, 5, 6, 3], [5, 4, 7, 3], [6, 7, 8, 3]])
    ban(values, ids, [0, 0, 1, 2], [5, 9, 7, 4])  # 9 and row 2's 4 are not candidates
    assert np.isneginf(values[0, 1]) and np.isneginf(values[1, 2])
    assert np.isneginf(values).sum() == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"block_ngram_repeat": -1}, "block_ngram_repeat must be between 0"),
        ({"block_ngram_repeat": 33}, "block_ngram_repeat must be between 0"),
        ({"ignore_when_blocking": (4, -2)}, "ignore_when_blocking must hold token ids"),
    ],
)
def test_ban_options_out_of_range(fields, message):
    with pytest.raises(DecodeOptionsError, match=message):
        DecodeOptions(**fields)


def test_eoles_coverage_penalty_has_no_floor():
    """A source position the attention never reached: -inf under Eole's search (as Eole
    scores it), a large finite cost under the standard one."""
    coverage = np.array([1.0, 0.0, 0.5])
    eole = ScoringRules.of(DecodeOptions(coverage_penalty=0.2, search="eole"))
    standard = ScoringRules.of(DecodeOptions(coverage_penalty=0.2))
    assert eole.coverage_term(coverage) == -np.inf
    assert standard.coverage_term(coverage) == pytest.approx(0.2 * (math.log(1e-6) + math.log(0.5)))
    tiny = np.array([1e-9, 1.0])
    assert eole.coverage_term(tiny) == pytest.approx(0.2 * math.log(1e-9))


def test_length_limit_adds_the_offset_before_flooring_as_fairseq_and_eole():
    """``int(a * n + b)`` tokens before EOS: 1.16 * 25 is 28.999999999999996, + 4 is 33.0
    in float64; flooring before adding gave 32 (fairseq-interactive printed 33 tokens)."""
    rules = ScoringRules(max_length=1000, max_length_ratio=1.16, max_length_offset=5)
    assert rules.length_limit(25) == 34  # 33 tokens + EOS
    assert ScoringRules(max_length_ratio=1.5, max_length_offset=1).length_limit(7) == 11
    assert (
        ScoringRules(max_length=20, max_length_ratio=2.0, max_length_offset=10).length_limit(9)
        == 20
    )


@pytest.mark.parametrize("search", ["standard", "fairseq", "eole", "joeynmt", "marian"])
def test_eos_at_limit_off_stops_any_search_without_a_scored_eos(search):
    """A model's decoding default (TensorFlow's tutorial loop stops so): the forced EOS
    at the limit is not scored whatever the search; other EOS are."""
    rules = ScoringRules.of(DecodeOptions(search=search, eos_at_limit=False))
    assert not rules.eos_at_limit and rules.eos_scored(False) and not rules.eos_scored(True)
