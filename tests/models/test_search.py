"""Reference greedy and beam search, their length/special-token rules, and DecodeOptions."""

from __future__ import annotations

import math

import pytest
import torch

from models.config import BOS_ID, EOS_ID, PAD_ID
from models.options import DecodeOptions, DecodeOptionsError
from models.search import NEG_INF, apply_length_rules, beam_search, block_specials, greedy_search

SEARCH_VOCAB = 20
MODEL_VARIANTS = [
    pytest.param({"rnn_type": "gru", "attention": "additive", "placement": "bahdanau"}, id="gru"),
    pytest.param({"rnn_type": "lstm", "attention": "general", "placement": "luong"}, id="lstm"),
    pytest.param(
        {"rnn_type": "gru", "attention": "dot", "placement": "luong", "input_feed": False},
        id="gru-no-feed",
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
            assert h.score == pytest.approx(options.normalized(h.log_prob, len(h.tokens) + 1))
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
    limits = [options.length_limit(n) for n in lengths.tolist()]
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


def _rows() -> torch.Tensor:
    return torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0]] * 3)


def test_apply_length_rules_scalar_step() -> None:
    inf = NEG_INF
    lp = _rows()
    apply_length_rules(lp, step=0, limit=10, min_length=1, eos_id=3)
    assert lp.tolist() == [[-1.0, -2.0, -3.0, inf, -5.0]] * 3

    lp = _rows()
    apply_length_rules(lp, step=1, limit=10, min_length=1, eos_id=3)
    assert lp.tolist() == _rows().tolist()

    lp = _rows()
    apply_length_rules(lp, step=4, limit=5, min_length=1, eos_id=3)
    assert lp.tolist() == [[inf, inf, inf, -4.0, inf]] * 3


def test_apply_length_rules_per_row() -> None:
    inf = NEG_INF
    lp = _rows()
    apply_length_rules(
        lp, step=torch.tensor([0, 4, 2]), limit=torch.tensor([10, 5, 3]), min_length=3, eos_id=3
    )
    assert lp.tolist() == [
        [-1.0, -2.0, -3.0, inf, -5.0],  # too early: EOS banned
        [inf, inf, inf, -4.0, inf],  # last step: EOS forced with its own log-prob
        [inf, inf, inf, -4.0, inf],  # both: forcing wins, EOS keeps its own log-prob
    ]

    lp = _rows()
    apply_length_rules(lp, step=2, limit=torch.tensor([10, 3, 4]), min_length=0, eos_id=3)
    assert lp.tolist() == [
        [-1.0, -2.0, -3.0, -4.0, -5.0],
        [inf, inf, inf, -4.0, inf],
        [-1.0, -2.0, -3.0, -4.0, -5.0],
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


def test_length_limit_arithmetic() -> None:
    default = DecodeOptions()
    assert default.length_limit(5) == 2 * 5 + 10
    assert default.length_limit(1) == 12
    assert default.length_limit(200) == 256  # capped by max_length
    assert DecodeOptions(max_length_ratio=1.5, max_length_offset=0).length_limit(3) == 5
    assert DecodeOptions(max_length_ratio=1.5, max_length_offset=2).length_limit(4) == 8
    assert DecodeOptions(max_length=1).length_limit(30) == 1
    assert DecodeOptions(max_length_ratio=0.0, max_length_offset=0).length_limit(7) == 1


def test_normalized_score() -> None:
    assert DecodeOptions(length_penalty=1.0).normalized(-6.0, 3) == -2.0
    assert DecodeOptions(length_penalty=0.0).normalized(-6.0, 3) == -6.0
    assert DecodeOptions(length_penalty=2.0).normalized(-8.0, 2) == -2.0
    assert DecodeOptions(length_penalty=1.0).normalized(-6.0, 0) == -6.0
