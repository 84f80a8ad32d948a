"""The plain greedy sentences of a decode loop, kept as arrays.

A greedy sentence that needs nothing per step but its next token (no banned tokens, no
attention kept, no coverage penalty, no forced prefix: :attr:`SentenceSearch.batchable`)
is one row whose whole state is a few numbers: the token it feeds next, the row of the
previous step it continues, its memory-pool slot, its cumulative log-prob, its position.
:class:`GreedyRows` keeps those numbers for all such sentences in arrays, so that a step
over them is a handful of numpy calls whatever their number. Per row and step the only
Python left is appending the chosen token to the sentence's target list (what streaming
reads); a sentence's :class:`SentenceSearch` is brought up to date and takes its last
step through its own :meth:`~SentenceSearch.finish` when it ends.

Before, each such sentence cost ~10 µs of host Python per step in the loop (its inputs,
a :class:`Selection`, :meth:`SentenceSearch.take`): the bound of an engine on a GPU,
whose decoder call costs about the same for 256 rows as for 8. The arrays have a fixed
cost a step of their own, so the loop uses them only once it holds
:data:`~service.strategies.ARRAY_MIN_SENTENCES` plain greedy sentences
(:meth:`DecodeLoop._arrays_pay <service.loop.DecodeLoop._arrays_pay>`).

The rules are the shared ones: the EOS rule :func:`models.scoring.eos_codes`, the choice
:func:`service.ranking.greedy_pick` (what :class:`Greedy` picks); results equal the
per-sentence path's, token for token and score for score (``tests/service/test_greedyrows.py``).
"""

from __future__ import annotations

from itertools import compress

import numpy as np

from models.scoring import eos_codes
from service.columns import append_columns, keep_sentences
from service.greedysteps import eos_masks
from service.ranking import greedy_pick
from service.strategies import Greedy

_EMPTY = np.zeros(0, dtype=np.int64)


class GreedyRows:
    """Consecutive rows of every step the loop runs over all of them (the loop puts
    them first). Array ``j`` of each field belongs to ``entries[j]`` (the loop's record
    of the sentence, whose ``row`` attribute this class keeps equal to ``j``).

    Fields, each ``(rows,)``: ``prev`` the token fed next, ``base`` the row of the
    decoder states it continues, ``slot`` its memory-pool slot, ``step`` tokens so far,
    ``limit``/``min_length`` its EOS rule's, ``src_len`` its source length (int64);
    ``score`` its cumulative log-prob (float64, as :class:`Greedy` adds them up).
    """

    top_k = Greedy.K

    def __init__(self, eos: int) -> None:
        self.eos = eos
        self.entries: list = []
        # each search's target list, for the per-step append (no attribute lookups)
        self.targets: list[list[int]] = []
        self.prev = self.base = self.slot = self.step = _EMPTY
        self.limit = self.min_length = self.src_len = _EMPTY
        self.score = np.zeros(0, dtype=np.float64)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def live_rows(self) -> int:
        return len(self.entries)

    def rows_of(self, rows: np.ndarray | None) -> int:
        """Rows a step over ``rows`` (indices; None: all) carries."""
        return len(self.entries) if rows is None else len(rows)

    _INT_FIELDS = ("prev", "base", "slot", "step", "limit", "min_length", "src_len")

    def add(self, entries: list) -> None:
        """Start the loop's sentences ``entries`` (each with its ``search``, at step 0 and
        :attr:`~SentenceSearch.batchable`, its pool ``slot`` and the state row ``base``
        it continues)."""
        first = len(self.entries)
        for j, entry in enumerate(entries, start=first):
            entry.row = j
        self.entries += entries
        searches = [entry.search for entry in entries]
        self.targets += [s.target for s in searches]
        new = {
            "prev": [s.prev_tokens[0] for s in searches],
            "base": [entry.base for entry in entries],
            "slot": [entry.slot for entry in entries],
            "step": [s.step for s in searches],
            "limit": [s.limit for s in searches],
            "min_length": [s.rules.min_length for s in searches],
            "src_len": [s.src_len for s in searches],
        }
        append_columns(self, new)
        self.score = np.concatenate([self.score, [s.scores[0] for s in searches]])

    def inputs(self, rows: np.ndarray | None) -> tuple[np.ndarray, ...]:
        """The decoder inputs of ``rows`` (indices; None: all): tokens fed, parent rows,
        pool slots and EOS rule codes, each ``(n,)`` int64."""
        if rows is None:
            codes = eos_codes(self.step, self.limit, self.min_length)
            return self.prev, self.base, self.slot, codes
        return (
            self.prev[rows],
            self.base[rows],
            self.slot[rows],
            eos_codes(self.step[rows], self.limit[rows], self.min_length[rows]),
        )

    def steps_inputs(self, rows: np.ndarray | None, steps: int) -> tuple[np.ndarray, ...]:
        """The inputs of ``steps`` greedy steps in one call (:mod:`service.greedysteps`)
        over ``rows`` (indices; None: all): tokens fed, parent rows and pool slots, each
        ``(n,)`` int64, and the EOS rule of each step, ``(n, steps, K + 1)`` bool."""
        pick = slice(None) if rows is None else rows
        mask = eos_masks(self.step[pick], self.limit[pick], self.min_length[pick], steps)
        return self.prev[pick], self.base[pick], self.slot[pick], mask

    def advance_steps(
        self, tokens: np.ndarray, log_probs: np.ndarray, attention: np.ndarray
    ) -> tuple[list, list, int]:
        """Record several steps over all rows in one call (rows ``0 .. len - 1`` of its
        output): ``tokens`` ``(len, steps)`` int64 and ``log_probs`` ``(len, steps)`` each
        step's choice, ``attention`` ``(len, steps, src_len_padded)``.

        What :meth:`advance` does step by step: a row that chose EOS ends there (what it
        chose after is thrown away), the others continue from their row of the output.
        Returns the entries that ended, ``(entry, exception)`` for those whose search
        raised ending, and the tokens generated (EOS included, nothing after it)."""
        n, steps = tokens.shape
        is_eos = tokens == self.eos
        ended = is_eos.any(axis=1)
        kept = np.where(ended, is_eos.argmax(axis=1), steps)  # tokens before EOS
        # cumulative log-probs, added one step at a time in float64 as Greedy adds them
        totals = np.empty((n, steps), dtype=np.float64)
        running = self.score
        for j, column in enumerate(log_probs.astype(np.float64).T):
            running = totals[:, j] = running + column
        rows = tokens.tolist()
        finished, errors = [], []
        for j in np.flatnonzero(ended).tolist():
            entry, e = self.entries[j], int(kept[j])
            self.targets[j] += rows[j][:e]
            before = float(totals[j, e - 1]) if e else float(self.score[j])
            try:
                entry.search.finish(
                    int(self.step[j]) + e, before, float(totals[j, e]), attention[j, e][None]
                )  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - this sentence's own failure
                errors.append((entry, exc))
                continue
            finished.append(entry)
        alive = ~ended
        keep = alive.tolist()
        for target, row in zip(compress(self.targets, keep), compress(rows, keep), strict=True):
            target += row
        self.prev, self.score = tokens[alive, -1], totals[alive, -1]
        self.step = self.step[alive] + steps
        self.base = np.flatnonzero(alive)
        if ended.any():
            self._keep_lists(keep, ("slot", "limit", "min_length", "src_len"))
        return finished, errors, int(np.minimum(kept + 1, steps).sum())

    def select(
        self, rows: np.ndarray | None, values: np.ndarray, ids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each of ``rows``'s choice from its candidates ``values``/``ids`` ``(n, K + 1)``
        (EOS rules applied): token ids ``(n,)`` and cumulative log-probs ``(n,)`` float64.
        Changes nothing."""
        tokens, log_probs = greedy_pick(values, ids)
        score = self.score if rows is None else self.score[rows]
        return tokens, score + log_probs.astype(np.float64)

    def advance(
        self, choice: tuple[np.ndarray, np.ndarray], attention: np.ndarray, offset: int
    ) -> tuple[list, list]:
        """Record a step over all rows (rows ``offset .. offset + len - 1`` of its
        output, in order): ``choice`` the tokens and cumulative log-probs from
        :meth:`select`, ``attention`` ``(len, src_len_padded)`` their attention.

        Returns the entries of the sentences that ended (EOS) and ``(entry, exception)``
        for those whose search raised ending; both leave. The others continue from
        their row of this step's output.
        """
        tokens, totals = choice
        ended = tokens == self.eos
        alive = ~ended
        token_list = tokens.tolist()
        if ended.any():
            finished, errors = [], []
            for j in np.flatnonzero(ended).tolist():
                entry = self.entries[j]
                try:
                    entry.search.finish(
                        int(self.step[j]), float(self.score[j]), float(totals[j]),
                        attention[j : j + 1],
                    )  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - this sentence's own failure
                    errors.append((entry, exc))
                    continue
                finished.append(entry)
            keep = alive.tolist()
            for target, token in zip(
                compress(self.targets, keep), compress(token_list, keep), strict=True
            ):
                target.append(token)
            self.prev, self.score, self.step = tokens[alive], totals[alive], self.step[alive] + 1
            self.base = offset + np.flatnonzero(alive)
            self._keep_lists(keep, ("slot", "limit", "min_length", "src_len"))
            return finished, errors
        for target, token in zip(self.targets, token_list, strict=True):
            target.append(token)
        self.prev, self.score, self.step = tokens, totals, self.step + 1
        self.base = np.arange(offset, offset + len(tokens), dtype=np.int64)
        return [], []

    def drop(self, keep: list[bool]) -> None:
        """Keep only the rows whose ``keep`` is true (the others were cancelled); the
        decoder states are unchanged, so each keeps its ``base``."""
        self._keep_lists(keep, (*self._INT_FIELDS, "score"))

    def _keep_lists(self, keep: list[bool], fields: tuple[str, ...]) -> None:
        keep_sentences(self, np.asarray(keep, dtype=bool), fields)
        self.targets = list(compress(self.targets, keep))
