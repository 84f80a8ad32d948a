"""Attention diagnostics (:mod:`service.diagnostics`) on hand-made attention matrices."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.diagnostics import diagnose, entropies, unk_share

UNK = 1


def test_uniform_rows_have_entropy_log_n():
    a = np.full((3, 4), 0.25, dtype=np.float32)
    d = diagnose(a, [5, 6, 7, 8], UNK)
    assert d.entropy_mean == pytest.approx(math.log(4))
    assert d.entropy_max == pytest.approx(math.log(4))
    # each position gets 3 * 0.25 = 0.75 in total: neither under- nor over-covered
    assert d.coverage_deficit == 0.0 and d.over_attention == 0.0


def test_one_hot_rows_have_zero_entropy_and_show_coverage():
    # five steps over four positions: 0 twice, 1 three times, 2 and 3 never
    a = np.zeros((5, 4))
    for t, i in enumerate([0, 0, 1, 1, 1]):
        a[t, i] = 1.0
    d = diagnose(a, [5, 6, 7, 8], UNK)
    assert d.entropy_mean == 0.0 and d.entropy_max == 0.0
    assert d.coverage_deficit == pytest.approx(2 / 4)  # positions 2 and 3
    assert d.over_attention == pytest.approx(2 / 4)  # 2.0 and 3.0 > 1.5


def test_mean_and_max_differ_across_steps():
    a = np.array([[1.0, 0.0], [0.5, 0.5]])
    assert entropies(a).tolist() == pytest.approx([0.0, math.log(2)])
    d = diagnose(a, [5, 6], UNK)
    assert d.entropy_mean == pytest.approx(math.log(2) / 2)
    assert d.entropy_max == pytest.approx(math.log(2))


def test_unk_share():
    assert unk_share([UNK, 5, UNK, 6], UNK) == 0.5
    assert unk_share([], UNK) == 0.0
    assert diagnose(None, [UNK, 5], UNK).unk_share == 0.5


@pytest.mark.parametrize(
    "attention",
    [
        None,
        np.zeros((0, 3)),
        np.zeros((3, 0)),
        np.zeros((2, 3)),
        np.full((2, 3), np.nan),
        np.array([np.inf, -1.0, 0.0]),  # not 2-D
    ],
    ids=["none", "no-steps", "no-source", "all-zero", "all-nan", "1-d"],
)
def test_unusable_attention_gives_none_never_nan(attention):
    d = diagnose(attention, [5, 6, 7], UNK)
    assert d.entropy_mean is None and d.entropy_max is None
    assert d.coverage_deficit is None and d.over_attention is None
    assert d.unk_share == 0.0


def test_nan_and_negative_weights_count_as_zero():
    a = np.array([[np.nan, 1.0, 1.0], [-3.0, 0.0, 2.0]])
    d = diagnose(a, [5, 6, 7], UNK)
    for value in (d.entropy_mean, d.entropy_max, d.coverage_deficit, d.over_attention):
        assert value is not None and math.isfinite(value)
    # rows renormalised: [0, .5, .5] and [0, 0, 1]; coverage 0, .5, 1.5
    assert d.entropy_max == pytest.approx(math.log(2))
    assert d.coverage_deficit == pytest.approx(1 / 3)
    assert d.over_attention == 0.0


def test_metrics_record_diagnostics_and_skip_undefined_ones():
    from prometheus_client import CollectorRegistry, generate_latest

    from service.diagnostics import observe
    from service.metrics import create_metrics

    registry = CollectorRegistry()
    metrics = create_metrics(registry)
    observe(metrics, "en-es", diagnose(np.full((2, 4), 0.25), [5, 6, 7, 8], UNK))
    observe(metrics, "en-es", diagnose(np.full((2, 3), np.nan), [5, 6, 7], UNK))
    value = registry.get_sample_value
    assert value("nmt_attention_entropy_count", {"model": "en-es"}) == 1
    assert value("nmt_attention_entropy_sum", {"model": "en-es"}) == pytest.approx(math.log(4))
    assert value("nmt_coverage_deficit_count", {"model": "en-es"}) == 1
    # 2 * 0.25 = 0.5 per position: not under 0.5
    assert value("nmt_coverage_deficit_sum", {"model": "en-es"}) == 0.0
    text = generate_latest(registry).decode()
    assert "nmt_attention_entropy_bucket" in text and "nmt_coverage_deficit_bucket" in text
    assert "nan" not in text.lower()
