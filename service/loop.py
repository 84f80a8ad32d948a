"""Iteration-level batching over a one-step decoder (the loop the service scheduler and
the export parity gate share).

Every :meth:`DecodeLoop.step` runs *one* decoder call over the live rows of all active
sentences, greedy and beam together. The host-side work around that call is vectorised
over rows: the length rules and special-token blocking of :func:`candidates` run once
for the whole step, and greedy rows pick their token with one ``argmax``; a sentence's
own Python then only records the result. The numbers are exactly those of running
:meth:`GreedySearch.advance` / :meth:`BeamSearch.advance` per sentence.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from models.options import DecodeOptions, Hypothesis
from service.decoding import (
    NEG_INF,
    BeamSearch,
    Encoded,
    GreedySearch,
    SentenceSearch,
    SpecialIds,
    StepModel,
    StepOutput,
    StepSlice,
    eos_allowed,
    eos_forced,
    make_search,
    pad_batch,
)
from service.pool import MemoryPool

log = logging.getLogger(__name__)
T = TypeVar("T")

# Rebuild the pool when the longest live sentence needs at most this share of its width.
NARROW_FRACTION = 0.75


def _rows_of(search: SentenceSearch) -> int:
    return 1 if type(search) is GreedySearch else len(search.inputs()[0])


@dataclass(eq=False)
class _Active:
    handle: object
    search: SentenceSearch
    slot: int
    base: int
    src_len: int


class DecodeLoop:
    """Sentences join with :meth:`add` and leave as soon as their search is done.

    Encoder memory of active sentences lives in a :class:`MemoryPool` that rows index
    through ``row_sentence``; decoder states are the previous step's outputs, gathered
    by ``parent_rows`` in the graph.
    """

    def __init__(self, model: StepModel, special: SpecialIds) -> None:
        self.model = model
        self.special = special
        self.active: list[_Active] = []
        self.pool = MemoryPool()
        self._states: tuple[np.ndarray, ...] = ()
        self._live_rows = 0

    @property
    def live_rows(self) -> int:
        """Hypothesis rows the next step will decode."""
        return self._live_rows

    @property
    def _memory(self) -> np.ndarray | None:
        """The pool's memory ``(slots, width, D)`` (``None`` when empty)."""
        return self.pool.memory

    def add(self, sources: list[list[int]], searches: list[SentenceSearch], handles: list) -> None:
        """Encode ``sources`` (token ids, no BOS/EOS) in one batch and start their searches."""
        ids, lengths = pad_batch(sources, self.special.pad)
        self.add_encoded(self.model.encode(ids, lengths), searches, handles)

    def add_encoded(self, enc: Encoded, searches: list[SentenceSearch], handles: list) -> None:
        lengths = enc.mask.sum(axis=1).tolist()
        first_row = self._states[0].shape[0] if self._states else 0
        first_slot = self.pool.append(enc.memory, enc.keys, enc.mask)
        if self._states:
            pairs = zip(self._states, enc.states, strict=True)
            self._states = tuple(np.concatenate([old, new]) for old, new in pairs)
        else:
            self._states = tuple(enc.states)
        for i, (search, handle) in enumerate(zip(searches, handles, strict=True)):
            self.active.append(
                _Active(handle, search, first_slot + i, first_row + i, int(lengths[i]))
            )
            self._live_rows += _rows_of(search)

    def step(self, failed: list | None = None) -> list[tuple[object, SentenceSearch]]:
        """Run one decoder step for all active sentences; return those that finished.

        The step is all or nothing up to the point where each sentence takes its
        result: when the decoder call (or anything before it) raises, the loop is left
        exactly as it was, so the same step can be run again (see :meth:`probe`).

        ``failed``: when given, a sentence whose own search raises while taking its
        result leaves the loop and is appended as ``(handle, exception)`` while every
        other sentence takes its step; without it the first such exception is raised,
        once the others have taken theirs.
        """
        if not self.active:
            return []
        out, counts, top_k, values, ids, tokens, log_probs = self._run(self.active)
        self._states = out.states
        finished, still, errors = [], [], []
        offset = g = 0
        rows = 0
        for a, n in zip(self.active, counts, strict=True):
            s = a.search
            try:
                if type(s) is GreedySearch:
                    s.push(tokens[g], log_probs[g], out.attention[offset])
                    g += 1
                elif type(s) is BeamSearch:
                    cols = slice(None) if s.top_k == top_k else [*range(s.top_k), top_k]
                    end = offset + n
                    s.select(
                        values[offset:end, cols], ids[offset:end, cols], out.attention[offset:end]
                    )
                else:
                    k, end = s.top_k, offset + n
                    s.advance(
                        StepSlice(
                            out.topk_values[offset:end, :k],
                            out.topk_ids[offset:end, :k],
                            out.eos_values[offset:end],
                            out.attention[offset:end],
                        )
                    )
            except Exception as exc:  # noqa: BLE001 - this sentence's own failure
                errors.append((a.handle, exc))
                g += type(s) is GreedySearch
                offset += n
                continue
            a.base = offset
            offset += n
            if s.done:
                finished.append(a)
            else:
                still.append(a)
                rows += _rows_of(s)
        self.active = still
        self._live_rows = rows
        try:
            self._maybe_compact()
        except Exception:  # noqa: BLE001 - the step is committed: never report it failed
            # compact() swaps in the new buffers only once they are built, so the pool is
            # still whole; the next step tries again.
            log.exception("compacting the memory pool failed; keeping it as it is")
        if errors:
            if failed is None:
                raise errors[0][1]
            failed.extend(errors)
        return [(a.handle, a.search) for a in finished]

    def probe(self, entries: list[_Active]) -> None:
        """Run this step's decoder call for ``entries`` (some of :attr:`active`) alone and
        throw the result away; raises what the step raises for them. Changes nothing:
        the engine uses it to find the sentences that make a failing step fail."""
        if entries:
            self._run(entries)

    def _run(self, entries: list[_Active]) -> tuple:
        """The decoder call over ``entries`` and the candidates of every row; reads the
        loop's state but changes nothing (:meth:`step` commits the result)."""
        prev: list[int] = []
        parents: list[int] = []
        sentences: list[int] = []
        counts: list[int] = []
        forced: list[bool] = []
        banned: list[bool] = []
        greedy_rows: list[int] = []
        top_k = 0
        for a in entries:
            s = a.search
            if type(s) is GreedySearch:
                greedy_rows.append(len(prev))
                prev.append(s.prev_token)
                parents.append(a.base)
                sentences.append(a.slot)
                n = 1
            else:
                p, par = s.inputs()
                n = len(p)
                prev.extend(p.tolist())
                parents.extend((par + a.base).tolist())
                sentences.extend([a.slot] * n)
            counts.append(n)
            top_k = max(top_k, s.top_k)
            if type(s) is GreedySearch or type(s) is BeamSearch:
                f = eos_forced(s.step, s.limit)
                forced.append(f)
                banned.append(not f and not eos_allowed(s.step, s.options.min_length))
            else:
                forced.append(False)
                banned.append(False)
        out = self.model.step(
            prev_tokens=np.array(prev, dtype=np.int64),
            parent_rows=np.array(parents, dtype=np.int64),
            row_sentence=np.array(sentences, dtype=np.int64),
            memory=self.pool.memory,
            keys=self.pool.keys,
            mask=self.pool.mask,
            states=self._states,
            top_k=top_k,
        )
        values, ids = self._candidates(out, top_k, counts, forced, banned)
        tokens, log_probs = self._greedy_choice(values, ids, greedy_rows, top_k)
        return out, counts, top_k, values, ids, tokens, log_probs

    def _candidates(
        self,
        out: StepOutput,
        top_k: int,
        counts: list[int],
        forced: list[bool],
        banned: list[bool],
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`candidates` for every row at once: values and ids ``(rows, top_k + 1)``,
        EOS last; ``forced``/``banned`` are per sentence, ``counts`` its rows."""
        rows = out.topk_values.shape[0]
        values = np.empty((rows, top_k + 1), dtype=np.float32)
        ids = np.empty((rows, top_k + 1), dtype=np.int64)
        topk_ids = out.topk_ids
        blocked = (topk_ids == self.special.pad) | (topk_ids == self.special.bos)
        values[:, :top_k] = np.where(blocked, NEG_INF, out.topk_values)
        values[:, top_k] = out.eos_values
        ids[:, :top_k] = topk_ids
        ids[:, top_k] = self.special.eos
        for flags, cols in ((forced, slice(0, top_k)), (banned, top_k)):
            if any(flags):
                per_row = np.repeat(np.array(flags), counts) if rows != len(flags) else flags
                values[np.asarray(per_row, dtype=bool), cols] = NEG_INF
        return values, ids

    @staticmethod
    def _greedy_choice(
        values: np.ndarray, ids: np.ndarray, rows: list[int], top_k: int
    ) -> tuple[list[int], list[float]]:
        """Argmax over each greedy row's ``GreedySearch.top_k`` candidates plus EOS (the
        first of equal values wins, as in :meth:`GreedySearch.advance`)."""
        if not rows:
            return [], []
        k = GreedySearch.top_k
        if top_k == k and len(rows) == values.shape[0]:
            v, i = values, ids  # every row is greedy: nothing to select
        else:
            index = np.array(rows, dtype=np.int64)[:, None]
            cols = np.array([*range(k), top_k], dtype=np.int64)
            v, i = values[index, cols], ids[index, cols]
        best = v.argmax(axis=1)
        pick = np.arange(len(rows))
        return i[pick, best].tolist(), v[pick, best].tolist()

    def drop(self, handles: set) -> None:
        """Stop decoding the given sentences now (cancelled or past their deadline); their
        rows are simply not gathered by the next step."""
        self.active = [a for a in self.active if a.handle not in handles]
        self._live_rows = sum(_rows_of(a.search) for a in self.active)
        self._maybe_compact()

    def _maybe_compact(self) -> None:
        """Keep only live slots when at least half are dead or the pool is much wider
        than its longest live sentence."""
        if not self.active:
            self.pool.clear()
            self._states = ()
            return
        needed = max(a.src_len for a in self.active)
        if 2 * len(self.active) >= self.pool.slots and needed > NARROW_FRACTION * self.pool.width:
            return
        self.pool.compact([a.slot for a in self.active], needed)
        for i, a in enumerate(self.active):
            a.slot = i


def isolate_failures(
    items: Sequence[T],
    fails: Callable[[list[T]], bool],
    *,
    confirm: bool = True,
    max_probes: int | None = None,
) -> list[T]:
    """The items of a batch whose step failed that make it fail on their own.

    ``fails(subset)`` probes the step for ``subset`` alone (True: it fails). The batch
    is bisected and only halves that fail are searched further, so ``k`` bad items
    among ``n`` cost about ``2 k log2 n`` probes. A set whose halves both pass fails
    only as a whole (the failure needs several of its items at once): all of it is
    returned. At the top, with ``confirm``, such a batch is probed once more and
    nothing is returned when it passes: the failure did not repeat, and no item makes
    it fail on its own. (A batch of one is its own probe: it is returned.)
    After ``max_probes`` probes (default ``8 * (log2 n + 1)``, room for a few bad
    items) every set still under suspicion is returned whole, so a step that fails for
    every row costs O(log n) probes, not O(n).
    """
    n = len(items)
    budget = 8 * (math.ceil(math.log2(max(n, 1))) + 1) if max_probes is None else max_probes
    probes = 0

    def search(group: list[T], top: bool) -> list[T]:
        nonlocal probes
        if len(group) == 1 or probes + 2 > budget:
            return group
        half = len(group) // 2
        left, right = group[:half], group[half:]
        probes += 2
        bad_left, bad_right = fails(left), fails(right)
        if not bad_left and not bad_right:
            if top and confirm:
                probes += 1
                return group if fails(group) else []
            return group
        return (search(left, False) if bad_left else []) + (
            search(right, False) if bad_right else []
        )

    return search(list(items), True) if items else []


def decode(
    model: StepModel,
    sources: list[list[int]],
    *,
    options: list[DecodeOptions] | DecodeOptions,
    special: SpecialIds,
    batch_size: int = 64,
) -> list[list[Hypothesis]]:
    """Decode token-id sentences (each non-empty) and return each one's n-best list.

    Sentences are encoded ``batch_size`` at a time, sorted by length, and new ones are
    admitted as soon as earlier ones finish, exactly as the service schedules them.
    """
    if isinstance(options, DecodeOptions):
        options = [options] * len(sources)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    loop = DecodeLoop(model, special)
    results: list[list[Hypothesis]] = [[] for _ in sources]
    pending = list(order)
    while pending or loop.active:
        if pending and len(loop.active) < batch_size:
            take = pending[: batch_size - len(loop.active)]
            pending = pending[len(take) :]
            loop.add(
                [sources[i] for i in take],
                [make_search(len(sources[i]), options[i], special) for i in take],
                take,
            )
        for handle, search in loop.step():
            results[handle] = search.results()
    return results
