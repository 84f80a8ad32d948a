"""Attention diagnostics of one hypothesis: how spread out its attention is and how well
it covers the source. Torch-free (numpy only); computed from the attention the decoder
graph already returns every step (``StepOutput.attention``), so no extra model work.

Definitions (``attention`` is ``(target_steps, src_len)``, one row per generated token,
EOS step included, each row a distribution over the real source positions):

* entropy of a step: ``-Σ_i p_i ln p_i`` of its row (nats); 0 for a one-hot row,
  ``ln(src_len)`` for a uniform one. ``entropy_mean`` / ``entropy_max`` over steps.
* coverage of source position ``i``: ``Σ_t a_{t,i}``, the attention it got in total.
  ``coverage_deficit``: share of positions with coverage < 0.5 (barely attended: words
  the translation may have dropped); ``over_attention``: share with coverage > 1.5
  (attended again and again: repetition).
* ``unk_share``: share of source pieces that are the source tokenizer's unknown id.

Non-finite and negative weights count as 0, rows are renormalised to sum 1, and rows
with nothing left are skipped; with no usable row the attention figures are ``None``
(never NaN: they feed Prometheus histograms).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from service.metrics import Metrics

UNDER = 0.5
OVER = 1.5


@dataclass(frozen=True)
class Diagnostics:
    """One hypothesis's diagnostics (see the module docstring); plain floats."""

    entropy_mean: float | None
    entropy_max: float | None
    coverage_deficit: float | None
    over_attention: float | None
    unk_share: float


def _clean_rows(attention: np.ndarray | None) -> np.ndarray:
    """``(steps, src_len)`` float64 rows, each summing to 1; unusable rows dropped."""
    if attention is None:
        return np.zeros((0, 0))
    a = np.asarray(attention, dtype=np.float64)
    if a.ndim != 2 or a.size == 0:
        return np.zeros((0, a.shape[-1] if a.ndim else 0))
    a = np.where(np.isfinite(a) & (a > 0), a, 0.0)
    sums = a.sum(axis=1)
    keep = sums > 0
    return a[keep] / sums[keep, None]


def entropies(attention: np.ndarray | None) -> np.ndarray:
    """``(steps,)`` entropy (nats) of each usable row of ``(target_steps, src_len)``."""
    p = _clean_rows(attention)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -(p * logs).sum(axis=1)


def unk_share(source_ids: Sequence[int], unk_id: int) -> float:
    """Share of ``source_ids`` equal to ``unk_id`` (0 for no source)."""
    if not len(source_ids):
        return 0.0
    return float(np.mean(np.asarray(source_ids) == unk_id))


def diagnose(attention: np.ndarray | None, source_ids: Sequence[int], unk_id: int) -> Diagnostics:
    """The :class:`Diagnostics` of a hypothesis whose attention is
    ``(target_steps, src_len)`` over the source ``source_ids`` (``src_len`` of them)."""
    p = _clean_rows(attention)
    unk = unk_share(source_ids, unk_id)
    if p.shape[0] == 0 or p.shape[1] == 0:
        return Diagnostics(None, None, None, None, unk)
    ent = entropies(p)
    coverage = p.sum(axis=0)
    return Diagnostics(
        entropy_mean=float(ent.mean()),
        entropy_max=float(ent.max()),
        coverage_deficit=float(np.mean(coverage < UNDER)),
        over_attention=float(np.mean(coverage > OVER)),
        unk_share=unk,
    )


def observe(metrics: Metrics, model: str, diag: Diagnostics) -> None:
    """Record ``diag`` in the ``nmt_attention_entropy`` / ``nmt_coverage_deficit``
    histograms of ``model``; undefined (``None``) or non-finite figures are skipped."""
    if diag.entropy_mean is not None and math.isfinite(diag.entropy_mean):
        metrics.attention_entropy.labels(model).observe(diag.entropy_mean)
    if diag.coverage_deficit is not None and math.isfinite(diag.coverage_deficit):
        metrics.coverage_deficit.labels(model).observe(diag.coverage_deficit)
