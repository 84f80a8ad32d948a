"""Iteration-level batching over a one-step decoder (the loop the service scheduler and
the export parity gate share).

Every :meth:`DecodeLoop.step` runs *one* decoder call over the live rows of all active
sentences, greedy and beam together. The host-side work around that call is vectorised
over rows: the candidates (:func:`service.decoding.candidates`), the EOS rules
(:func:`models.scoring.restrict`) and the tokens sentences ban (:func:`models.scoring.ban`)
are applied once for the whole step, then each search
strategy chooses for all its sentences at once (greedy: one ``argmax``); a sentence's own
Python then only records its :class:`~service.strategies.Selection`. The loop knows no
strategy by name: it groups sentences by ``search.strategy`` and calls ``select``.

Plain greedy sentences (:attr:`SentenceSearch.batchable`) have no per-step Python at all:
they are rows of :class:`~service.greedyrows.GreedyRows`, the first rows of every step.
Plain beam sentences (:attr:`SentenceSearch.beam_batchable`) are kept the same way, one
:class:`~service.beamrows.BeamRows` per beam size, their rows next. Both are *blocks*:
objects with the same few methods (``inputs``, ``select``, ``advance``, ``drop``) whose
rows the loop lays out one after another; every other sentence's rows come last.

While every sentence is a plain greedy row and the model runs several greedy steps a call
(``greedy_steps``, :mod:`service.greedysteps`), a :meth:`DecodeLoop.step` is one call of
that many steps: the choice is made in the graph, the EOS rule goes in as a mask
(:meth:`GreedyRows.steps_inputs`) and :meth:`GreedyRows.advance_steps` records the
tokens. Any other sentence in the loop makes every step a single one again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from models.options import DecodeOptions, Hypothesis
from models.scoring import ban, restrict
from service import strategies
from service.beamrows import BeamRows
from service.constraints import Constraints
from service.decoding import (
    Encoded,
    SentenceSearch,
    SpecialIds,
    StepModel,
    candidates,
    make_search,
    pad_batch,
)
from service.greedyrows import GreedyRows
from service.pool import MemoryPool
from service.strategies import Selection, Strategy

log = logging.getLogger(__name__)
T = TypeVar("T")

# Rebuild the pool when a pool rebuilt for the longest live sentence would be at most this
# share of its width (a fixed-buffer pool's width is a power of two: DevicePool.rebuilt_width).
NARROW_FRACTION = 0.75


@dataclass(eq=False)
class _Active:
    handle: object
    search: SentenceSearch
    slot: int
    base: int
    src_len: int
    # the loop's block that holds it (GreedyRows or BeamRows, which then holds its slot,
    # base and the search's per-step state) and its index there; None: decoded through
    # its strategy object
    block: GreedyRows | BeamRows | None = None
    row: int = -1


class DecodeLoop:
    """Sentences join with :meth:`add` and leave as soon as their search is done.

    Encoder memory of active sentences lives in a :class:`MemoryPool` (on the device for
    a model that keeps its decode state there) that rows index through
    ``row_sentence``; decoder states are the previous step's outputs, gathered by
    ``parent_rows`` in the graph.
    """

    def __init__(
        self, model: StepModel, special: SpecialIds, *, max_top_k: int | None = None
    ) -> None:
        """``max_top_k``: the most candidates the decoder can return per row (its target
        vocabulary size); a step asks for at most that many, however many tokens its
        sentences ban."""
        self.model = model
        self.special = special
        self.max_top_k = max_top_k
        # every sentence: the greedy rows' first, then the others (``_general``)
        self.active: list[_Active] = []
        self._greedy = GreedyRows(special.eos)
        self._beams: dict[int, BeamRows] = {}  # by beam size
        self._general: list[_Active] = []
        self.pool: MemoryPool = model.new_pool()
        self._states: tuple[np.ndarray, ...] = ()
        self._live_rows = 0
        # tokens the last step generated (EOS included): its rows, or with several
        # greedy steps a call what the rows chose before they ended
        self.last_tokens = 0

    @property
    def live_rows(self) -> int:
        """Hypothesis rows the next step will decode."""
        return self._live_rows

    @property
    def _blocks(self) -> list[GreedyRows | BeamRows]:
        """The blocks in the order of their rows in a step."""
        return [self._greedy, *self._beams.values()]

    def _set_active(self) -> None:
        self.active = [a for block in self._blocks for a in block.entries] + self._general

    @property
    def _memory(self) -> np.ndarray | None:
        """The pool's memory ``(slots, width, D)`` (``None`` when empty)."""
        return self.pool.memory

    def add(self, sources: list[list[int]], searches: list[SentenceSearch], handles: list) -> None:
        """Encode ``sources`` (token ids, no BOS/EOS) in one batch and start their searches."""
        ids, lengths = pad_batch(sources, self.special.pad)
        self.add_encoded(self.model.encode(ids, lengths), searches, handles)

    def add_encoded(self, enc: Encoded, searches: list[SentenceSearch], handles: list) -> None:
        # (a device-resident mask is copied to the host for this: (n, src_len) bools)
        lengths = np.asarray(enc.mask).sum(axis=1).tolist()
        first_row = self._states[0].shape[0] if self._states else 0
        first_slot = self.pool.append(enc.memory, enc.keys, enc.mask)
        if self._states:
            self._states = self.pool.join_states(self._states, tuple(enc.states))
        else:
            self._states = tuple(enc.states)
        entries = [
            _Active(handle, search, first_slot + i, first_row + i, int(lengths[i]))
            for i, (search, handle) in enumerate(zip(searches, handles, strict=True))
        ]
        self._live_rows += sum(search.rows for search in searches)
        greedy = [a for a in entries if a.search.batchable]
        # a model that runs several greedy steps a call needs them as arrays
        several = getattr(self.model, "greedy_steps", 1) > 1
        if greedy and (several or self._arrays_pay(greedy, self._greedy, lambda s: s.batchable)):
            self._join(self._greedy, greedy)
        beams: dict[int, list[_Active]] = {}
        for a in entries:
            if a.search.beam_batchable:
                beams.setdefault(a.search.options.beam_size, []).append(a)
        for beam, joining in beams.items():
            block = self._beams.get(beam)
            if self._arrays_pay(
                joining, block, lambda s, k=beam: s.beam_batchable and s.options.beam_size == k
            ):
                if block is None:
                    top_k = joining[0].search.top_k
                    block = self._beams[beam] = BeamRows(beam, top_k, self.special.eos)
                self._join(block, joining)
        # the others, and a few plain sentences (one at a time costs less)
        self._general += [a for a in entries if a.block is None]
        self._set_active()

    @staticmethod
    def _join(block: GreedyRows | BeamRows, entries: list[_Active]) -> None:
        for a in entries:
            a.block = block
        block.add(entries)

    def _arrays_pay(self, joining: list[_Active], block, same: Callable) -> bool:
        """Whether the plain sentences ``joining`` join ``block`` (None: not made yet):
        once the loop holds :data:`~service.strategies.ARRAY_MIN_SENTENCES` sentences it
        could keep there (those already there, those decoded one at a time for which
        ``same(search)``, these); below that the arrays' fixed cost a step exceeds what
        they save. Results are the same either way."""
        need = strategies.ARRAY_MIN_SENTENCES - len(joining) - (len(block) if block else 0)
        return need <= 0 or sum(same(a.search) for a in self._general) >= need

    def step(self, failed: list | None = None) -> list[tuple[object, SentenceSearch]]:
        """Run one decoder step for all active sentences; return those that finished.

        The step is all or nothing up to the point where each sentence takes its
        selection: when the decoder call or a strategy's ``select`` (or anything before
        them) raises, the loop is left exactly as it was, so the same step can be run
        again (see :meth:`probe`).

        ``failed``: when given, a sentence whose own search raises while taking its
        selection leaves the loop and is appended as ``(handle, exception)`` while every
        other sentence takes its step; without it the first such exception is raised,
        once the others have taken theirs.
        """
        if not self.active:
            return []
        steps = self.steps_per_call
        if steps > 1:  # only plain greedy rows: several steps in one call
            out = self._run_steps(None, steps)
            self._states = out.states
            ended, failures, self.last_tokens = self._greedy.advance_steps(
                out.tokens, out.log_probs, out.attention
            )
            return self._commit(ended, [(a.handle, exc) for a, exc in failures], failed)
        self.last_tokens = self._live_rows
        out, counts, selections, choices, candidates_of = self._run(self.active)
        self._states = out.states
        finished, still, errors = [], [], []
        offset = 0
        for block, choice in zip(self._blocks, choices, strict=True):
            n = block.live_rows
            if n:
                ended, failures = block.advance(choice, out.attention[offset : offset + n], offset)
                finished += ended
                errors += [(a.handle, exc) for a, exc in failures]
            offset += n
        values, ids = candidates_of
        for a, n, selection in zip(self._general, counts, selections, strict=True):
            s = a.search
            try:
                # the step's own candidates, only for a search that keeps token log-probs
                own = (
                    (values[offset : offset + n], ids[offset : offset + n]) if s.keeps_lps else None
                )
                s.take(selection, out.attention[offset : offset + n], own)
            except Exception as exc:  # noqa: BLE001 - this sentence's own failure
                errors.append((a.handle, exc))
                offset += n
                continue
            a.base = offset
            offset += n
            if s.done:
                finished.append(a)
            else:
                still.append(a)
        self._general = still
        return self._commit(finished, errors, failed)

    def _commit(self, finished: list[_Active], errors: list, failed: list | None) -> list:
        """The end of every step: the sentences that left are gone, the pool is
        compacted when it pays, and the finished sentences are returned (see
        :meth:`step` for ``failed``)."""
        self._beams = {k: b for k, b in self._beams.items() if len(b)}
        self._set_active()
        self._live_rows = sum(block.live_rows for block in self._blocks) + sum(
            a.search.rows for a in self._general
        )
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
        """Run this step's decoder call and selections for ``entries`` (some of
        :attr:`active`) alone and throw the result away; raises what the step raises for
        them. Changes nothing: the engine uses it to find the sentences that make a
        failing step fail."""
        if entries and self.steps_per_call > 1:
            self._run_steps(np.array([a.row for a in entries], dtype=np.int64), self.steps_per_call)
        elif entries:
            self._run(entries)

    @property
    def steps_per_call(self) -> int:
        """Decoder steps the next :meth:`step` runs in one call: the model's
        ``greedy_steps`` when every sentence is a plain greedy row, else 1."""
        steps = getattr(self.model, "greedy_steps", 1)
        return steps if steps > 1 and not self._general and not self._beams else 1

    def _run_steps(self, rows: np.ndarray | None, steps: int):
        """``steps`` greedy steps over the greedy block's ``rows`` (None: all) in one
        call; reads the loop's state but changes nothing."""
        prev, base, slot, eos_mask = self._greedy.steps_inputs(rows, steps)
        return self.model.step(
            prev_tokens=prev,
            parent_rows=base,
            row_sentence=slot,
            memory=self.pool.memory,
            keys=self.pool.keys,
            mask=self.pool.mask,
            states=self._states,
            top_k=GreedyRows.top_k,
            eos_mask=eos_mask,
        )

    def _run(self, entries: list[_Active]) -> tuple:
        """The decoder call over ``entries`` and every sentence's selection; reads the
        loop's state but changes nothing (:meth:`step` commits the result).

        The step's rows: those of ``entries`` in each block in turn (all of a block's,
        in order, when ``entries`` is :attr:`active`), then each other sentence's.
        Returns the step's output, the other sentences' row counts and selections, and
        each block's choice (None for a block with no rows in the step)."""
        blocks = self._blocks
        if entries is self.active:
            picks: list[np.ndarray | None] = [None] * len(blocks)
            general = self._general
        else:  # a probe over some of the sentences
            picks = [
                np.array([a.row for a in entries if a.block is b], dtype=np.int64) for b in blocks
            ]
            general = [a for a in entries if a.block is None]
        block_rows = [b.rows_of(p) for b, p in zip(blocks, picks, strict=True)]
        first = sum(block_rows)  # the other sentences' rows start here
        prev: list[int] = []
        parents: list[int] = []
        sentences: list[int] = []
        counts: list[int] = []
        eos: list[int] = []
        # the entries of each strategy, and where each one's rows start
        groups: dict[Strategy, tuple[list[SentenceSearch], list[int], list[int]]] = {}
        top_k = max((b.top_k for b, n in zip(blocks, block_rows, strict=True) if n), default=0)
        ban_rows: list[int] = []
        ban_tokens: list[int] = []
        forced: list[tuple[SentenceSearch, int, int]] = []  # (search, row, token)
        whole: list[tuple[SentenceSearch, int]] = []  # (search, its first row)
        for i, a in enumerate(general):
            s = a.search
            n = s.rows
            token = s.forced_token
            if token is not None:
                forced.append((s, first + len(prev), token))
            if s.constraints:  # its strategy reads its rows' whole log-probs
                whole.append((s, first + len(prev)))
            if s.bans is not None:
                for r, banned in enumerate(s.bans, start=first + len(prev)):
                    ban_rows.extend([r] * len(banned))
                    ban_tokens.extend(banned)
            group = groups.get(s.strategy)
            if group is None:
                group = groups[s.strategy] = ([], [], [])
            group[0].append(s)
            group[1].append(first + len(prev))
            group[2].append(i)
            prev.extend(s.prev_tokens)
            if n == 1:
                parents.append(s.parents[0] + a.base)
                sentences.append(a.slot)
            else:
                parents.extend([p + a.base for p in s.parents])
                sentences.extend([a.slot] * n)
            counts.append(n)
            eos.append(s.eos_rule())
            if s.top_k > top_k:
                top_k = s.top_k
        if self.max_top_k is not None and top_k > self.max_top_k:
            top_k = self.max_top_k  # every token is a candidate: banning stays exact
        inputs = (
            np.array(prev, dtype=np.int64),
            np.array(parents, dtype=np.int64),
            np.array(sentences, dtype=np.int64),
        )
        codes = np.repeat(np.array(eos, dtype=np.int64), counts) if any(eos) else None
        if first:  # the blocks' rows first (their arrays as they are when alone)
            parts = [b.inputs(p) for b, p, n in zip(blocks, picks, block_rows, strict=True) if n]
            if general:
                parts.append((*inputs, np.zeros(sum(counts), np.int64) if codes is None else codes))
            if len(parts) == 1:
                *block_inputs, codes = parts[0]
                inputs = tuple(block_inputs)
            else:
                *inputs, codes = (np.concatenate(field) for field in zip(*parts, strict=True))
            if not codes.any():
                codes = None
        out = self.model.step(
            prev_tokens=inputs[0],
            parent_rows=inputs[1],
            row_sentence=inputs[2],
            memory=self.pool.memory,
            keys=self.pool.keys,
            mask=self.pool.mask,
            states=self._states,
            top_k=top_k,
            **({"log_probs": True} if forced or whole else {}),
        )
        eos_id = self.special.eos
        for s, row, token in forced:  # before the selections, which add them
            every = out.eos_values if token == eos_id else out.log_probs[:, token]
            s.forced_log_prob = float(every[row])
        for s, row in whole:
            s.step_log_probs = out.log_probs[row : row + s.rows]
        values, ids = candidates(out.topk_values, out.topk_ids, out.eos_values, self.special)
        if codes is not None:  # some sentence's EOS is banned or forced this step
            restrict(values, codes)
        if ban_rows:  # some sentence bans tokens (ban_unk, block_ngram_repeat)
            ban(values, ids, ban_rows, ban_tokens)
        choices: list = []
        offset = 0
        for b, p, n in zip(blocks, picks, block_rows, strict=True):
            end = offset + n
            choices.append(b.select(p, values[offset:end], ids[offset:end]) if n else None)
            offset = end
        # one select per strategy, over all its sentences of the step
        selections: list[Selection | None] = [None] * len(general)
        for strategy, (searches, firsts, members) in groups.items():
            chosen = strategy.select(searches, firsts, values, ids)
            for i, selection in zip(members, chosen, strict=True):
                selections[i] = selection
        return out, counts, selections, choices, (values, ids)

    def drop(self, handles: set) -> None:
        """Stop decoding the given sentences now (cancelled or past their deadline); their
        rows are simply not gathered by the next step."""
        for block in self._blocks:
            if len(block):
                block.drop([a.handle not in handles for a in block.entries])
        self._beams = {k: b for k, b in self._beams.items() if len(b)}
        self._general = [a for a in self._general if a.handle not in handles]
        self._set_active()
        self._live_rows = sum(b.live_rows for b in self._blocks) + sum(
            a.search.rows for a in self._general
        )
        self._maybe_compact()

    def _maybe_compact(self) -> None:
        """Keep only live slots when at least half are dead or a rebuilt pool would be
        much narrower (its longest live sentence much shorter than its width)."""
        if not self.active:
            self.pool.clear()
            self._states = ()
            return
        blocks = [b for b in self._blocks if len(b)]
        needed = max(
            max((int(b.src_len.max()) for b in blocks), default=0),
            max((a.src_len for a in self._general), default=0),
        )
        narrower = self.pool.rebuilt_width(needed) <= NARROW_FRACTION * self.pool.width
        if 2 * len(self.active) >= self.pool.slots and not narrower:
            return
        slots = [s for b in blocks for s in b.slot.tolist()] + [a.slot for a in self._general]
        self.pool.compact(slots, needed)
        start = 0
        for b in blocks:
            b.slot = np.arange(start, start + len(b), dtype=np.int64)
            start += len(b)
        for i, a in enumerate(self._general, start=start):
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
    prefixes: Sequence[Sequence[int]] | None = None,
    max_top_k: int | None = None,
    constraints: Sequence[Constraints | None] | None = None,
) -> list[list[Hypothesis]]:
    """Decode token-id sentences (each non-empty) and return each one's n-best list;
    ``prefixes``: each sentence's forced target prefix (token ids, may be empty);
    ``constraints``: each one's target phrases (None: none; :mod:`service.constraints`);
    ``max_top_k``: see :class:`DecodeLoop`.

    Sentences are encoded ``batch_size`` at a time, sorted by length, and new ones are
    admitted as soon as earlier ones finish, exactly as the service schedules them.
    """
    if isinstance(options, DecodeOptions):
        options = [options] * len(sources)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    loop = DecodeLoop(model, special, max_top_k=max_top_k)
    results: list[list[Hypothesis]] = [[] for _ in sources]
    pending = list(order)
    while pending or loop.active:
        if pending and len(loop.active) < batch_size:
            take = pending[: batch_size - len(loop.active)]
            pending = pending[len(take) :]
            loop.add(
                [sources[i] for i in take],
                [
                    make_search(
                        len(sources[i]),
                        options[i],
                        special,
                        prefixes[i] if prefixes else (),
                        i,
                        constraints[i] if constraints else None,
                    )  # fmt: skip
                    for i in take
                ],
                take,
            )
        for handle, search in loop.step():
            results[handle] = search.results()
    return results
