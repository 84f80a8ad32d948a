"""One sentence's search, and the contract of the step model it runs over; plain numpy.

No ONNX Runtime and no gRPC here. Each decoder step (see :mod:`export.spec`) gives every
live row its candidates (:func:`candidates`: the graph's top-k, then EOS); the shared
rules of :mod:`models.scoring` restrict them (EOS banned before ``min_length``, forced at
the length limit); then each search strategy (:mod:`service.strategies`) chooses, for all
its sentences of the step at once, what every sentence takes, and each sentence's
:class:`SentenceSearch` records it. The driver loop that batches them over one decoder
call per step is :class:`service.loop.DecodeLoop`, which the export parity gate and the
service scheduler both use. The ranking they share is :mod:`service.ranking`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from models.options import DecodeOptions, Hypothesis
from models.scoring import NEG_INF, Eos, ScoringRules
from service.constraints import CONSTRAINED, Constraints
from service.strategies import BEAM, GREEDY, Selection, Slot, Strategy, strategy_for


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


class _Partial:
    """A live hypothesis: its tokens, and with ``return_attention`` / ``replace_unk`` its
    attention rows, with a coverage penalty its attention sums ``(src_len,)`` float64,
    with ``return_token_scores`` its tokens' log-probs."""

    __slots__ = ("tokens", "attention", "coverage", "log_probs")

    def __init__(
        self,
        tokens: list[int],
        attention: list[np.ndarray] | None = None,
        coverage: np.ndarray | None = None,
        log_probs: list[float] | None = None,
    ) -> None:
        self.tokens = tokens
        self.attention = attention
        self.coverage = coverage
        self.log_probs = log_probs


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
        sentence: int | tuple[int, ...] = 0,
        constraints: Constraints | None = None,
    ) -> None:
        """``sentence``: its index in its request, or its key among the request's draws
        (:attr:`service.jobs.Job.draw_keys`: ``(i, j)`` for the j-th sentence of text i
        cut by ``split_sentences``), which with ``options.seed`` fixes its random draws
        (:class:`~service.strategies.Sampling`); ``constraints``: target phrases its
        translation must hold (:mod:`service.constraints`)."""
        self.strategy = strategy
        # Target tokens forced at the first steps (:class:`~service.strategies.Prefix`);
        # EOS only last, where it makes the prefix the whole translation (``Score``).
        self.prefix: tuple[int, ...] = tuple(prefix)
        self.options = options
        self.rules = ScoringRules.of(options)
        self.src_len = src_len
        self.eos = special.eos
        self.limit = self.rules.length_limit(src_len)
        whole = bool(self.prefix) and self.prefix[-1] == special.eos
        if special.eos in self.prefix[:-1]:
            raise ValueError("a target prefix holds EOS before its end")
        if len(self.prefix) + (not whole) > self.limit:
            room = "" if whole else ", leaving no room for EOS"
            raise ValueError(
                f"target prefix of {len(self.prefix) - whole} tokens{room} exceeds the length "
                f"limit of {self.limit} (EOS counted)"
            )
        # The log-prob of this step's forced token (set by the loop before each step's
        # selection, from the step's whole row); each one's, in order, when the prefix is
        # a whole translation (``Hypothesis.token_log_probs``).
        self.forced_log_prob = 0.0
        self._forced: list[float] | None = [] if whole else None
        # whether the forced tokens' log-probs add to the hypothesis's (ScoringRules)
        self.prefix_scored = whole or self.rules.prefix_scored
        # Candidates the strategy ranks per row; the decoder is asked for as many more as
        # a row of the step has banned tokens (:attr:`top_k`), so that banning them
        # leaves the strategy exactly its ``rank_k`` best allowed ones.
        self.rank_k = strategy.top_k(options)
        self.top_k = self.rank_k
        self.unk = special.unk
        # a generator per sample: its draws depend on nothing else being decoded (sample 0
        # keyed as a one-sample search's, so it draws what beam_size 1 draws)
        self._draw_key = (sentence,) if isinstance(sentence, int) else tuple(sentence)
        self._rngs: dict[int, np.random.Generator] = {}
        self._draws: dict[int, float] = {}  # this step's uniform numbers, by sample
        # the sample each live row draws for (:class:`~service.strategies.Sampling`);
        # None until the first drawn step spreads the one row over ``beam_size`` samples
        self.samples: list[int] | None = None
        # each live row's banned tokens for the next step (ScoringRules.banned); None
        # when these options ban nothing
        self.bans: list[list[int]] | None = None
        self.step = 0
        self.done = False
        self.top_finished = False  # some step's best continuation was EOS
        # Joey NMT's search: each beam position once finished (service.strategies.JoeyBeam)
        self.positions: list[bool] = []
        # OpenNMT-tf's search: its beam's places, in order (service.strategies.OnmtTfBeam)
        self.slots: list[Slot] | None = None  # set by take(), never by a strategy's select
        # Constrained decoding: each live row's constraint state (set by take()), and the
        # step's whole log-prob rows of its live rows (set by the loop before each step's
        # selection, like forced_log_prob)
        self.constraints = constraints
        self.constraint_states = [constraints.start()] if constraints else None
        self.step_log_probs: np.ndarray | None = None
        # Diverse searches (:mod:`service.diverse`), whose scores hold penalties: each
        # live row's cumulative log-prob as the model gave it (set by take())
        self.own_scores: list[float] | None = [0.0] if options.diverse else None
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
        # each token's log-prob (return_token_scores; a whole forced target has _forced)
        # (read by the loop, which hands such a search its step's candidates)
        self.keeps_lps = options.return_token_scores and self._forced is None
        self._live = [
            _Partial(
                [],
                [] if self._keep_attn else None,
                np.zeros(src_len) if self._track_cov else None,
                [] if self.keeps_lps else None,
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

    def draw(self, sample: int = 0) -> float:
        """This step's uniform number for ``sample`` from its own generator, seeded by
        ``[seed, text]``, then the sample's index past the first sample, then (a text cut
        by ``split_sentences``) the sentence's index in its text past its first sentence:
        the first sentence of a text draws what the text unsplit draws, the first sample
        what one sample draws. The same however often the step is chosen (an isolation
        probe, a retried step), the next only once :meth:`take` recorded it, so choosing
        a step and throwing it away changes no draw."""
        if sample not in self._draws:
            if sample not in self._rngs:
                text, *within = self._draw_key
                key = [self.options.seed, text]
                if sample or within:
                    key += [sample, *within]  # (4 numbers apart from 3: no key collides)
                self._rngs[sample] = np.random.default_rng(key)
            self._draws[sample] = float(self._rngs[sample].random())
        return self._draws[sample]

    @property
    def plain(self) -> bool:
        """Nothing per step but tokens and log-probs: no bans, no attention kept, no
        coverage, no forced prefix, no token log-probs kept."""
        return (
            not self.rules.bans_tokens
            and not self._keep_attn
            and not self._track_cov
            and not self.prefix
            and not self.keeps_lps
            and not self.constraints
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

    def ended(self, row: int) -> bool:
        """Whether live ``row``'s hypothesis already holds EOS (Joey NMT's search keeps
        such rows in its beam: :class:`~service.strategies.JoeyBeam`)."""
        return self.eos in self._live[row].tokens

    @property
    def forced_token(self) -> int | None:
        """The token this step is forced to take (the prefix's next), or None."""
        return self.prefix[self.step] if self.step < len(self.prefix) else None

    def eos_rule(self) -> Eos:
        """The EOS rule of the next step."""
        return self.rules.eos_rule(self.step, self.limit)

    def take(
        self,
        selection: Selection,
        attention: np.ndarray,
        candidates: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Record this step's ``selection``; ``attention`` ``(rows, src_len_padded)`` is
        the attention of this sentence's rows of the step; ``candidates``: their values and
        ids ``(rows, k + 1)``, where a kept token log-prob (``return_token_scores``) is
        read (else it is the difference of the cumulative scores, rounded as they are)."""
        keep_attn, keep_lps = self._keep_attn, self.keeps_lps
        own = self._own_log_prob(candidates) if keep_lps else None
        self._draws.clear()
        if selection.samples is not None:
            self.samples = list(selection.samples)
        if self._forced is not None and self.step < len(self.prefix):
            self._forced.append(self.forced_log_prob)
        if selection.slots is not None:
            self.slots = list(selection.slots)
        if selection.states is not None:
            self.constraint_states = list(selection.states)
        if selection.dropped:  # before this step's finished join (the indices are older)
            gone = set(selection.dropped)
            self._finished = [h for i, h in enumerate(self._finished) if i not in gone]
        if selection.finished:
            # a scored translation's EOS always counts, at the length limit too
            forced_eos = self.eos_rule() is Eos.FORCED and self._forced is None
            scored = self.rules.eos_scored(forced_eos)
            ended = selection.ended_own_scores
            for j, (row, log_prob) in enumerate(selection.finished):
                hyp = self._live[row]
                attn = hyp.attention + [attention[row, : self.src_len]] if keep_attn else None
                cov = None
                if self._track_cov:
                    # an unscored EOS (Eole at the length limit) is no step: its
                    # attention is not the hypothesis's either
                    cov = hyp.coverage + attention[row, : self.src_len] if scored else hyp.coverage
                lps = None
                if keep_lps:  # an unscored EOS adds no entry (nor its log-prob)
                    eos_lp = own(row, self.eos, log_prob - self.scores[row])
                    lps = hyp.log_probs + [eos_lp] if scored else hyp.log_probs
                own_lp = None
                if ended:  # an unscored EOS adds nothing to the row's own log-prob
                    own_lp = ended[j] if scored else self.own_scores[row]  # type: ignore[index]
                self.add_finished(
                    hyp.tokens, log_prob, self.scores[row], scored,
                    np.stack(attn) if keep_attn else None, cov, lps, own_lp,
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
            if keep_lps:
                token, total = selection.tokens[0], selection.scores[0]
                hyp.log_probs.append(own(0, token, total - self.scores[selection.parents[0]]))
        elif not keep_attn and not self._track_cov and not keep_lps:  # tokens only (common)
            tokens = [h.tokens for h in live]
            self._live = [
                _Partial(tokens[p] + [t])
                for p, t in zip(selection.parents, selection.tokens, strict=True)
            ]
        else:
            track, scores = self._track_cov, self.scores
            self._live = [
                _Partial(
                    live[p].tokens + [t],
                    live[p].attention + [attention[p, : self.src_len]] if keep_attn else None,
                    live[p].coverage + attention[p, : self.src_len] if track else None,
                    live[p].log_probs + [own(p, t, score - scores[p])] if keep_lps else None,
                )
                for p, t, score in zip(
                    selection.parents, selection.tokens, selection.scores, strict=True
                )
            ]
        self.rows = len(selection.tokens)
        self.prev_tokens = selection.tokens
        self.parents = selection.parents
        self.scores = selection.scores
        if selection.own_scores is not None:
            self.own_scores = list(selection.own_scores)
        self._update_bans()

    def _own_log_prob(
        self, candidates: tuple[np.ndarray, np.ndarray] | None
    ) -> Callable[[int, int, float], float]:
        """``own(row, token, fallback)``: the log-prob this step's candidates give ``token``
        on ``row``, exactly as the model returned it (a beam's cumulative scores are
        float32 totals, whose differences round it), or ``fallback``: for a forced token
        (outside the top-k, :attr:`forced_log_prob`), a sampled one drawn from the whole
        vocabulary, or without ``candidates``; a constraint's token from outside the top-k
        is read from the step's whole row (:attr:`step_log_probs`)."""
        forced = self.step < len(self.prefix)

        def own(row: int, token: int, fallback: float) -> float:
            if forced:
                return self.forced_log_prob
            if candidates is None:
                return fallback
            values, ids = candidates
            if token == self.eos:
                # its own column, the last (a step capped at the vocabulary also lists EOS
                # among the top-k, at -inf)
                return float(values[row, -1])
            where = np.flatnonzero(ids[row] == token)
            if where.size:
                return float(values[row, where[0]])
            if self.step_log_probs is not None:
                # a constraint's token from outside the top-k: the step's whole row
                return float(self.step_log_probs[row, token])
            return fallback

        return own

    def add_finished(
        self,
        tokens: Sequence[int],
        log_prob: float,
        row_log_prob: float,
        scored: bool,
        attention: np.ndarray | None = None,
        coverage: np.ndarray | None = None,
        token_log_probs: Sequence[float] | None = None,
        own_log_prob: float | None = None,
    ) -> None:
        """Record a hypothesis ``tokens`` (no EOS) that ends at this step: ``log_prob``
        with its EOS, ``row_log_prob`` before it (what counts when the EOS is not
        ``scored``: :meth:`ScoringRules.eos_scored`); ``attention`` ``(len, src_len)``
        when kept, ``coverage`` its summed attention when the score needs it,
        ``token_log_probs`` when kept (``return_token_scores``); ``own_log_prob``: for a
        diverse search, whose ``log_prob`` holds penalties (the score keeps them), the
        model's own, which the hypothesis reports."""
        if self._forced is not None:  # a whole forced target: its own exact values
            token_log_probs = self._forced
        if not scored:  # ended without EOS: its log-prob is the row's so far
            log_prob = row_log_prob
        self._finished.append(
            Hypothesis(
                tokens=tuple(tokens),
                score=self.rules.score(log_prob, len(tokens), eos=scored, coverage=coverage),
                log_prob=log_prob if own_log_prob is None else own_log_prob,
                attention=attention,
                token_log_probs=None if token_log_probs is None else tuple(token_log_probs),
            )
        )

    def results(self) -> list[Hypothesis]:
        """The ``n_best`` finished hypotheses, best score first (OpenNMT-tf's search: its
        beam's first places, each scored by its place's log-prob)."""
        if self.slots is not None and self.done:
            ranked = [dataclasses.replace(self._finished[slot.hyp], score=slot.cum)
                      for slot in self.slots if slot.row is None]  # fmt: skip
        else:
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


def make_search(
    src_len: int,
    options: DecodeOptions,
    special: SpecialIds,
    prefix: Sequence[int] = (),
    sentence: int | tuple[int, ...] = 0,
    constraints: Constraints | None = None,
) -> SentenceSearch:
    """A sentence of ``src_len`` source tokens, decoded as ``options`` say, its target
    starting with the token ids ``prefix`` (forced, see
    :class:`~service.strategies.Prefix`) or holding the phrases of ``constraints``
    (:mod:`service.constraints`); ``sentence``: its index in its request, or its draw
    key (the draws of :class:`~service.strategies.Sampling`)."""
    if constraints:
        if prefix:
            raise ValueError("a sentence cannot have both a target prefix and constraints")
        if options.diverse:
            raise ValueError("constrained beam search is not diverse: diversity_rate 0, no groups")
        strategy = CONSTRAINED
    else:
        strategy = strategy_for(options, prefix=bool(prefix))
    return SentenceSearch(strategy, src_len, options, special, prefix, sentence, constraints)


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
    # (rows, V): every token's log-prob as the top-k ranks it, EOS blocked; only when the
    # step was asked for it (forced tokens: service.forced)
    log_probs: np.ndarray | None = None


@dataclass
class GreedyStepsOutput:
    """Outputs of several greedy steps in one call (:mod:`service.greedysteps`)."""

    tokens: np.ndarray  # (rows, steps) int64, each step's choice
    log_probs: np.ndarray  # (rows, steps) float32, its log-prob
    attention: np.ndarray  # (rows, steps, src_len) float32
    states: tuple[Any, ...]  # after the last step, (rows, ...) each


class StepModel(Protocol):
    """An encoder plus one decoder step; :class:`service.runtime.OnnxModel` is one.

    A model may also run several plain greedy steps in one call: its ``greedy_steps``
    says how many (a model without the attribute, or with 1, runs one step a call), and
    :meth:`step` with ``eos_mask`` runs them (see :meth:`service.runtime.OnnxModel.step`).
    The loop passes ``log_probs=True`` only on steps that force a token (a target prefix,
    ``Score``): the step then returns every row's log-probs, :attr:`StepOutput.log_probs`."""

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
        eos_mask: np.ndarray | None = None,
        log_probs: bool = False,
    ) -> StepOutput | GreedyStepsOutput: ...


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
