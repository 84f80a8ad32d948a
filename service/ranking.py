"""Ranking a decoder step's candidates, in plain numpy: the primitives every search
strategy (:mod:`service.strategies`) and the loop's beam arrays
(:class:`service.beamrows.BeamRows`) share.

A sentence ranks only its own candidates (:func:`own_columns`: its top-k and EOS), so its
result does not depend on what else the step decodes; many sentences are ranked at once
as one padded block (:func:`rank_rows`), ordered as a stable sort would
(:func:`best_first`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from models.scoring import NEG_INF

if TYPE_CHECKING:
    from service.decoding import SentenceSearch


def own_columns(values: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A sentence's candidates: its first ``k`` top-k columns and EOS. Ranking exactly
    these (not the wider step's) keeps its result independent of its batch mates. A step
    capped at the vocabulary (``DecodeLoop.max_top_k``) has all of them already."""
    if values.shape[1] <= k + 1:
        return values, ids
    cols = [*range(k), values.shape[1] - 1]
    return values[:, cols], ids[:, cols]


def greedy_pick(values: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's greedy choice: the first best of its candidates ``values``/``ids``
    ``(rows, K + 1)``. Returns its token ids ``(rows,)`` and log-probs ``(rows,)``."""
    best = values.argmax(axis=1)
    pick = np.arange(values.shape[0])
    return ids[pick, best], values[pick, best]


def ranked_one(
    s: SentenceSearch, first: int, values: np.ndarray, ids: np.ndarray
) -> tuple[list[int], list[float], list[int]]:
    """One sentence's ranked continuations, as :func:`ranked_continuations` gives them for
    each of many (lists: the row each continues, cumulative log-prob, token id)."""
    v, i = own_columns(values[first : first + s.rows], ids[first : first + s.rows], s.top_k)
    total = (np.array(s.scores, dtype=np.float32)[:, None] + v).ravel()
    order = np.argsort(-total, kind="stable")[: s.rank_k]
    return (order // v.shape[1]).tolist(), total[order].tolist(), i.ravel()[order].tolist()


def ranked_siblings(
    s: SentenceSearch, first: int, values: np.ndarray, ids: np.ndarray, rate: float
) -> tuple[list[int], list[float], list[int], list[float]]:
    """:func:`ranked_one` for diverse siblings (Li et al. 2016; fairseq's
    ``DiverseSiblingsSearch``): each row ranks its own continuations by cumulative
    log-prob, keeps its best ``rank_k`` and takes ``k * rate`` off its k-th (k from 1,
    float32 as fairseq's); then all rows' continuations are ranked together by what is
    left. Returns lists: the row each continues, its penalised cumulative score, token
    id, and its log-prob as the model gave it."""
    v, i = own_columns(values[first : first + s.rows], ids[first : first + s.rows], s.top_k)
    cum = np.array(s.scores, dtype=np.float32)[:, None] + v  # (rows, width) float32
    k = min(s.rank_k, cum.shape[1])
    order = np.argsort(-cum, axis=1, kind="stable")[:, :k]  # each row's siblings, best first
    penalty = np.arange(1, k + 1, dtype=np.float32) * np.float32(rate)  # (k,)
    total = (np.take_along_axis(cum, order, axis=1) - penalty).ravel()  # (rows * k,)
    tokens = np.take_along_axis(i, order, axis=1).ravel()
    raw = np.take_along_axis(v, order, axis=1).ravel()
    ranked = np.argsort(-total, kind="stable")[: s.rank_k]
    return (
        (ranked // k).tolist(),
        total[ranked].tolist(),
        tokens[ranked].tolist(),
        raw[ranked].tolist(),
    )


def ranked_continuations(
    searches: Sequence[SentenceSearch],
    first_rows: Sequence[int],
    values: np.ndarray,
    ids: np.ndarray,
) -> list[tuple[list[int], np.ndarray, np.ndarray, np.ndarray]]:
    """Each sentence's best ``rank_k`` continuations of its live rows, by cumulative
    log-prob (its scores plus its own candidates, float32), best first, equal ones in
    the order of its rows and columns (a stable sort): what a beam search ranks.

    Sentences that rank the same candidates (same ``top_k`` and ``rank_k``) are ranked
    at once: their rows are gathered into one ``(n, rows, width)`` block, a sentence's
    missing rows at -inf, where they rank after every real candidate (a search stops at
    the first -inf anyway), so each one's ranking is the one it gets alone.

    Args: as :meth:`service.strategies.Strategy.select`.

    Returns:
        Per group: the indices of its sentences in ``searches``, then ``(n, R)`` arrays
        of each one's ranked candidates: the row (of its own rows) it continues,
        its cumulative log-prob (float32; -inf: no candidate) and its token id.
    """
    groups: dict[tuple[int, int], list[int]] = {}
    for i, s in enumerate(searches):
        groups.setdefault((s.top_k, s.rank_k), []).append(i)
    out = []
    for (k, rank_k), members in groups.items():
        v_all, i_all = own_columns(values, ids, k)
        firsts = np.array([first_rows[m] for m in members], dtype=np.int64)
        counts = np.array([searches[m].rows for m in members], dtype=np.int64)
        scores = np.zeros(len(values), dtype=np.float32)  # each row's, of these members
        for m in members:
            scores[first_rows[m] : first_rows[m] + searches[m].rows] = searches[m].scores
        out.append((members, *rank_rows(scores, v_all, i_all, firsts, counts, rank_k)))
    return out


def rank_rows(
    scores: np.ndarray,
    values: np.ndarray,
    ids: np.ndarray,
    firsts: np.ndarray,
    counts: np.ndarray,
    rank_k: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ranking of :func:`ranked_continuations` for ``n`` sentences whose rows are
    rows ``firsts[j] .. firsts[j] + counts[j] - 1`` (``(n,)`` each) of ``values``/``ids``
    ``(rows, width)`` (the sentences' own columns) and ``scores`` ``(rows,)`` float32
    (each row's cumulative log-prob). The sentences are laid out as one ``(n, depth,
    width)`` block, a sentence's missing rows at -inf.

    Returns ``(n, rank_k)`` arrays: the row (of its own) each ranked candidate continues,
    its cumulative log-prob (float32; -inf: no candidate) and its token id.
    """
    depth = int(counts.max())
    pad = np.arange(depth)[None, :] >= counts[:, None]  # (n, depth): no such row
    index = firsts[:, None] + np.arange(depth)
    index[pad] = 0
    total = scores[index][:, :, None] + values[index]  # (n, depth, width) float32
    total[pad] = NEG_INF
    flat = total.reshape(len(index), -1)
    order = best_first(flat, rank_k)
    ranked = np.take_along_axis(flat, order, axis=1)
    tokens = np.take_along_axis(ids[index].reshape(flat.shape), order, axis=1)
    return order // values.shape[1], ranked, tokens


def best_first(values: np.ndarray, k: int) -> np.ndarray:
    """The columns of each row's ``k`` largest ``values`` ``(n, m)`` float32, largest
    first, equal ones in column order, NaN after -inf: exactly
    ``np.argsort(-values, axis=1, kind="stable")[:, :k]``.

    numpy's stable sort of floats is a merge sort: 0.5 ms at 256 x 55. From
    :data:`SORT_KEYS_FROM` rows, each value becomes an int32 key that orders like it (its
    bits, a negative value's 31 low bits flipped; -0.0 made +0.0), and the int64
    ``(~key << 16) | column`` orders by value, largest first, then column: unique, so a
    plain sort of them is stable, and the column is their low 16 bits.
    """
    n, m = values.shape
    if n < SORT_KEYS_FROM or m > 0xFFFF:
        return np.argsort(-values, axis=1, kind="stable")[:, :k]
    bits = (values + np.float32(0.0)).view(np.int32)
    key = bits ^ ((bits >> 31) & 0x7FFFFFFF)  # ascending as the floats are
    key[np.isnan(values)] = np.iinfo(np.int32).min  # below -inf's key: ranked last
    order = (np.invert(key).astype(np.int64) << 16) | np.arange(m)
    return np.sort(order, axis=1)[:, :k] & 0xFFFF


# Rows from which best_first sorts int64 keys (below, numpy's stable sort costs less).
SORT_KEYS_FROM = 64


def beam_masks(
    ranked: np.ndarray, tokens: np.ndarray, eos: int, beams: np.ndarray | int
) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`service.strategies.Beam._choose`'s rules for many sentences at once, over their ranked
    continuations ``ranked``/``tokens`` ``(n, R)`` (:func:`rank_rows`) and beam sizes
    ``beams`` (``(n, 1)`` or one for all). The ranking stops at the first candidate with
    no score. Returns ``(n, R)`` masks: the candidates that stay live (the best
    ``beam`` non-EOS ones) and those that finish (an EOS among the first ``beam``)."""
    rank = np.arange(ranked.shape[1])[None, :]
    valid = np.logical_and.accumulate(ranked != NEG_INF, axis=1)
    is_eos = tokens == eos
    live = valid & ~is_eos
    keep = live & (np.cumsum(live, axis=1) <= beams)
    ends = valid & is_eos & (rank < beams)
    return keep, ends
