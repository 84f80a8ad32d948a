"""Reference greedy and beam search, how they apply the scoring rules and block special
tokens, and DecodeOptions."""

from __future__ import annotations

import math

import pytest
import torch

from models.config import BOS_ID, EOS_ID, PAD_ID
from models.options import DecodeOptions, DecodeOptionsError
from models.scoring import Eos, ScoringRules
from models.search import (
    NEG_INF,
    beam_search,
    block_specials,
    greedy_search,
    restrict_candidates,
    step_candidates,
)

SEARCH_VOCAB = 20
MODEL_VARIANTS = [
    pytest.param({"rnn_type": "gru", "attention": "additive", "placement": "bahdanau"}, id="gru"),
    pytest.param({"rnn_type": "lstm", "attention": "general", "placement": "luong"}, id="lstm"),
    pytest.param(
        {"rnn_type": "gru", "attention": "dot", "placement": "luong", "input_feed": False},
        id="gru-no-feed",
    ),
    pytest.param(
        {"rnn_type": "lstm", "attention": "additive", "placement": "luong", "coverage": True},
        id="lstm-coverage",
    ),
    pytest.param(
        {"rnn_type": "gru", "attention": "local-p", "placement": "luong", "local_window": 2},
        id="gru-local-p",
    ),
]


@pytest.fixture
def search_model(make_model):
    """A random tiny model with sharpened output distributions, so searches differ."""

    def build(**overrides):
        model = make_model(
            seed=3, src_vocab_size=SEARCH_VOCAB, tgt_vocab_size=SEARCH_VOCAB, **overrides
        )
        with torch.no_grad():
            model.decoder.output.weight.mul_(6.0)
        return model

    return build


@pytest.fixture
def sources(make_padded):
    return make_padded([[4, 5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16, 17, 18]])


def _set_bias(model, token: int, value: float) -> None:
    with torch.no_grad():
        model.decoder.output.bias[token] = value


# ---------------------------------------------------------------- greedy vs beam


@pytest.mark.parametrize("overrides", MODEL_VARIANTS)
def test_beam_size_one_equals_greedy(search_model, sources, overrides) -> None:
    model = search_model(**overrides)
    src, lengths = sources
    options = DecodeOptions(beam_size=1, max_length=12)
    greedy = greedy_search(model, src, lengths, options=options)
    beam = beam_search(model, src, lengths, options=options)
    assert len(greedy) == len(beam) == 3
    for g, nbest in zip(greedy, beam, strict=True):
        assert len(nbest) == 1
        assert nbest[0].tokens == g.tokens
        assert nbest[0].log_prob == pytest.approx(g.log_prob, rel=1e-4)
        assert nbest[0].score == pytest.approx(g.score, rel=1e-4)
    # The outputs are not all the same trivial sequence.
    assert len({g.tokens for g in greedy}) > 1


@pytest.mark.parametrize("beam_size", [2, 3, 5])
@pytest.mark.parametrize("overrides", MODEL_VARIANTS)
def test_beam_nbest_sorted_finite_distinct(search_model, sources, overrides, beam_size) -> None:
    model = search_model(**overrides)
    src, lengths = sources
    options = DecodeOptions(beam_size=beam_size, n_best=beam_size, max_length=12)
    for nbest in beam_search(model, src, lengths, options=options):
        assert len(nbest) == beam_size
        scores = [h.score for h in nbest]
        assert all(math.isfinite(s) for s in scores)
        assert scores == sorted(scores, reverse=True)
        assert len({h.tokens for h in nbest}) == beam_size
        for h in nbest:
            assert h.log_prob <= 0.0
            assert h.score == ScoringRules.of(options).score(h.log_prob, len(h.tokens))
            assert h.attention is None


def test_n_best_is_a_prefix_of_the_full_beam(search_model, sources) -> None:
    model = search_model()
    src, lengths = sources
    full = beam_search(model, src, lengths, options=DecodeOptions(beam_size=5, n_best=5))
    top2 = beam_search(model, src, lengths, options=DecodeOptions(beam_size=5, n_best=2))
    for all5, two in zip(full, top2, strict=True):
        assert len(two) == 2
        assert [h.tokens for h in two] == [h.tokens for h in all5[:2]]


def test_length_penalty_zero_ranks_by_log_prob(search_model, sources) -> None:
    model = search_model()
    src, lengths = sources
    options = DecodeOptions(beam_size=4, n_best=4, length_penalty=0.0)
    for nbest in beam_search(model, src, lengths, options=options):
        assert [h.score for h in nbest] == [h.log_prob for h in nbest]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_return_attention_rows_sum_to_one(search_model, sources, beam_size) -> None:
    model = search_model(rnn_type="lstm", placement="luong")
    src, lengths = sources
    options = DecodeOptions(beam_size=beam_size, n_best=beam_size, return_attention=True)
    if beam_size == 1:
        results = [[h] for h in greedy_search(model, src, lengths, options=options)]
        results += beam_search(model, src, lengths, options=options)
        lens = lengths.tolist() * 2
    else:
        results = beam_search(model, src, lengths, options=options)
        lens = lengths.tolist()
    for nbest, n in zip(results, lens, strict=True):
        for h in nbest:
            assert h.attention is not None
            assert h.attention.shape == (len(h.tokens) + 1, n)
            assert (h.attention >= 0).all()
            assert abs(h.attention.sum(-1) - 1.0).max() < 1e-5


# ---------------------------------------------------------------- length and token rules


@pytest.mark.parametrize("beam_size", [1, 3])
def test_max_length_forces_eos(search_model, sources, beam_size) -> None:
    model = search_model()
    _set_bias(model, EOS_ID, -1e4)  # EOS is never chosen unless forced
    src, lengths = sources
    options = DecodeOptions(
        beam_size=beam_size,
        n_best=beam_size,
        max_length=50,
        max_length_ratio=1.0,
        max_length_offset=1,
    )
    limits = [ScoringRules.of(options).length_limit(n) for n in lengths.tolist()]
    assert limits == [6, 4, 8]
    greedy = greedy_search(model, src, lengths, options=options)
    assert [len(h.tokens) for h in greedy] == [5, 3, 7]
    for nbest, limit in zip(beam_search(model, src, lengths, options=options), limits, strict=True):
        assert len(nbest) == beam_size
        assert all(len(h.tokens) == limit - 1 for h in nbest)
        assert all(math.isfinite(h.score) for h in nbest)


def test_max_length_caps_every_hypothesis(search_model, sources) -> None:
    model = search_model()
    src, lengths = sources
    options = DecodeOptions(beam_size=4, n_best=4, max_length=3)
    assert all(len(h.tokens) <= 2 for h in greedy_search(model, src, lengths, options=options))
    for nbest in beam_search(model, src, lengths, options=options):
        assert all(len(h.tokens) <= 2 for h in nbest)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_min_length_bans_early_eos(search_model, sources, beam_size) -> None:
    model = search_model()
    _set_bias(model, EOS_ID, 1e4)  # EOS wins whenever it is allowed
    src, lengths = sources
    options = DecodeOptions(beam_size=beam_size, n_best=beam_size, min_length=3)
    assert [len(h.tokens) for h in greedy_search(model, src, lengths, options=options)] == [3] * 3
    for nbest in beam_search(model, src, lengths, options=options):
        assert [len(h.tokens) for h in nbest] == [3] * beam_size
    # min_length=0 allows the empty translation.
    options = DecodeOptions(beam_size=beam_size, n_best=beam_size, min_length=0)
    assert all(h.tokens == () for h in greedy_search(model, src, lengths, options=options))


@pytest.mark.parametrize("beam_size", [1, 3])
def test_pad_and_bos_are_never_emitted(search_model, sources, beam_size) -> None:
    model = search_model()
    _set_bias(model, PAD_ID, 1e4)
    _set_bias(model, BOS_ID, 1e4)
    src, lengths = sources
    options = DecodeOptions(beam_size=beam_size, n_best=beam_size, max_length=10)
    hyps = list(greedy_search(model, src, lengths, options=options))
    for nbest in beam_search(model, src, lengths, options=options):
        hyps.extend(nbest)
    assert any(h.tokens for h in hyps)
    for h in hyps:
        assert PAD_ID not in h.tokens and BOS_ID not in h.tokens and EOS_ID not in h.tokens
        assert math.isfinite(h.log_prob)


def test_block_specials_exact() -> None:
    log_probs = torch.arange(12, dtype=torch.float32).view(2, 6) * -1.0
    block_specials(log_probs, pad_id=0, bos_id=2)
    inf = NEG_INF
    assert log_probs.tolist() == [
        [inf, -1.0, inf, -3.0, -4.0, -5.0],
        [inf, -7.0, inf, -9.0, -10.0, -11.0],
    ]


@pytest.mark.parametrize("beam_size", [1, 3])
@pytest.mark.parametrize("penalty", [0.0, 0.6, 1.0, 2.0])
def test_scores_follow_the_length_penalty(search_model, sources, beam_size, penalty) -> None:
    """Every hypothesis is scored by the shared rule, whatever the search."""
    model = search_model()
    src, lengths = sources
    options = DecodeOptions(beam_size=beam_size, n_best=beam_size, length_penalty=penalty)
    rules = ScoringRules.of(options)
    hyps = (
        greedy_search(model, src, lengths, options=options)
        if beam_size == 1
        else [h for nbest in beam_search(model, src, lengths, options=options) for h in nbest]
    )
    assert len(hyps) == 3 * beam_size
    for h in hyps:
        assert h.score == rules.score(h.log_prob, len(h.tokens))
        assert h.score == pytest.approx(h.log_prob / (len(h.tokens) + 1) ** penalty)


def test_step_candidates_rank_like_the_graph() -> None:
    """Top-k non-EOS tokens (ties: lower id first), then EOS's own log-prob."""
    log_probs = torch.tensor([[-9.0, -1.0, -2.0, -0.5, -1.0, -3.0]])
    values, ids = step_candidates(log_probs, k=3, eos_id=3)
    assert ids.tolist() == [[1, 4, 2, 3]]
    assert values.tolist() == [[-1.0, -1.0, -2.0, -0.5]]


def test_restrict_candidates_applies_the_shared_rules() -> None:
    inf = NEG_INF
    values = torch.tensor([[-1.0, -2.0, -0.5]] * 3)
    out = restrict_candidates(values, [Eos.ALLOWED, Eos.BLOCKED, Eos.FORCED])
    assert out.dtype == torch.float32
    assert out.tolist() == [
        [-1.0, -2.0, -0.5],
        [-1.0, -2.0, inf],  # too early: EOS banned
        [inf, inf, -0.5],  # last step: EOS forced with its own log-prob
    ]


# ---------------------------------------------------------------- DecodeOptions


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"beam_size": 0}, r"beam_size must be >= 1, got 0"),
        ({"beam_size": -3}, r"beam_size must be >= 1"),
        ({"beam_size": 2, "n_best": 3}, r"n_best must be between 1 and beam_size \(2\), got 3"),
        ({"n_best": 0}, r"n_best must be between 1 and beam_size"),
        ({"length_penalty": -0.5}, r"length_penalty must be in \[0, 5\], got -0.5"),
        ({"length_penalty": 5.5}, r"length_penalty must be in \[0, 5\]"),
        ({"length_penalty": float("nan")}, r"length_penalty must be in \[0, 5\]"),
        ({"max_length": 0}, r"max_length must be >= 1, got 0"),
        ({"max_length_ratio": -1.0}, r"max_length_ratio must be >= 0"),
        ({"max_length_ratio": float("inf")}, r"max_length_ratio must be >= 0"),
        ({"max_length_offset": -1}, r"max_length_offset must be >= 0, got -1"),
        ({"min_length": -1}, r"min_length must be >= 0, got -1"),
    ],
)
def test_decode_options_rejects_bad_values(kwargs: dict, match: str) -> None:
    with pytest.raises(DecodeOptionsError, match=match):
        DecodeOptions(**kwargs)


def test_decode_options_boundaries_accepted() -> None:
    DecodeOptions(beam_size=5, n_best=5, length_penalty=0.0, max_length=1, min_length=0)
    DecodeOptions(length_penalty=5.0, max_length_ratio=0.0, max_length_offset=0)
    assert issubclass(DecodeOptionsError, ValueError)
