"""Step-wise greedy and beam search in plain numpy over a one-step decoder.

No ONNX Runtime and no gRPC here: the searches consume the arrays of one decoder
step (see :mod:`export.spec`) and say which rows continue. Greedy and beam share
one interface (:class:`SentenceSearch`); the driver loop that batches them over one
decoder call per step is :class:`service.loop.DecodeLoop` (also importable from here),
which the export parity gate and the service scheduler both use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

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
    hit = np.zeros(ids.shape, dtype=bool)
    for token in banned:
        hit |= ids == token
    return np.where(hit, NEG_INF, values)


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
        self.prev_token = special.bos
        self._result: Hypothesis | None = None

    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array([self.prev_token], dtype=np.int64), np.zeros(1, dtype=np.int64)

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
        self.push(int(ids[0, best]), float(values[0, best]), out.attention[0])

    def push(self, token: int, log_prob: float, attention: np.ndarray) -> None:
        """Take ``token`` (chosen with ``log_prob``); ``attention`` ``(src_len_padded,)``
        is this row's attention of the step."""
        capped = token == self.special.eos and eos_forced(self.step, self.limit)
        if not (capped and self.options.search == "eole"):
            self._log_prob += log_prob
        if self.options.return_attention:
            self._hyp.attention.append(attention[: self.src_len])
        self.step += 1
        if token == self.special.eos:
            self.done = True
            self._result = _finish(self._hyp, self._log_prob, self.options, capped=capped)
        else:
            self._hyp.tokens.append(token)
            self.prev_token = token

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
        self.select(values, ids, out.attention)

    def select(self, values: np.ndarray, ids: np.ndarray, attention: np.ndarray) -> None:
        """One step from this sentence's candidates (see :func:`candidates`).

        Args:
            values: ``(rows, k + 1)`` log-probs, EOS last, length rules applied.
            ids: ``(rows, k + 1)`` their token ids.
            attention: ``(rows, src_len_padded)`` attention of the step.
        """
        total = (self._scores[:, None] + values).ravel()
        order = np.argsort(-total, kind="stable")[: self.top_k]
        width = values.shape[1]
        keep_attn = self.options.return_attention
        eos = self.special.eos
        flat = order.tolist()
        ranked = total[order].tolist()
        tokens_ranked = ids.ravel()[order].tolist()
        parents, tokens, scores = [], [], []
        for rank, score in enumerate(ranked):
            if score == NEG_INF:
                break
            row = flat[rank] // width
            tok = tokens_ranked[rank]
            if tok == eos:
                if rank < self.beam:
                    hyp = self._live[row]
                    attn = hyp.attention + [attention[row, : self.src_len]] if keep_attn else []
                    self._finished.append(_finish(_Partial(hyp.tokens, attn), score, self.options))
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
        self._continue(parents, tokens, scores, attention)

    def _continue(
        self, parents: list[int], tokens: list[int], scores: list[float], attention: np.ndarray
    ) -> None:
        """The live hypotheses of the next step: row ``parents[i]`` extended by
        ``tokens[i]`` with cumulative log-prob ``scores[i]``."""
        keep_attn = self.options.return_attention
        self._live = [
            _Partial(
                self._live[p].tokens + [t],
                self._live[p].attention + [attention[p, : self.src_len]] if keep_attn else [],
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


class EoleBeamSearch(BeamSearch):
    """Eole's (OpenNMT-py's) beam search, for models converted from Eole that must give
    Eole's n-best lists (``DecodeOptions(search="eole")``).

    Each step keeps the best ``beam`` continuations of the live hypotheses; those that
    are EOS finish (so fewer stay live), the rest continue. The sentence is done at a
    step whose best continuation is EOS once ``n_best`` hypotheses have finished.
    Scores count BOS in the length (:meth:`DecodeOptions.normalized`).
    """

    def __init__(self, src_len: int, options: DecodeOptions, special: SpecialIds) -> None:
        super().__init__(src_len, options, special)
        self.top_k = self.beam

    def select(self, values: np.ndarray, ids: np.ndarray, attention: np.ndarray) -> None:
        total = (self._scores[:, None] + values).ravel()
        order = np.argsort(-total, kind="stable")[: self.beam]
        width = values.shape[1]
        keep_attn = self.options.return_attention
        parents, tokens, scores = [], [], []
        top_finished = False
        capped = eos_forced(self.step, self.limit)
        for rank, flat in enumerate(order.tolist()):
            score = float(total[flat])
            if score == NEG_INF:
                break
            row, tok = flat // width, int(ids.ravel()[flat])
            if tok == self.special.eos:
                top_finished = top_finished or rank == 0
                hyp = self._live[row]
                attn = hyp.attention + [attention[row, : self.src_len]] if keep_attn else []
                if capped:  # Eole ends it without EOS: no EOS log-prob (see _finish)
                    score = float(self._scores[row])
                finish = _finish(_Partial(hyp.tokens, attn), score, self.options, capped=capped)
                self._finished.append(finish)
                continue
            parents.append(row)
            tokens.append(tok)
            scores.append(score)
        self.step += 1
        # Eole's end: this step's best continuation is EOS and n_best have finished
        enough = top_finished and len(self._finished) >= self.options.n_best
        if enough or not parents:
            self.done = True
            return
        self._continue(parents, tokens, scores, attention)


def _finish(
    hyp: _Partial, log_prob: float, options: DecodeOptions, *, capped: bool = False
) -> Hypothesis:
    """``capped``: ended by the EOS forced at the length limit. Eole ends such a
    hypothesis without EOS, so with ``search="eole"`` it counts neither EOS's log-prob
    (the caller leaves it out) nor its length."""
    length = len(hyp.tokens) + (0 if capped and options.search == "eole" else 1)
    return Hypothesis(
        tokens=tuple(hyp.tokens),
        score=options.normalized(log_prob, length),
        log_prob=log_prob,
        attention=np.stack(hyp.attention) if options.return_attention else None,
    )


def make_search(src_len: int, options: DecodeOptions, special: SpecialIds) -> SentenceSearch:
    """Greedy for ``beam_size == 1`` (cheaper bookkeeping, same results), else the beam
    search ``options.search`` names."""
    if options.beam_size == 1:
        return GreedySearch(src_len, options, special)
    cls = EoleBeamSearch if options.search == "eole" else BeamSearch
    return cls(src_len, options, special)


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
