"""The scoring rules of a decode, written once: when EOS may, may not or must end a
hypothesis, how long a target may grow, and how a finished hypothesis is scored.

Torch-free on purpose (numpy only): the PyTorch reference (:mod:`models.search`) and the
serving loop (:mod:`service.loop`, :mod:`service.decoding`) both apply these rules, on the
same candidate layout: a step offers each row ``(rows, k + 1)`` candidate log-probs, the
``k`` best non-EOS tokens first and EOS in the last column (what the exported decoder
graph returns, see :mod:`export.spec`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from models.options import DecodeOptions

NEG_INF = np.float32(-np.inf)
# What a forced EOS counts as when the model gives it -inf itself: the lowest finite
# float32, so that it still wins its row (every other candidate is -inf) and the row
# ends at its limit. With -inf, argmax took the first column and the sentence ran on
# past its limit until the request's deadline (a converted model that masks EOS).
FORCED_EOS_FLOOR = np.finfo(np.float32).min
# Smallest attention sum the coverage penalty takes the log of (log(1e-6) ≈ -13.8).
COVERAGE_FLOOR = 1e-6


class Eos(IntEnum):
    """What EOS may do at a row's next position (:meth:`ScoringRules.eos_rule`)."""

    ALLOWED = 0
    BLOCKED = 1  # fewer than min_length tokens so far
    FORCED = 2  # the last position the length limit allows


@dataclass(frozen=True)
class ScoringRules:
    """How one sentence is decoded and scored, whatever the search strategy.

    * Length limit: at most ``min(max_length, floor(max_length_ratio * src_len) +
      max_length_offset)`` target tokens, EOS included (:meth:`length_limit`).
    * EOS (:meth:`eos_rule`, applied by :func:`restrict`): banned before ``min_length``
      real tokens; the only candidate at the last position the limit allows, with the
      model's own EOS log-prob. Forcing wins over ``min_length``.
    * Score (:meth:`score`): ``log_prob / length ** length_penalty``, ``length`` counting
      EOS, and BOS too with ``bos_in_length`` (Eole's "avg" penalty); with ``wu_length``
      ``log_prob / ((5 + length) / 6) ** length_penalty`` (GNMT's, as Joey NMT's beam
      search divides by it; its greedy search has none, so neither has greedy here), the
      form ``DecodeOptions.length_penalty_form`` names (else the search's own).
    * ``eos_at_limit``: a hypothesis stopped at the length limit ends with a scored EOS.
      Eole's search (``False``) stops it without one: neither EOS's log-prob nor its
      length count (:meth:`eos_scored`).
    * ``prefix_scored``: a forced target prefix's tokens add their log-probs to the
      hypotheses that continue it. Eole's search (``False``, the decoding default of a
      converted Eole model) resets the log-prob to 0 once the prefix is decoded (Eole
      0.6.4 ``predict/beam_search.py``: ``topk_log_probs[:, 0] = 0.0`` at ``step ==
      prefix_len``), while its tokens still count in the length; OpenNMT-py's (1.x-3.x)
      has no such reset. A whole forced target (``Score``) always counts every token.

    * Coverage penalty (GNMT, Wu et al. 2016; OpenNMT-py/Eole ``coverage_penalty="wu"``,
      CTranslate2 ``coverage_penalty``): with ``coverage_penalty`` β > 0 the score of a
      finished hypothesis adds ``β · Σ_i log min(c_i, 1)``, ``c_i = Σ_t a_{t,i}`` the
      total attention source position ``i`` got over the hypothesis's steps (its EOS step
      included, unless that EOS is not scored: Eole at the length limit). ``c_i`` is
      floored at ``coverage_floor`` (:data:`COVERAGE_FLOOR`) so that an unattended
      position costs a large finite amount, not -inf; Eole's search has no floor (a
      position its attention never reached scores -inf there, and here). Applied to
      finished hypotheses only (not to the ranking of live ones), as GNMT does.

    * Banned tokens (:meth:`banned`, before a step ranks its candidates): the unknown
      token with ``ban_unk``; with ``block_ngram_repeat`` n > 0, every token that would
      complete an n-gram the hypothesis already holds (n-grams with a token of
      ``ignore_when_blocking`` do not count) — Eole's / OpenNMT-py's ``ban_unk_token``
      and ``block_ngram_repeat``, which ban a token, not a whole hypothesis.
    """

    min_length: int = 1
    max_length: int = 256
    max_length_ratio: float = 2.0
    max_length_offset: int = 10
    length_penalty: float = 1.0
    bos_in_length: bool = False
    wu_length: bool = False
    eos_at_limit: bool = True
    prefix_scored: bool = True
    coverage_penalty: float = 0.0
    coverage_floor: float = COVERAGE_FLOOR
    ban_unk: bool = False
    block_ngram_repeat: int = 0
    ignore_when_blocking: frozenset[int] = frozenset()

    @classmethod
    def of(cls, options: DecodeOptions) -> ScoringRules:
        """The rules a request's :class:`~models.options.DecodeOptions` ask for."""
        # OpenNMT-py 1.x/2.x: what Eole descends from
        eole = options.search in ("eole", "opennmt-py-1", "opennmt-py-2")
        joey = options.search == "joeynmt"
        marian = options.search == "marian"
        # OpenNMT-tf ranks a finished hypothesis by GNMT's penalty of its length + 1
        # (utils/decoding.py BeamSearch._get_scores adds 1 to sequence_lengths, which
        # already count its EOS): bos_in_length's extra token, with wu_length
        tf = options.search == "opennmt-tf"
        greedy = options.beam_size == 1
        return cls(
            min_length=options.min_length,
            max_length=options.max_length,
            max_length_ratio=options.max_length_ratio,
            max_length_offset=options.max_length_offset,
            # Joey NMT's and OpenNMT-tf's greedy searches have no length penalty
            length_penalty=0.0 if (joey or tf) and greedy else options.length_penalty,
            bos_in_length=eole or tf,
            wu_length=(
                options.length_penalty_form == "gnmt" if options.length_penalty_form else joey or tf
            ),
            # Eole, Joey, Marian and OpenNMT-tf stop a hypothesis at the limit without an EOS
            eos_at_limit=options.eos_at_limit and not (eole or joey or marian or tf),
            prefix_scored=options.prefix_scored,
            coverage_penalty=options.coverage_penalty,
            coverage_floor=0.0 if eole else COVERAGE_FLOOR,
            ban_unk=options.ban_unk,
            block_ngram_repeat=options.block_ngram_repeat,
            ignore_when_blocking=frozenset(options.ignore_when_blocking),
        )

    def length_limit(self, src_len: int) -> int:
        """Most target tokens (EOS included) for a source of ``src_len`` tokens; >= 1."""
        # int(ratio * src + offset), as Eole, OpenNMT-py and fairseq compute theirs: their
        # limits are this rule with offset + 1 (the EOS counted here). The offset is added
        # before flooring, as they do: 1.16 * 25 is 28.999999999999996, + 4 rounds to 33.0
        # (floor first gave 32: one token short of fairseq's limit)
        by_ratio = math.floor(self.max_length_ratio * src_len + (self.max_length_offset - 1)) + 1
        return max(1, min(self.max_length, by_ratio))

    def reached_limit(self, tokens: int, src_len: int) -> bool:
        """Whether a hypothesis of ``tokens`` target tokens (EOS not counted) ended at the
        length limit of a ``src_len``-token source, where EOS is forced (or, without
        ``eos_at_limit``, the search stops): its translation may be cut short."""
        return tokens >= self.length_limit(src_len) - 1

    def eos_rule(self, step: int, limit: int) -> Eos:
        """The EOS rule at position ``step`` (tokens generated so far) under ``limit``
        (one row of :func:`eos_codes`: the same rule, tested equal)."""
        if step >= limit - 1:
            return Eos.FORCED
        if step < self.min_length:
            return Eos.BLOCKED
        return Eos.ALLOWED

    def eos_scored(self, forced: bool) -> bool:
        """Whether the EOS that ends a hypothesis counts in its log-prob and length:
        always, except the forced one when ``eos_at_limit`` is off (Eole)."""
        return self.eos_at_limit or not forced

    def score(
        self,
        log_prob: float,
        tokens: int,
        *,
        eos: bool = True,
        coverage: np.ndarray | None = None,
    ) -> float:
        """The ranking score of a finished hypothesis of ``tokens`` real tokens whose
        cumulative log-prob is ``log_prob`` (``eos``: its EOS is scored); ``coverage``
        ``(src_len,)``: its attention summed over its steps, needed when
        ``coverage_penalty`` > 0 (:meth:`coverage_term`)."""
        length = max(tokens + (1 if eos else 0), 1) + (1 if self.bos_in_length else 0)
        if self.wu_length:
            score = log_prob / (((5.0 + length) / 6.0) ** self.length_penalty)
        else:
            score = log_prob / (length**self.length_penalty)
        if self.coverage_penalty > 0.0:
            score += self.coverage_term(coverage)
        return score

    @property
    def bans_tokens(self) -> bool:
        """Whether :meth:`banned` can ban anything."""
        return self.ban_unk or self.block_ngram_repeat > 0

    def banned(self, tokens: Sequence[int], unk_id: int) -> list[int]:
        """The token ids a hypothesis whose target so far is ``tokens`` (no BOS) may not
        take next, each once: unk first, then the blocked ones (n = 1: ascending ids).

        The n-grams are the hypothesis's own: a token is banned when the last ``n - 1``
        tokens followed by it form an n-gram already in ``tokens`` (``n = 1``: every
        token already there). Eole's beam search counts BOS in its n-grams too; BOS never
        comes again, so those never ban anything and are left out here.
        """
        out: list[int] = [unk_id] if self.ban_unk and unk_id >= 0 else []
        n = self.block_ngram_repeat
        if n <= 0 or len(tokens) < n:
            return out
        ignore = self.ignore_when_blocking
        seen = set(out)
        if n == 1:  # every token already there (set operations: hypotheses get long)
            return out + sorted(set(tokens) - ignore - seen)
        context = tokens[len(tokens) - n + 1 :]
        if ignore and any(t in ignore for t in context):
            return out  # every n-gram it would complete holds an ignored token
        last = context[-1]
        # earlier ends of the context (the scan that costs: kept to one comprehension)
        for j in [i for i, t in enumerate(tokens[: len(tokens) - 1]) if t == last]:
            start = j - n + 2
            if start < 0 or tokens[start : j + 1] != context:
                continue
            following = tokens[j + 1]
            if following not in seen and following not in ignore:
                seen.add(following)
                out.append(following)
        return out

    @property
    def needs_coverage(self) -> bool:
        """Whether :meth:`score` needs each hypothesis's attention sums."""
        return self.coverage_penalty > 0.0

    def coverage_term(self, coverage: np.ndarray | None) -> float:
        """``β · Σ_i log min(max(c_i, coverage_floor), 1)``; 0 with β = 0."""
        if self.coverage_penalty == 0.0:
            return 0.0
        if coverage is None:
            raise ValueError("coverage_penalty > 0 needs the hypothesis's attention sums")
        c = np.clip(np.asarray(coverage, dtype=np.float64), self.coverage_floor, 1.0)
        with np.errstate(divide="ignore"):  # no floor: log(0) is the -inf Eole gets
            return float(self.coverage_penalty * np.log(c).sum())


def eos_codes(
    steps: np.ndarray | int, limits: np.ndarray | int, min_lengths: np.ndarray | int
) -> np.ndarray:
    """The EOS rule (:class:`Eos` codes) of rows at position ``steps`` (tokens generated
    so far) under length ``limits`` and ``min_lengths`` (arrays of one shape, or
    scalars): forced at the last position the limit allows, else blocked before
    ``min_length`` tokens, else allowed. The decode loop computes a step's rows at once;
    :meth:`ScoringRules.eos_rule` is this for one row."""
    steps = np.asarray(steps)
    codes = (steps < min_lengths).astype(np.int64)  # Eos.BLOCKED = 1, ALLOWED = 0
    codes[steps >= np.asarray(limits) - 1] = Eos.FORCED  # forcing wins over min_length
    return codes


def restrict(values: np.ndarray, eos: Sequence[int] | np.ndarray) -> np.ndarray:
    """Apply each row's EOS rule to its candidates, in place; returns ``values``.

    Args:
        values: ``(rows, k + 1)`` candidate log-probs, EOS last.
        eos: ``(rows,)`` :class:`Eos` of each row.
    """
    codes = np.asarray(eos)
    values[codes == Eos.BLOCKED, -1] = NEG_INF
    forced = codes == Eos.FORCED
    values[forced, :-1] = NEG_INF
    values[forced & (values[:, -1] == NEG_INF), -1] = FORCED_EOS_FLOOR  # see the constant
    return values


def ban(
    values: np.ndarray,
    ids: np.ndarray,
    rows: Sequence[int] | np.ndarray,
    tokens: Sequence[int] | np.ndarray,
) -> np.ndarray:
    """Give each banned ``(rows[j], tokens[j])`` candidate -inf, in place; returns
    ``values`` (a banned token outside a row's candidates needs nothing).

    Args:
        values: ``(rows, k + 1)`` candidate log-probs; ids: ``(rows, k + 1)`` their ids.
    """
    rows = np.asarray(rows, dtype=np.int64)
    hit_j, hit_col = np.nonzero(ids[rows] == np.asarray(tokens, dtype=ids.dtype)[:, None])
    values[rows[hit_j], hit_col] = NEG_INF
    return values
