"""The plain beam sentences of a decode loop, kept as arrays.

A sentence under the standard beam search that needs nothing per step but tokens and
log-probs (:attr:`SentenceSearch.beam_batchable`) has up to ``beam`` live hypotheses,
each a row of the step. :class:`BeamRows` keeps every such sentence of one beam size as
arrays: per live row the token it feeds next, the row of the previous step it
continues, its cumulative log-prob and its tokens so far (one row of a token matrix);
per sentence its live row count, position, EOS rule, pool slot and finished count. A
step over them ranks and chooses for all at once (the shared :func:`rank_rows` and
:func:`beam_masks`) and moves the hypotheses' histories with one gather of the token
matrix. Per step, Python runs only for a hypothesis that finishes
(:meth:`SentenceSearch.add_finished`) and a sentence that ends.

Before, each beam sentence cost a :class:`Selection`, a :meth:`SentenceSearch.take` that
copied each live hypothesis's token list, and its share of the loop's input lists, every
step: the bound of an engine on a GPU, whose decoder call costs about the same for 1,280
rows as for 40 (an H200 served 1,817 beam-5 sentences/s at 256 clients with the
scheduler thread at ~0.55 ms of CPU per sentence). The loop's host time a step with
these arrays, side by side on a CPU: 0.70x / 0.65x / 0.85x / 0.64x the per-sentence
path's at 16 / 32 / 64 / 256 beam-5 sentences (``loadtest/results/loophost-cpu-beamrows.json``).
Like :class:`~service.greedyrows.GreedyRows` the arrays have a fixed cost a step of their
own, so the loop uses them from :data:`~service.strategies.ARRAY_MIN_SENTENCES` such
sentences on.

Results equal :class:`~service.strategies.Beam`'s per-sentence path, token for token and
score for score (``tests/service/test_beamrows.py``).
"""

from __future__ import annotations

from functools import partial
from itertools import compress

import numpy as np

from models.scoring import Eos, eos_codes
from service.columns import append_columns, keep_sentences
from service.ranking import beam_masks, own_columns, rank_rows

_EMPTY = np.zeros(0, dtype=np.int64)


def _runs(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``starts[j] .. starts[j] + counts[j] - 1`` for every ``j``, concatenated."""
    before = np.cumsum(counts) - counts
    return np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(starts - before, counts)


class BeamRows:
    """The beam sentences of one beam size; their rows are consecutive rows of every step
    the loop runs over all of them, sentence after sentence. Sentence ``j`` belongs to
    ``entries[j]`` (the loop's record, whose ``row`` this class keeps equal to ``j``).

    Per sentence ``(n,)`` int64: ``rows`` its live hypotheses, ``step`` tokens so far,
    ``limit``/``min_length`` its EOS rule's, ``slot`` its memory-pool slot, ``src_len``
    its source length, ``ended`` its finished hypotheses. Per live row ``(rows,)``:
    ``prev`` the token fed next (int64), ``base`` the row of the decoder states it
    continues (int64), ``score`` its cumulative log-prob (float32, as :class:`Beam`
    ranks them); ``history`` ``(rows, width)`` int32 its tokens (the first ``step`` of
    its sentence's).
    """

    _SENTENCE_FIELDS = ("rows", "step", "limit", "min_length", "slot", "src_len", "ended")

    def __init__(self, beam: int, top_k: int, eos: int) -> None:
        """``top_k``: the candidates :class:`~service.strategies.Beam` ranks per row for
        this beam size (what each of its searches' ``top_k`` is)."""
        self.beam = beam
        self.top_k = top_k
        self.eos = eos
        self.entries: list = []
        self.rows = self.step = self.limit = self.min_length = _EMPTY
        self.slot = self.src_len = self.ended = _EMPTY
        self.prev = self.base = _EMPTY
        self.score = np.zeros(0, dtype=np.float32)
        self.history = np.zeros((0, 16), dtype=np.int32)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def live_rows(self) -> int:
        return int(self.rows.sum())

    def rows_of(self, sentences: np.ndarray | None) -> int:
        """Rows a step over ``sentences`` (indices; None: all) carries."""
        return self.live_rows if sentences is None else int(self.rows[sentences].sum())

    def add(self, entries: list) -> None:
        """Start the loop's sentences ``entries`` (each with its ``search``, at step 0 and
        :attr:`~SentenceSearch.beam_batchable` with this beam size, its pool ``slot``
        and the state row ``base`` it continues)."""
        for j, entry in enumerate(entries, start=len(self.entries)):
            entry.row = j
            # streaming reads the live hypotheses from here from now on
            entry.search.live_tokens = partial(self._live_tokens, entry)
        self.entries += entries
        searches = [entry.search for entry in entries]
        new = {
            "rows": [s.rows for s in searches],
            "step": [s.step for s in searches],
            "limit": [s.limit for s in searches],
            "min_length": [s.rules.min_length for s in searches],
            "slot": [entry.slot for entry in entries],
            "src_len": [s.src_len for s in searches],
            "ended": [s.finished for s in searches],
        }
        append_columns(self, new)
        # a search at step 0 has one row, continuing its own initial state
        self.prev = np.concatenate([self.prev, [s.prev_tokens[0] for s in searches]])
        self.base = np.concatenate([self.base, [entry.base for entry in entries]])
        self.score = np.concatenate([self.score, np.zeros(len(entries), np.float32)])
        blank = np.zeros((len(entries), self.history.shape[1]), dtype=np.int32)
        self.history = np.concatenate([self.history, blank])

    def _starts(self) -> np.ndarray:
        return np.cumsum(self.rows) - self.rows

    def _live_tokens(self, entry) -> list[list[int]]:
        j = entry.row
        start = int(self._starts()[j])
        return self.history[start : start + int(self.rows[j]), : int(self.step[j])].tolist()

    def inputs(self, sentences: np.ndarray | None) -> tuple[np.ndarray, ...]:
        """The decoder inputs of ``sentences``'s rows (indices; None: all): tokens fed,
        parent rows, pool slots and EOS rule codes, each ``(rows,)`` int64."""
        codes = eos_codes(self.step, self.limit, self.min_length)
        if sentences is None:
            counts = self.rows
            return self.prev, self.base, np.repeat(self.slot, counts), np.repeat(codes, counts)
        rows = _runs(self._starts()[sentences], self.rows[sentences])
        counts = self.rows[sentences]
        return (
            self.prev[rows],
            self.base[rows],
            np.repeat(self.slot[sentences], counts),
            np.repeat(codes[sentences], counts),
        )

    def select(
        self, sentences: np.ndarray | None, values: np.ndarray, ids: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """Each of ``sentences``'s choice from its rows' candidates ``values``/``ids``
        ``(rows, K + 1)`` (EOS rules applied): ``(n, 2 * beam)`` arrays of its ranked
        continuations (the row of its own each continues, cumulative log-prob, token)
        and the masks of :func:`beam_masks`. Changes nothing."""
        values, ids = own_columns(values, ids, self.top_k)
        counts = self.rows if sentences is None else self.rows[sentences]
        score = self.score
        if sentences is not None:
            score = score[_runs(self._starts()[sentences], counts)]
        firsts = np.cumsum(counts) - counts
        parents, ranked, tokens = rank_rows(score, values, ids, firsts, counts, self.top_k)
        keep, ends = beam_masks(ranked, tokens, self.eos, self.beam)
        return parents, ranked, tokens, keep, ends

    def advance(
        self, choice: tuple[np.ndarray, ...], attention: np.ndarray, offset: int
    ) -> tuple[list, list]:
        """Record a step over all sentences, whose rows were rows ``offset ..`` of its
        output, in order; ``choice`` from :meth:`select` (``attention``: not kept).

        Returns the entries of the sentences whose search ended and ``(entry,
        exception)`` for those whose search raised recording a finished hypothesis;
        both leave. The others continue from their kept rows of this step's output.
        """
        parents, ranked, tokens, keep, ends = choice
        starts = self._starts()
        kept, ended = keep.sum(axis=1), ends.sum(axis=1)
        total_ended = self.ended + ended
        done = (total_ended >= self.beam) | (kept == 0)
        leaving = done.copy()
        finished, errors = [], []
        failed: set[int] = set()
        if ended.any():
            forced = eos_codes(self.step, self.limit, self.min_length) == Eos.FORCED
            js, cols = np.nonzero(ends)
            rows = (starts[js] + parents[js, cols]).tolist()
            log_probs = ranked[js, cols].tolist()
            for j, row, log_prob in zip(js.tolist(), rows, log_probs, strict=True):
                if j in failed:
                    continue
                search = self.entries[j].search
                try:
                    search.add_finished(
                        self.history[row, : self.step[j]].tolist(), log_prob,
                        float(self.score[row]), search.rules.eos_scored(bool(forced[j])),
                    )  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - this sentence's own failure
                    errors.append((self.entries[j], exc))
                    failed.add(j)
            leaving[list(failed)] = True
        for j in np.flatnonzero(done).tolist():
            if j not in failed:
                entry = self.entries[j]
                entry.search.step, entry.search.done = int(self.step[j]) + 1, True
                finished.append(entry)
        for entry in compress(self.entries, leaving.tolist()):
            entry.search.live_tokens = None
        stay = ~leaving
        chosen = keep & stay[:, None]
        source = (starts[:, None] + parents)[chosen]  # each new row's parent, block-local
        new_counts = kept[stay]
        new_steps = np.repeat(self.step[stay], new_counts)  # the column each new token goes
        history = self.history[source]
        if len(new_steps) and int(new_steps.max()) >= history.shape[1]:
            width = max(2 * history.shape[1], int(new_steps.max()) + 1)
            wider = np.zeros((len(history), width), dtype=np.int32)
            wider[:, : history.shape[1]] = history
            history = wider
        new_tokens = tokens[chosen]
        history[np.arange(len(history)), new_steps] = new_tokens
        self.history = history
        self.prev, self.score = new_tokens.astype(np.int64), ranked[chosen]
        self.base = offset + source
        self.ended = total_ended
        self.step = self.step + 1
        self.rows = kept
        self._keep(stay)
        return finished, errors

    def drop(self, keep: list[bool]) -> None:
        """Keep only the sentences whose ``keep`` is true (the others were cancelled);
        the decoder states are unchanged, so each row keeps its ``base``."""
        mask = np.asarray(keep, dtype=bool)
        rows = np.repeat(mask, self.rows)
        self.prev, self.base = self.prev[rows], self.base[rows]
        self.score, self.history = self.score[rows], self.history[rows]
        for entry in compress(self.entries, (~mask).tolist()):
            entry.search.live_tokens = None
        self._keep(mask)

    def _keep(self, mask: np.ndarray) -> None:
        """Keep only the sentences of ``mask`` in the per-sentence fields and entries."""
        keep_sentences(self, mask, self._SENTENCE_FIELDS)
