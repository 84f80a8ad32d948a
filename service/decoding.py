"""Search strategies in plain numpy over a one-step decoder.

No ONNX Runtime and no gRPC here. Each decoder step (see :mod:`export.spec`) gives every
live row its candidates (:func:`candidates`: the graph's top-k, then EOS); the shared
rules of :mod:`models.scoring` restrict them (EOS banned before ``min_length``, forced at
the length limit); then each search strategy (:data:`GREEDY`, :data:`BEAM`,
:data:`EOLE_BEAM`) chooses, for all its sentences of the step at once, what every
sentence takes (:class:`Selection`), and each sentence's :class:`SentenceSearch` records
it. The driver loop that batches them over one decoder call per step is
:class:`service.loop.DecodeLoop` (also importable from here), which the export parity
gate and the service scheduler both use.

A new strategy (say, one that forces a target prefix) is one more object with the
:class:`Strategy` methods; the loop needs no change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from models.options import DecodeOptions, Hypothesis
from models.scoring import NEG_INF, Eos, ScoringRules


@dataclass(frozen=True)
class SpecialIds:
    pad: int
    bos: int
    eos: int
    unk: int = -1  # -1: the model has none (then ``ban_unk`` bans nothing)


def candidates(
    topk_values: np.ndarray,
    topk_ids: np.ndarray,
    eos_values: np.ndarray,
    special: SpecialIds,
) -> tuple[np.ndarray, np.ndarray]:
    """A step's candidates for every row: the graph's top-k, then EOS in the last column.

    A pad or bos id among the top-k gets -inf: the graph already excludes them; this
    keeps a bundle whose graph does not from ever emitting them.

    Args:
        topk_values: ``(rows, k)`` best non-EOS log-probs.
        topk_ids: ``(rows, k)`` their token ids.
        eos_values: ``(rows,)`` EOS log-probs.

    Returns:
        values ``(rows, k + 1)`` float32 and ids ``(rows, k + 1)`` int64 (new arrays).
    """
    rows, k = topk_values.shape
    values = np.empty((rows, k + 1), dtype=np.float32)
    ids = np.empty((rows, k + 1), dtype=np.int64)
    banned = (topk_ids == special.pad) | (topk_ids == special.bos)
    values[:, :k] = np.where(banned, NEG_INF, topk_values)
    values[:, k] = eos_values
    ids[:, :k] = topk_ids
    ids[:, k] = special.eos
    return values, ids


# -- what a strategy chooses, and the sentence that records it ---------------------


class Selection(NamedTuple):
    """What one sentence takes from a step. Rows are the sentence's own rows of the step.

    ``parents[i]`` continues with ``tokens[i]`` at cumulative log-prob ``scores[i]``; each
    ``(row, log_prob)`` of ``finished`` ends that row with EOS (``log_prob`` includes the
    EOS); ``done``: the search ends with this step; ``top_finished``: the step's best
    continuation was EOS (OpenNMT-py 1.x/2.x's search remembers it: :class:`OnmtPy1Beam`).
    """

    parents: list[int]
    tokens: list[int]
    scores: list[float]
    finished: list[tuple[int, float]]
    done: bool
    top_finished: bool = False


class _Partial:
    """A live hypothesis: its tokens, and with ``return_attention`` / ``replace_unk`` its
    attention rows, with a coverage penalty its attention sums ``(src_len,)`` float64."""

    __slots__ = ("tokens", "attention", "coverage")

    def __init__(
        self,
        tokens: list[int],
        attention: list[np.ndarray] | None = None,
        coverage: np.ndarray | None = None,
    ) -> None:
        self.tokens = tokens
        self.attention = attention
        self.coverage = coverage


class SentenceSearch:
    """One sentence's hypotheses under its :class:`Strategy`: the rows the next step
    feeds (:attr:`prev_tokens`, :attr:`parents`), and what the search has found."""

    def __init__(
        self,
        strategy: Strategy,
        src_len: int,
        options: DecodeOptions,
        special: SpecialIds,
        prefix: Sequence[int] = (),
        sentence: int = 0,
    ) -> None:
        """``sentence``: its index in its request, which with ``options.seed`` fixes its
        random draws (:class:`Sampling`)."""
        self.strategy = strategy
        # Target tokens forced at the first steps (:class:`Prefix`); no EOS.
        self.prefix: tuple[int, ...] = tuple(prefix)
        self.options = options
        self.rules = ScoringRules.of(options)
        self.src_len = src_len
        self.eos = special.eos
        self.limit = self.rules.length_limit(src_len)
        if len(self.prefix) >= self.limit:
            raise ValueError(
                f"target prefix of {len(self.prefix)} tokens leaves no room for EOS under "
                f"the length limit of {self.limit}"
            )
        # Candidates the strategy ranks per row; the decoder is asked for as many more as
        # a row of the step has banned tokens (:attr:`top_k`), so that banning them
        # leaves the strategy exactly its ``rank_k`` best allowed ones.
        self.rank_k = strategy.top_k(options)
        self.top_k = self.rank_k
        self.unk = special.unk
        # its own generator: its draws do not depend on what else is being decoded
        self.rng = np.random.default_rng([options.seed, sentence]) if options.sampling else None
        self._draw: float | None = None  # this step's uniform number, once drawn
        # each live row's banned tokens for the next step (ScoringRules.banned); None
        # when these options ban nothing
        self.bans: list[list[int]] | None = None
        self.step = 0
        self.done = False
        self.top_finished = False  # some step's best continuation was EOS
        # One entry per live row: the token its next step is fed, the row of the previous
        # step (or of the initial state, at step 0) it continues, its cumulative log-prob.
        self.prev_tokens: list[int] = [special.bos]
        self.parents: list[int] = [0]
        self.scores: list[float] = [0.0]
        self.rows = 1  # live rows: decoded by the next step
        self._keep_attn = options.return_attention or options.replace_unk  # it reads them
        # attention summed over each live row's steps (``(src_len,)``), for the coverage
        # penalty only
        self._track_cov = self.rules.needs_coverage
        self._live = [
            _Partial(
                [], [] if self._keep_attn else None, np.zeros(src_len) if self._track_cov else None
            )
        ]
        self._finished: list[Hypothesis] = []
        # the live hypotheses' tokens while the loop keeps them in its beam arrays
        # (:class:`service.beamrows.BeamRows`), which then own them
        self.live_tokens: Callable[[], list[list[int]]] | None = None
        self._update_bans()

    def _update_bans(self) -> None:
        if not self.rules.bans_tokens:
            return
        self.bans = [self.rules.banned(h.tokens, self.unk) for h in self._live]
        self.top_k = self.rank_k + max(map(len, self.bans), default=0)

    def draw(self) -> float:
        """This step's uniform number from :attr:`rng`: the same however often the step
        is chosen (an isolation probe, a retried step), the next only once :meth:`take`
        recorded it, so choosing a step and throwing it away changes no draw."""
        if self._draw is None:
            self._draw = float(self.rng.random())
        return self._draw

    @property
    def plain(self) -> bool:
        """Nothing per step but tokens and log-probs: no bans, no attention kept, no
        coverage, no forced prefix."""
        return (
            not self.rules.bans_tokens
            and not self._keep_attn
            and not self._track_cov
            and not self.prefix
        )

    @property
    def batchable(self) -> bool:
        """Whether the loop may keep this search as one row of its greedy arrays
        (:class:`service.greedyrows.GreedyRows`): greedy and :attr:`plain`."""
        return self.strategy is GREEDY and self.plain

    @property
    def beam_batchable(self) -> bool:
        """Whether the loop may keep this search in its beam arrays
        (:class:`service.beamrows.BeamRows`): the standard beam search, :attr:`plain`."""
        return self.strategy is BEAM and self.plain

    @property
    def target(self) -> list[int]:
        """The single live hypothesis's tokens so far: the very list the loop's greedy
        arrays extend at each step (a search kept there has no other per-step record
        until it finishes: :meth:`finish`)."""
        return self._live[0].tokens

    def finish(self, step: int, score: float, total: float, attention: np.ndarray) -> None:
        """A one-row search whose state the loop kept (:attr:`batchable`) ends at
        ``step`` (tokens so far) with EOS: ``score`` its cumulative log-prob before it,
        ``total`` after it; ``attention`` ``(1, src_len_padded)`` the step's."""
        self.step, self.scores = step, [score]
        self.take(Selection([], [], [], [(0, total)], True), attention)

    @property
    def finished(self) -> int:
        """Hypotheses finished so far."""
        return len(self._finished)

    def eos_rule(self) -> Eos:
        """The EOS rule of the next step."""
        return self.rules.eos_rule(self.step, self.limit)

    def take(self, selection: Selection, attention: np.ndarray) -> None:
        """Record this step's ``selection``; ``attention`` ``(rows, src_len_padded)`` is
        the attention of this sentence's rows of the step."""
        keep_attn = self._keep_attn
        self._draw = None
        if selection.finished:
            scored = self.rules.eos_scored(self.eos_rule() is Eos.FORCED)
            for row, log_prob in selection.finished:
                hyp = self._live[row]
                attn = hyp.attention + [attention[row, : self.src_len]] if keep_attn else None
                cov = None
                if self._track_cov:
                    # an unscored EOS (Eole at the length limit) is no step: its
                    # attention is not the hypothesis's either
                    cov = hyp.coverage + attention[row, : self.src_len] if scored else hyp.coverage
                self.add_finished(
                    hyp.tokens, log_prob, self.scores[row], scored,
                    np.stack(attn) if keep_attn else None, cov,
                )  # fmt: skip
        self.step += 1
        self.top_finished = self.top_finished or selection.top_finished
        if selection.done:
            self.done = True
            return
        live = self._live
        if len(live) == 1 and len(selection.parents) == 1:  # greedy: extend in place
            hyp = live[0]
            hyp.tokens.append(selection.tokens[0])
            if keep_attn:
                hyp.attention.append(attention[0, : self.src_len])
            if self._track_cov:
                hyp.coverage = hyp.coverage + attention[0, : self.src_len]
        elif not keep_attn and not self._track_cov:  # tokens only (the common case)
            tokens = [h.tokens for h in live]
            self._live = [
                _Partial(tokens[p] + [t])
                for p, t in zip(selection.parents, selection.tokens, strict=True)
            ]
        else:
            track = self._track_cov
            self._live = [
                _Partial(
                    live[p].tokens + [t],
                    live[p].attention + [attention[p, : self.src_len]] if keep_attn else None,
                    live[p].coverage + attention[p, : self.src_len] if track else None,
                )
                for p, t in zip(selection.parents, selection.tokens, strict=True)
            ]
        self.rows = len(selection.tokens)
        self.prev_tokens = selection.tokens
        self.parents = selection.parents
        self.scores = selection.scores
        self._update_bans()

    def add_finished(
        self,
        tokens: Sequence[int],
        log_prob: float,
        row_log_prob: float,
        scored: bool,
        attention: np.ndarray | None = None,
        coverage: np.ndarray | None = None,
    ) -> None:
        """Record a hypothesis ``tokens`` (no EOS) that ends at this step: ``log_prob``
        with its EOS, ``row_log_prob`` before it (what counts when the EOS is not
        ``scored``: :meth:`ScoringRules.eos_scored`); ``attention`` ``(len, src_len)``
        when kept, ``coverage`` its summed attention when the score needs it."""
        if not scored:  # ended without EOS: its log-prob is the row's so far
            log_prob = row_log_prob
        self._finished.append(
            Hypothesis(
                tokens=tuple(tokens),
                score=self.rules.score(log_prob, len(tokens), eos=scored, coverage=coverage),
                log_prob=log_prob,
                attention=attention,
            )
        )

    def results(self) -> list[Hypothesis]:
        """The ``n_best`` finished hypotheses, best score first."""
        ranked = sorted(self._finished, key=lambda h: h.score, reverse=True)
        return ranked[: self.options.n_best]

    def stable_prefix(self) -> tuple[int, ...]:
        """The prefix every live and finished hypothesis shares (all of the best one once
        done): streaming it never has to take text back. Greedy: everything so far."""
        if self.done:
            best = self.results()
            return best[0].tokens if best else ()
        live = self.live_tokens() if self.live_tokens else [h.tokens for h in self._live]
        seqs = live + [list(h.tokens) for h in self._finished]
        prefix = []
        for column in zip(*seqs, strict=False):
            if any(t != column[0] for t in column):
                break
            prefix.append(column[0])
        return tuple(prefix)


# -- strategies ---------------------------------------------------------------------


class Strategy(Protocol):
    """How one kind of search chooses a step, for all its sentences of the step at once."""

    def top_k(self, options: DecodeOptions) -> int:
        """Non-EOS candidates per row the strategy ranks (the decoder returns the most any
        live sentence asks for; a sentence sees its own ``top_k`` and EOS)."""

    def select(
        self,
        searches: Sequence[SentenceSearch],
        first_rows: Sequence[int],
        values: np.ndarray,
        ids: np.ndarray,
    ) -> list[Selection]:
        """The :class:`Selection` of each of ``searches`` (all of this strategy).

        Args:
            first_rows: where each sentence's rows start in ``values`` (it has
                ``searches[i].rows`` of them).
            values: ``(step rows, K + 1)`` candidate log-probs of the whole step, EOS
                last, the EOS rules applied; ``K`` is at least every sentence's ``top_k``.
            ids: ``(step rows, K + 1)`` their token ids.

        Reads the searches and changes nothing: each then takes its selection
        (:meth:`SentenceSearch.take`).
        """


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


class Greedy:
    """Argmax decoding, one row per sentence: the best candidate, the first of equal ones
    (a token before EOS), as in :func:`models.search.greedy_search`. Log-probs add up in
    float64."""

    # Three candidates, not one: should a bundle's graph leak pad and bos into its top-k
    # (ours blocks them), a real token still remains once they are blocked.
    K = 3

    def top_k(self, options: DecodeOptions) -> int:
        return self.K

    def select(self, searches, first_rows, values, ids) -> list[Selection]:
        # Every column, whatever the step's width: the top-k columns come best first, so
        # the first best of a row is the same in any wider step (its result does not
        # depend on its batch mates), and a row whose best tokens are banned finds the
        # next ones in the columns it asked for.
        if len(searches) == values.shape[0]:
            v, i = values, ids  # every row of the step is greedy: nothing to pick out
        else:
            index = np.asarray(first_rows, dtype=np.int64)
            v, i = values[index], ids[index]
        tokens, log_probs = greedy_pick(v, i)
        chosen = []
        for s, tok, log_prob in zip(searches, tokens.tolist(), log_probs.tolist(), strict=True):
            total = s.scores[0] + log_prob
            if tok == s.eos:
                chosen.append(Selection([], [], [], [(0, total)], True))
            else:
                chosen.append(Selection([0], [tok], [total], [], False))
        return chosen


# A step's sentences of one kind from which it chooses as arrays (fewer: one sentence at
# a time). An array call costs microseconds whatever its size, several times more right
# after an ONNX Runtime call on a small CPU: with arrays at every step the service on 2
# cores gave 0.83x the greedy and 0.85x the beam-5 sentences/s of the previous main at
# one client (loadtest/results/bench-cpu-greedyrows.md). The decode loop's host time a
# step, arrays vs one at a time (python -m loadtest.loophost --ab-tree, 2026-11-26,
# scratch runs): greedy 185 vs 127 us at 1 sentence, 394 vs 356 at 8, 429 vs 485 at 16;
# beam 5 429 vs 208 at 1.
ARRAY_MIN_SENTENCES = 16


def ranked_one(
    s: SentenceSearch, first: int, values: np.ndarray, ids: np.ndarray
) -> tuple[list[int], list[float], list[int]]:
    """One sentence's ranked continuations, as :func:`ranked_continuations` gives them for
    each of many (lists: the row each continues, cumulative log-prob, token id)."""
    v, i = own_columns(values[first : first + s.rows], ids[first : first + s.rows], s.top_k)
    total = (np.array(s.scores, dtype=np.float32)[:, None] + v).ravel()
    order = np.argsort(-total, kind="stable")[: s.rank_k]
    return (order // v.shape[1]).tolist(), total[order].tolist(), i.ravel()[order].tolist()


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

    Args: as :meth:`Strategy.select`.

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
    """:meth:`Beam._choose`'s rules for many sentences at once, over their ranked
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


class Beam:
    """Beam search, the rules of :func:`models.search.beam_search`: rank the best
    ``2 * beam`` continuations by cumulative log-prob (float32); an EOS among the first
    ``beam`` finishes a hypothesis, the best ``beam`` non-EOS ones stay live; done once
    ``beam`` hypotheses have finished.

    A step with many beam sentences (:data:`ARRAY_MIN_SENTENCES`) ranks and chooses for
    all of them at once, as arrays (:func:`ranked_continuations`, masks for the rules
    below); with few, one sentence at a time (:meth:`_choose`). Both give the same
    selections (``tests/service/test_beam_select.py``)."""

    def top_k(self, options: DecodeOptions) -> int:
        return 2 * options.beam_size

    def select(self, searches, first_rows, values, ids) -> list[Selection]:
        if len(searches) < ARRAY_MIN_SENTENCES:
            return [
                self._choose(s, *ranked_one(s, first, values, ids))
                for s, first in zip(searches, first_rows, strict=True)
            ]
        return self._select_arrays(searches, first_rows, values, ids)

    def _choose(self, s: SentenceSearch, rows, ranked, tokens_ranked) -> Selection:
        """One sentence's selection from its ranked continuations (``rows`` each
        continues, cumulative log-probs ``ranked``, token ids ``tokens_ranked``)."""
        beam = s.options.beam_size
        parents, tokens, scores, finished = [], [], [], []
        for rank, score in enumerate(ranked):
            if score == NEG_INF:
                break
            tok = tokens_ranked[rank]
            if tok == s.eos:
                if rank < beam:
                    finished.append((rows[rank], score))
                continue
            parents.append(rows[rank])
            tokens.append(tok)
            scores.append(score)
            if len(parents) == beam:
                break
        done = s.finished + len(finished) >= beam or not parents
        return Selection(parents, tokens, scores, finished, done)

    def _select_arrays(self, searches, first_rows, values, ids) -> list[Selection]:
        """:meth:`_choose`'s rules for every sentence at once, as masks."""
        chosen: list[Selection | None] = [None] * len(searches)
        for members, rows, ranked, tokens in ranked_continuations(
            searches, first_rows, values, ids
        ):
            group = [searches[m] for m in members]
            beams = np.array([s.options.beam_size for s in group])[:, None]
            keep, ends = beam_masks(ranked, tokens, group[0].eos, beams)
            kept, ended = keep.sum(axis=1).tolist(), ends.sum(axis=1).tolist()
            parents, toks, scores = (
                rows[keep].tolist(),
                tokens[keep].tolist(),
                ranked[keep].tolist(),
            )
            end_rows, end_scores = rows[ends].tolist(), ranked[ends].tolist()
            a = b = 0
            for m, s, n_kept, n_ended in zip(members, group, kept, ended, strict=True):
                finished = list(
                    zip(end_rows[b : b + n_ended], end_scores[b : b + n_ended], strict=True)
                )
                done = s.finished + n_ended >= s.options.beam_size or not n_kept
                chosen[m] = Selection(
                    parents[a : a + n_kept], toks[a : a + n_kept], scores[a : a + n_kept],
                    finished, done,
                )  # fmt: skip
                a += n_kept
                b += n_ended
        return chosen  # type: ignore[return-value]


class EoleBeam(Beam):
    """Eole's (OpenNMT-py's) beam search, for models converted from Eole that must give
    Eole's n-best lists (``DecodeOptions(search="eole")``).

    Each step keeps the best ``beam`` continuations of the live hypotheses; those that
    are EOS finish (so fewer stay live), the rest continue. The sentence is done at a
    step whose best continuation is EOS once ``n_best`` hypotheses have finished, unless
    the continuations reach the length limit there (Eole ends and ranks them too). Its
    scoring rules (BOS in the length, no EOS at the length limit) are
    ``ScoringRules.of(options)``'s for ``search="eole"``.
    """

    def top_k(self, options: DecodeOptions) -> int:
        return options.beam_size

    def _select_arrays(self, searches, first_rows, values, ids) -> list[Selection]:
        """Ranked at once, chosen one sentence at a time (its own rules, :meth:`_choose`)."""
        chosen: list[Selection | None] = [None] * len(searches)
        for members, rows, ranked, tokens in ranked_continuations(
            searches, first_rows, values, ids
        ):
            for m, r, v, t in zip(
                members, rows.tolist(), ranked.tolist(), tokens.tolist(), strict=True
            ):
                chosen[m] = self._choose(searches[m], r, v, t)
        return chosen  # type: ignore[return-value]

    def _choose(self, s: SentenceSearch, rows, ranked, tokens_ranked) -> Selection:
        """``rows``, ``ranked``, ``tokens_ranked``: its ranked continuations (the row
        each continues, cumulative log-prob, token id)."""
        parents, tokens, scores, finished = [], [], [], []
        top_finished = False
        for rank, score in enumerate(ranked):
            if score == NEG_INF:
                break
            row, tok = rows[rank], tokens_ranked[rank]
            if tok == s.eos:
                top_finished = top_finished or rank == 0
                finished.append((row, score))
                continue
            parents.append(row)
            tokens.append(tok)
            scores.append(score)
        # Eole's end: this step's best continuation is EOS and n_best have finished. Not
        # when the continuations reach the length limit: Eole ends them at this very step
        # (ensure_max_length) and ranks them with the rest before stopping; here they end
        # at the next, EOS-forced step, so the search must get there.
        at_limit = s.step + 1 >= s.limit - 1
        top = top_finished or (self.remembers_top and s.top_finished)
        enough = top and s.finished + len(finished) >= self.hypotheses_needed(s.options)
        done = (enough and not at_limit) or not parents
        return Selection(parents, tokens, scores, finished, done, top_finished)

    # Whether a step whose best continuation is not EOS may end the search because an
    # earlier step's was (OpenNMT-py 1.x/2.x), or only the step's own best counts (Eole).
    remembers_top = False

    def hypotheses_needed(self, options: DecodeOptions) -> int:
        """Finished hypotheses the search needs before it may end."""
        return options.n_best


class OnmtPy1Beam(EoleBeam):
    """OpenNMT-py 1.x's beam search (``DecodeOptions(search="opennmt-py-1")``), for models
    converted from 1.x checkpoints: Eole's, which descends from it, except that 1.x
    remembers that the best continuation of *some* step was EOS (its
    ``top_beam_finished`` is or-ed from step to step) and ends at the first step after
    which ``n_best`` hypotheses have finished; Eole asks that of the step's own best
    continuation.
    """

    remembers_top = True


class OnmtPy2Beam(OnmtPy1Beam):
    """OpenNMT-py 2.x's beam search (``DecodeOptions(search="opennmt-py-2")``): 1.x's,
    except that it waits for ``beam_size`` finished hypotheses, not ``n_best``. With the
    100-token limit of 1.x/2.x these ends part often from Eole's: on the 2.3.0 fixture
    models Eole's rule changed 1, 79 and 9 of 300 5-best lists.
    """

    def hypotheses_needed(self, options: DecodeOptions) -> int:
        return options.beam_size


class Sampling:
    """Random sampling, one row per sentence (Eole's ``random_sampling_topk`` /
    ``random_sampling_temp``, CTranslate2's ``sampling_topk`` / ``sampling_temperature``).

    Each step ranks the sentence's own candidates (its top-k and EOS, after the EOS rules
    and bans), keeps the ``sampling_topk`` best, then (``sampling_topp`` < 1) only the
    first of them whose tempered probabilities add up to ``sampling_topp`` (the nucleus
    of the k best, renormalised: Hugging Face's order; Eole cuts the nucleus from the
    whole distribution, then the k best), and draws one with probability
    ``softmax(log_prob / sampling_temperature)`` by one uniform number of the sentence's
    own generator (:meth:`SentenceSearch.draw`) against the cumulative probabilities, in
    rank order. The hypothesis's log-prob is the model's own (untempered) log-prob of
    what was drawn. Ties rank as the candidates come (a token before EOS), so the draws
    are a function of the seed, the sentence's index and the model alone.
    """

    def top_k(self, options: DecodeOptions) -> int:
        return options.sampling_topk

    def select(self, searches, first_rows, values, ids) -> list[Selection]:
        chosen = []
        for s, first in zip(searches, first_rows, strict=True):
            v, i = own_columns(values[first : first + 1], ids[first : first + 1], s.top_k)
            v, i = v[0], i[0]
            order = np.argsort(-v, kind="stable")[: s.rank_k]
            logits = v[order].astype(np.float64) / s.options.sampling_temperature
            if not np.isfinite(logits[0]):  # nothing allowed: end here (as greedy would)
                chosen.append(Selection([], [], [], [(0, s.scores[0] + float(v[order[0]]))], True))
                continue
            weights = np.exp(logits - logits[0])  # -inf (banned) -> 0
            cumulative = np.cumsum(weights / weights.sum())
            if s.options.sampling_topp < 1.0:  # the nucleus: first to reach topp
                keep = int(np.searchsorted(cumulative, s.options.sampling_topp)) + 1
                order, weights = order[:keep], weights[:keep]
                cumulative = np.cumsum(weights / weights.sum())
            pick = order[
                min(int(np.searchsorted(cumulative, s.draw(), side="right")), len(order) - 1)
            ]
            tok, total = int(i[pick]), s.scores[0] + float(v[pick])
            if tok == s.eos:
                chosen.append(Selection([], [], [], [(0, total)], True))
            else:
                chosen.append(Selection([0], [tok], [total], [], False))
        return chosen


class Prefix:
    """Forced decoding of a target prefix, around any ``inner`` strategy.

    While a sentence's step is below ``len(search.prefix)`` its single row takes the
    next prefix token (never EOS, whatever the EOS rules say); from then on ``inner``
    chooses. The prefix tokens are part of every hypothesis's ``tokens`` and count in
    its length.

    Scores: the decoder graph returns only its top-k log-probs and EOS's, so a forced
    token's own log-prob is not available when it is outside the top-k. Rather than mix
    real and missing values, a forced token adds **0** to the cumulative log-prob:
    ``log_prob`` and ``score`` cover the continuation only (the reference,
    :mod:`models.search`, does the same, so both rank the same way).
    """

    def __init__(self, inner: Strategy) -> None:
        self.inner = inner

    def top_k(self, options: DecodeOptions) -> int:
        return self.inner.top_k(options)

    def select(self, searches, first_rows, values, ids) -> list[Selection]:
        chosen: list[Selection | None] = [None] * len(searches)
        rest: list[int] = []
        for i, s in enumerate(searches):
            if s.step < len(s.prefix):
                # one row during the prefix: it continues with the forced token
                chosen[i] = Selection([0], [s.prefix[s.step]], [s.scores[0]], [], False)
            else:
                rest.append(i)
        if rest:
            picked = self.inner.select(
                [searches[i] for i in rest], [first_rows[i] for i in rest], values, ids
            )
            for i, selection in zip(rest, picked, strict=True):
                chosen[i] = selection
        return chosen  # type: ignore[return-value]


GREEDY: Strategy = Greedy()
BEAM: Strategy = Beam()
EOLE_BEAM: Strategy = EoleBeam()
ONMT_PY1_BEAM: Strategy = OnmtPy1Beam()
ONMT_PY2_BEAM: Strategy = OnmtPy2Beam()
SAMPLING: Strategy = Sampling()
BEAMS: dict[str, Strategy] = {
    "standard": BEAM,
    "eole": EOLE_BEAM,
    "opennmt-py-1": ONMT_PY1_BEAM,
    "opennmt-py-2": ONMT_PY2_BEAM,
}
# One wrapper per strategy, so that the loop groups prefixed sentences together.
_PREFIXED: dict[Strategy, Strategy] = {s: Prefix(s) for s in (GREEDY, *BEAMS.values(), SAMPLING)}


def strategy_for(options: DecodeOptions, *, prefix: bool = False) -> Strategy:
    """Greedy for ``beam_size == 1`` (cheaper bookkeeping, same results) or sampling when
    ``options`` ask for it, else the beam search ``options.search`` names; wrapped in
    :class:`Prefix` when ``prefix``."""
    inner = BEAMS[options.search]
    if options.beam_size == 1:
        inner = SAMPLING if options.sampling else GREEDY
    return _PREFIXED[inner] if prefix else inner


def make_search(
    src_len: int,
    options: DecodeOptions,
    special: SpecialIds,
    prefix: Sequence[int] = (),
    sentence: int = 0,
) -> SentenceSearch:
    """A sentence of ``src_len`` source tokens, decoded as ``options`` say, its target
    starting with the token ids ``prefix`` (forced, see :class:`Prefix`); ``sentence``:
    its index in its request (the draws of :class:`Sampling`)."""
    strategy = strategy_for(options, prefix=bool(prefix))
    return SentenceSearch(strategy, src_len, options, special, prefix, sentence)


# -- the step model contract --------------------------------------------------------


@dataclass
class Encoded:
    """Encoder outputs for a batch: memory ``(batch, src_len, D)``, keys
    ``(batch, src_len, K)``, mask ``(batch, src_len)`` bool, and the initial decoder
    state tensors, each ``(batch, ...)``."""

    memory: np.ndarray
    keys: np.ndarray
    mask: np.ndarray
    states: tuple[np.ndarray, ...]


@dataclass
class StepOutput:
    """Decoder step outputs (shapes in :mod:`export.spec`)."""

    topk_values: np.ndarray
    topk_ids: np.ndarray
    eos_values: np.ndarray
    attention: np.ndarray
    # Host arrays, or device-resident states (anything with ``shape`` and ``__array__``)
    # when the runtime keeps them on its device between steps.
    states: tuple[Any, ...]


class StepModel(Protocol):
    """An encoder plus one decoder step; :class:`service.runtime.OnnxModel` is one."""

    def new_pool(self) -> Any:
        """An empty memory pool for a decode loop over this model: a
        :class:`service.pool.MemoryPool`, or one of its interface that keeps the decode
        state where the model computes (:class:`service.devicepool.DevicePool`)."""

    def encode(self, src_ids: np.ndarray, src_lengths: np.ndarray) -> Encoded:
        """``src_ids`` ``(batch, src_len)`` int64, ``src_lengths`` ``(batch,)`` int64."""

    def step(
        self,
        *,
        prev_tokens: np.ndarray,
        parent_rows: np.ndarray,
        row_sentence: np.ndarray,
        memory: np.ndarray,
        keys: np.ndarray,
        mask: np.ndarray,
        states: tuple[np.ndarray, ...],
        top_k: int,
    ) -> StepOutput: ...


def pad_batch(sources: list[list[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """``(batch, max_len)`` int64 right-padded ids and ``(batch,)`` int64 lengths."""
    lengths = np.array([len(s) for s in sources], dtype=np.int64)
    ids = np.full((len(sources), int(lengths.max())), pad_id, dtype=np.int64)
    for i, s in enumerate(sources):
        ids[i, : len(s)] = s
    return ids, lengths


def length_groups(lengths: list[int], max_padding: int) -> list[list[int]]:
    """Split sentences into encoder batches that waste little work on padding.

    Sorted by length, a sentence joins the current batch unless that would make the
    batch's padding (``size * longest - sum of lengths``) exceed ``max_padding`` tokens.
    An encoder call costs about as much as encoding a dozen tokens, so a few more calls
    beat running the recurrence over long stretches of padding.

    Returns:
        Lists of indices into ``lengths``, each sorted by length.
    """
    groups: list[list[int]] = []
    total = 0
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        n = lengths[i]
        if groups and n * (len(groups[-1]) + 1) - (total + n) <= max_padding:
            groups[-1].append(i)
            total += n
        else:
            groups.append([i])
            total = n
    return groups


def __getattr__(name: str):
    """``DecodeLoop`` and ``decode`` moved to :mod:`service.loop`; still importable here."""
    if name in ("DecodeLoop", "decode"):
        from service import loop

        return getattr(loop, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
