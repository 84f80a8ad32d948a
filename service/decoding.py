"""Step-wise greedy and beam search in plain numpy over a one-step decoder.

No ONNX Runtime and no gRPC here: the searches consume the arrays of one decoder
step (see :mod:`export.spec`) and say which rows continue. Greedy and beam share
one interface (:class:`SentenceSearch`) and one driver loop (:class:`DecodeLoop`),
which the export parity gate and the service scheduler both use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from models.options import DecodeOptions, Hypothesis

NEG_INF = np.float32(-np.inf)


@dataclass(frozen=True)
class SpecialIds:
    pad: int
    bos: int
    eos: int


# -- decoding rules ---------------------------------------------------------------


def eos_allowed(step: int, min_length: int) -> bool:
    """EOS may end a hypothesis only after ``min_length`` real tokens."""
    return step >= min_length


def eos_forced(step: int, limit: int) -> bool:
    """At the last allowed position (``limit`` counts EOS) only EOS may follow."""
    return step >= limit - 1


def block_tokens(values: np.ndarray, ids: np.ndarray, banned: tuple[int, ...]) -> np.ndarray:
    """Return ``values`` with -inf wherever ``ids`` is a banned id (pad, bos): the graph
    already excludes them; this keeps a bundle that does not from ever emitting them.

    Args:
        values: ``(rows, k)`` candidate log-probs.
        ids: ``(rows, k)`` candidate token ids.
    """
    return np.where(np.isin(ids, banned), NEG_INF, values)


def candidates(
    topk_values: np.ndarray,
    topk_ids: np.ndarray,
    eos_values: np.ndarray,
    *,
    step: int,
    limit: int,
    options: DecodeOptions,
    special: SpecialIds,
) -> tuple[np.ndarray, np.ndarray]:
    """Merge a step's top-k with EOS and apply the length rules.

    Args:
        topk_values: ``(rows, k)`` best non-special log-probs.
        topk_ids: ``(rows, k)`` their token ids.
        eos_values: ``(rows,)`` EOS log-probs.

    Returns:
        values ``(rows, k + 1)`` and ids ``(rows, k + 1)``; the last column is EOS.
    """
    rows = topk_values.shape[0]
    values = np.empty((rows, topk_values.shape[1] + 1), dtype=np.float32)
    values[:, :-1] = block_tokens(topk_values, topk_ids, (special.pad, special.bos))
    values[:, -1] = eos_values
    ids = np.empty(values.shape, dtype=np.int64)
    ids[:, :-1] = topk_ids
    ids[:, -1] = special.eos
    if eos_forced(step, limit):
        values[:, :-1] = NEG_INF
    elif not eos_allowed(step, min_length=options.min_length):
        values[:, -1] = NEG_INF
    return values, ids


# -- searches -----------------------------------------------------------------------


@dataclass
class StepSlice:
    """One sentence's rows of a decoder step; shapes ``(rows, ...)``."""

    topk_values: np.ndarray
    topk_ids: np.ndarray
    eos_values: np.ndarray
    attention: np.ndarray


class SentenceSearch(Protocol):
    """What the driver loop needs from a search over one sentence."""

    done: bool
    top_k: int

    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(prev_tokens, parents)``, each ``(rows,)``; parents index this sentence's rows
        of the previous step (or of its initial state at step 0)."""

    def advance(self, out: StepSlice) -> None: ...

    def results(self) -> list[Hypothesis]: ...

    def stable_prefix(self) -> tuple[int, ...]: ...


@dataclass
class _Partial:
    tokens: list[int]
    attention: list[np.ndarray] = field(default_factory=list)


class GreedySearch:
    """Argmax decoding of one sentence (one row)."""

    # Three candidates, not one: should a bundle's graph leak pad and bos into its top-k
    # (ours blocks them), a real token still remains once they are blocked here.
    top_k = 3

    def __init__(self, src_len: int, options: DecodeOptions, special: SpecialIds) -> None:
        self.options, self.special, self.src_len = options, special, src_len
        self.limit = options.length_limit(src_len)
        self.step = 0
        self.done = False
        self._hyp = _Partial([])
        self._log_prob = 0.0
        self._prev = special.bos
        self._result: Hypothesis | None = None

    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array([self._prev], dtype=np.int64), np.zeros(1, dtype=np.int64)

    def advance(self, out: StepSlice) -> None:
        values, ids = candidates(
            out.topk_values,
            out.topk_ids,
            out.eos_values,
            step=self.step,
            limit=self.limit,
            options=self.options,
            special=self.special,
        )
        best = int(np.argmax(values[0]))
        tok = int(ids[0, best])
        self._log_prob += float(values[0, best])
        if self.options.return_attention:
            self._hyp.attention.append(out.attention[0, : self.src_len])
        self.step += 1
        if tok == self.special.eos:
            self.done = True
            self._result = _finish(self._hyp, self._log_prob, self.options)
        else:
            self._hyp.tokens.append(tok)
            self._prev = tok

    def results(self) -> list[Hypothesis]:
        assert self._result is not None, "search not finished"
        return [self._result]

    def stable_prefix(self) -> tuple[int, ...]:
        """Tokens that no later step can change: everything emitted so far."""
        return tuple(self._hyp.tokens)


class BeamSearch:
    """Beam search of one sentence; same rules as :func:`models.search.beam_search`:
    best ``2 * beam`` continuations, an EOS among the first ``beam`` finishes a
    hypothesis, stop once ``beam`` hypotheses have finished."""

    def __init__(self, src_len: int, options: DecodeOptions, special: SpecialIds) -> None:
        self.options, self.special, self.src_len = options, special, src_len
        self.beam = options.beam_size
        self.top_k = 2 * self.beam
        self.limit = options.length_limit(src_len)
        self.step = 0
        self.done = False
        self._live = [_Partial([])]
        self._scores = np.zeros(1, dtype=np.float32)
        self._prev = np.array([special.bos], dtype=np.int64)
        self._parents = np.zeros(1, dtype=np.int64)
        self._finished: list[Hypothesis] = []

    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        return self._prev, self._parents

    def advance(self, out: StepSlice) -> None:
        values, ids = candidates(
            out.topk_values,
            out.topk_ids,
            out.eos_values,
            step=self.step,
            limit=self.limit,
            options=self.options,
            special=self.special,
        )
        total = (self._scores[:, None] + values).ravel()
        order = np.argsort(-total, kind="stable")[: self.top_k]
        width = values.shape[1]
        keep_attn = self.options.return_attention
        parents, tokens, scores = [], [], []
        for rank, flat in enumerate(order):
            score = total[flat]
            if score == NEG_INF:
                break
            row, col = divmod(int(flat), width)
            tok = int(ids[row, col])
            if tok == self.special.eos:
                if rank < self.beam:
                    hyp = self._live[row]
                    attn = hyp.attention + [out.attention[row, : self.src_len]] if keep_attn else []
                    self._finished.append(
                        _finish(_Partial(hyp.tokens, attn), float(score), self.options)
                    )
                continue
            parents.append(row)
            tokens.append(tok)
            scores.append(score)
            if len(parents) == self.beam:
                break
        self.step += 1
        if len(self._finished) >= self.beam or not parents:
            self.done = True
            return
        self._live = [
            _Partial(
                self._live[p].tokens + [t],
                self._live[p].attention + [out.attention[p, : self.src_len]] if keep_attn else [],
            )
            for p, t in zip(parents, tokens, strict=True)
        ]
        self._scores = np.array(scores, dtype=np.float32)
        self._prev = np.array(tokens, dtype=np.int64)
        self._parents = np.array(parents, dtype=np.int64)

    def results(self) -> list[Hypothesis]:
        ranked = sorted(self._finished, key=lambda h: h.score, reverse=True)
        return ranked[: self.options.n_best]

    def stable_prefix(self) -> tuple[int, ...]:
        """The prefix every live and finished hypothesis shares (all of the best one once
        done): streaming it never has to take text back."""
        if self.done:
            best = self.results()
            return best[0].tokens if best else ()
        seqs = [h.tokens for h in self._live] + [list(h.tokens) for h in self._finished]
        prefix = []
        for column in zip(*seqs, strict=False):
            if any(t != column[0] for t in column):
                break
            prefix.append(column[0])
        return tuple(prefix)


def _finish(hyp: _Partial, log_prob: float, options: DecodeOptions) -> Hypothesis:
    return Hypothesis(
        tokens=tuple(hyp.tokens),
        score=options.normalized(log_prob, len(hyp.tokens) + 1),
        log_prob=log_prob,
        attention=np.stack(hyp.attention) if options.return_attention else None,
    )


def make_search(src_len: int, options: DecodeOptions, special: SpecialIds) -> SentenceSearch:
    """Greedy for ``beam_size == 1`` (cheaper bookkeeping, same results), else beam."""
    cls = GreedySearch if options.beam_size == 1 else BeamSearch
    return cls(src_len, options, special)


# -- the driver loop ----------------------------------------------------------------


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
    states: tuple[np.ndarray, ...]


class StepModel(Protocol):
    """An encoder plus one decoder step; :class:`service.runtime.OnnxModel` is one."""

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


def _pad_time(x: np.ndarray, width: int) -> np.ndarray:
    """Pad axis 1 of ``x`` ``(n, src_len, ...)`` with zeros (False for masks) to ``width``."""
    if x.shape[1] == width:
        return x
    pad = [(0, 0)] * x.ndim
    pad[1] = (0, width - x.shape[1])
    return np.pad(x, pad)


@dataclass
class _Active:
    handle: object
    search: SentenceSearch
    slot: int
    base: int


class DecodeLoop:
    """Iteration-level batching: every :meth:`step` runs *one* decoder call over the
    live rows of all active sentences, whatever their strategy; sentences join with
    :meth:`add` and leave as soon as their search is done.

    Encoder memory of active sentences is kept in one pool ``(slots, src_len, D)``
    that rows index through ``row_sentence``; the pool is compacted when more than
    half of its slots belong to finished sentences.
    """

    def __init__(self, model: StepModel, special: SpecialIds) -> None:
        self.model = model
        self.special = special
        self.active: list[_Active] = []
        self._memory: np.ndarray | None = None
        self._keys: np.ndarray | None = None
        self._mask: np.ndarray | None = None
        self._states: tuple[np.ndarray, ...] = ()

    @property
    def live_rows(self) -> int:
        return sum(len(a.search.inputs()[0]) for a in self.active)

    def add(self, sources: list[list[int]], searches: list[SentenceSearch], handles: list) -> None:
        """Encode ``sources`` (token ids, no BOS/EOS) in one batch and start their searches."""
        ids, lengths = pad_batch(sources, self.special.pad)
        enc = self.model.encode(ids, lengths)
        self.add_encoded(enc, searches, handles)

    def add_encoded(self, enc: Encoded, searches: list[SentenceSearch], handles: list) -> None:
        first_slot = 0 if self._memory is None else self._memory.shape[0]
        first_row = self._states[0].shape[0] if self._states else 0
        if self._memory is None:
            self._memory, self._keys, self._mask = enc.memory, enc.keys, enc.mask
            self._states = enc.states
        else:
            width = max(self._memory.shape[1], enc.memory.shape[1])
            self._memory = np.concatenate(
                [_pad_time(self._memory, width), _pad_time(enc.memory, width)]
            )
            self._keys = np.concatenate([_pad_time(self._keys, width), _pad_time(enc.keys, width)])
            self._mask = np.concatenate([_pad_time(self._mask, width), _pad_time(enc.mask, width)])
            self._states = tuple(
                np.concatenate([old, new])
                for old, new in zip(self._states, enc.states, strict=True)
            )
        for i, (search, handle) in enumerate(zip(searches, handles, strict=True)):
            self.active.append(_Active(handle, search, first_slot + i, first_row + i))

    def step(self) -> list[tuple[object, SentenceSearch]]:
        """Run one decoder step for all active sentences; return those that finished."""
        if not self.active:
            return []
        prev, parents, sentences, counts = [], [], [], []
        for a in self.active:
            p, par = a.search.inputs()
            prev.append(p)
            parents.append(par + a.base)
            sentences.append(np.full(len(p), a.slot, dtype=np.int64))
            counts.append(len(p))
        out = self.model.step(
            prev_tokens=np.concatenate(prev),
            parent_rows=np.concatenate(parents),
            row_sentence=np.concatenate(sentences),
            memory=self._memory,
            keys=self._keys,
            mask=self._mask,
            states=self._states,
            top_k=max(a.search.top_k for a in self.active),
        )
        self._states = out.states
        finished, still = [], []
        offset = 0
        for a, n in zip(self.active, counts, strict=True):
            k = a.search.top_k
            a.search.advance(
                StepSlice(
                    out.topk_values[offset : offset + n, :k],
                    out.topk_ids[offset : offset + n, :k],
                    out.eos_values[offset : offset + n],
                    out.attention[offset : offset + n],
                )
            )
            a.base = offset
            offset += n
            (finished if a.search.done else still).append(a)
        self.active = still
        self._maybe_compact()
        return [(a.handle, a.search) for a in finished]

    def drop(self, handles: set) -> None:
        """Stop decoding the given sentences now (cancelled or past their deadline); their
        rows are simply not gathered by the next step."""
        self.active = [a for a in self.active if a.handle not in handles]
        self._maybe_compact()

    def _maybe_compact(self) -> None:
        if not self.active:
            self._memory = self._keys = self._mask = None
            self._states = ()
            return
        if 2 * len(self.active) >= self._memory.shape[0]:
            return
        slots = np.array([a.slot for a in self.active], dtype=np.int64)
        width = int(self._mask[slots].sum(axis=1).max())
        self._memory = self._memory[slots, :width]
        self._keys = self._keys[slots, :width]
        self._mask = self._mask[slots, :width]
        for i, a in enumerate(self.active):
            a.slot = i


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
