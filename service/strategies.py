"""Search strategies: how a step's candidates become each sentence's choice.

Each strategy (:data:`GREEDY`, :data:`BEAM`, :data:`EOLE_BEAM`, :data:`SAMPLING`, ...)
chooses, for all its sentences of a step at once, what every sentence takes
(:class:`Selection`); each sentence's :class:`service.decoding.SentenceSearch` records it.
The loop (:class:`service.loop.DecodeLoop`) calls them through the :class:`Strategy`
methods only: a new strategy (say, one that forces a target prefix: :class:`Prefix`) is
one more object with those methods, and the loop needs no change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np

from models.options import DecodeOptions
from models.scoring import NEG_INF, Eos
from service.ranking import beam_masks, greedy_pick, own_columns, ranked_continuations, ranked_one

if TYPE_CHECKING:
    from service.decoding import SentenceSearch


class Selection(NamedTuple):
    """What one sentence takes from a step. Rows are the sentence's own rows of the step.

    ``parents[i]`` continues with ``tokens[i]`` at cumulative log-prob ``scores[i]``; each
    ``(row, log_prob)`` of ``finished`` ends that row with EOS (``log_prob`` includes the
    EOS); ``done``: the search ends with this step; ``top_finished``: the step's best
    continuation was EOS (OpenNMT-py 1.x/2.x's search remembers it: :class:`OnmtPy1Beam`);
    ``dropped``: the hypotheses finished at earlier steps that this step discards (by
    their index among the sentence's finished ones), ``slots``: the beam's places after
    this step (OpenNMT-tf's beam: :class:`OnmtTfBeam`); ``states``: each continuing
    row's constraint state (:class:`service.constraints.ConstrainedBeam`);
    ``own_scores``, ``ended_own_scores``: each continuing and each finishing row's
    cumulative log-prob as the model gave it (float32 sums, as a plain beam's), where a
    diverse search's ``scores`` (:mod:`service.diverse`) hold penalties; ``samples``: the
    sample each continuing row draws for (:class:`Sampling`).
    """

    parents: list[int]
    tokens: list[int]
    scores: list[float]
    finished: list[tuple[int, float]]
    done: bool
    top_finished: bool = False
    dropped: tuple[int, ...] = ()
    slots: tuple[Slot, ...] | None = None
    states: tuple | None = None
    own_scores: tuple[float, ...] | None = None
    ended_own_scores: tuple[float, ...] = ()
    samples: tuple[int, ...] | None = None


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
        (:meth:`service.decoding.SentenceSearch.take`).
        """


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


class Beam:
    """Beam search, the rules of :func:`models.search.beam_search`: rank the best
    ``2 * beam`` continuations by cumulative log-prob (float32); an EOS among the first
    ``beam`` finishes a hypothesis, the best ``beam`` non-EOS ones stay live; done once
    ``beam`` hypotheses have finished.

    A step with many beam sentences (:data:`ARRAY_MIN_SENTENCES`) ranks and chooses for
    all of them at once, as arrays (:func:`service.ranking.ranked_continuations`, masks
    for the rules below); with few, one sentence at a time (:meth:`_choose`). Both give
    the same selections (``tests/service/test_beam_select.py``)."""

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


class JoeyBeam(EoleBeam):
    """Joey NMT 2.x's beam search (``DecodeOptions(search="joeynmt")``), for models
    converted from Joey NMT (:mod:`export.joeynmt`), as its ``search.beam_search`` runs:

    * each step keeps the best ``beam`` continuations of every live row, EOS included: a
      continuation that is EOS finishes a hypothesis *and stays in the beam*, where its
      own continuations go on competing for places (they never finish again);
    * Joey marks beam *positions* finished (the k-th best continuation was EOS at some
      step, or -inf) and ends the sentence once every position has been marked;
    * at its length limit every hypothesis without EOS finishes as it is (here at the
      next step, whose EOS is forced and not scored: ``ScoringRules.eos_at_limit``);
    * finished hypotheses are ranked by ``log_prob / ((5 + length) / 6) ** alpha``.
    """

    def _choose(self, s: SentenceSearch, rows, ranked, tokens_ranked) -> Selection:
        if s.eos_rule() is Eos.FORCED:  # past Joey's last step: what has no EOS ends here
            ending = [(r, score) for r, score in enumerate(s.scores) if not s.ended(r)]
            return Selection([], [], [], ending, True)
        beam = s.options.beam_size
        marked = s.positions or [False] * beam
        parents, tokens, scores, finished, now = [], [], [], [], []
        for k in range(beam):
            if k >= len(ranked) or ranked[k] == NEG_INF:
                now.append(True)  # Joey marks a -inf continuation finished
                continue
            row, tok = rows[k], tokens_ranked[k]
            if tok == s.eos and not s.ended(row):
                finished.append((row, ranked[k]))
            now.append(tok == s.eos or marked[k])
            parents.append(row)
            tokens.append(tok)
            scores.append(ranked[k])
        s.positions = now
        # Joey's last step finishes every live hypothesis: go on to the forced EOS
        last = s.step + 1 >= s.limit - 1
        done = (all(now) and not last) or not parents
        return Selection(parents, tokens, scores, finished, done)


class FairseqBeam(Beam):
    """fairseq's beam search (``SequenceGenerator``; ``DecodeOptions(search="fairseq")``),
    for models converted from fairseq (:mod:`export.fairseq`): the standard rules (best
    ``2 * beam`` continuations, an EOS among the first ``beam`` finishes a hypothesis, the
    best ``beam`` non-EOS ones go on, done once ``beam`` have finished), except that a
    step finishes no more hypotheses than the sentence still needs: fairseq's
    ``finalize_hypos`` drops the EOS continuations past ``beam`` finished ones, the lower
    ranked (here the standard search keeps them all and ranks them at the end).
    """

    def _choose(self, s: SentenceSearch, rows, ranked, tokens_ranked) -> Selection:
        chosen = super()._choose(s, rows, ranked, tokens_ranked)
        room = s.options.beam_size - s.finished
        if len(chosen.finished) > room:
            chosen = chosen._replace(finished=chosen.finished[:room])
        return chosen

    # ranked at once, chosen one sentence at a time (the cap above)
    _select_arrays = EoleBeam._select_arrays


class MarianBeam(EoleBeam):
    """Marian's beam search (``src/translator/beam_search.cpp``;
    ``DecodeOptions(search="marian")``), for models converted from Marian
    (:mod:`export.marian`): each step keeps the best ``beam - finished`` continuations of
    the live hypotheses (Marian's beam shrinks by each hypothesis that ends); those that
    are EOS finish, the rest go on; the sentence is done when none go on. At the length
    limit every live hypothesis ends without an EOS (``ScoringRules.eos_at_limit`` off), as
    Marian's ``max-length-factor`` ends them; all are ranked by ``log_prob / length **
    normalize``.
    """

    def _choose(self, s: SentenceSearch, rows, ranked, tokens_ranked) -> Selection:
        parents, tokens, scores, finished = [], [], [], []
        for rank, score in enumerate(ranked[: s.options.beam_size - s.finished]):
            if score == NEG_INF:
                break
            if tokens_ranked[rank] == s.eos:
                finished.append((rows[rank], score))
                continue
            parents.append(rows[rank])
            tokens.append(tokens_ranked[rank])
            scores.append(score)
        return Selection(parents, tokens, scores, finished, not parents)


@dataclass(frozen=True)
class Slot:
    """A place of OpenNMT-tf's beam (:class:`OnmtTfBeam`): the live row it holds (None
    once finished) or its finished hypothesis (``hyp``, an index among the sentence's),
    its cumulative log-prob as OpenNMT-tf keeps it, its length (tokens, EOS included)."""

    row: int | None
    cum: float
    length: int
    hyp: int = -1


class OnmtTfBeam(EoleBeam):
    """OpenNMT-tf 2.x's beam search (``opennmt/utils/decoding.py``: ``BeamSearch`` in
    ``dynamic_decode``; ``DecodeOptions(search="opennmt-tf")``), for models converted from
    OpenNMT-tf (:mod:`export.opennmt_tf`), its n-best lists and their order included.

    Its beam has ``beam`` places (:attr:`SentenceSearch.slots`, in its order), each a
    live or a finished hypothesis with a cumulative log-prob and a length. Each step ranks
    the live places' continuations, scored ``log_prob / ((5 + length + 1) / 6) **
    length_penalty`` (``_get_scores``; lengths count the tokens before the step),
    together with one continuation of each finished place (EOS at no cost, its length
    frozen), and keeps the best ``beam`` in that order: an EOS continuation finishes its
    hypothesis; a finished hypothesis outranked by ``beam`` others is dropped for good.
    The sentence is done when every place is finished; at the length limit the live ones
    stop without an EOS (``maximum_iterations``). The n-best list is the first places,
    in order, each scored by its place's log-prob.

    One thing OpenNMT-tf does that is reproduced as it is: a finished hypothesis that
    moves to another place takes that place's previous log-prob, not its own
    (``dynamic_decode``: ``tf.where(finished, x=cum_log_probs, y=next_cum_log_probs)``
    reads the new order's finished flags against the old order's log-probs). Its score
    and its rank afterwards use that value, as OpenNMT-tf's do; its ``log_prob`` stays
    its own.
    """

    def _choose(self, s: SentenceSearch, rows, ranked, tokens_ranked) -> Selection:
        # the first step it ranks: one live row (after a forced target prefix, if any)
        slots = s.slots or (Slot(row=0, cum=float(s.scores[0]), length=s.step),)
        if s.eos_rule() is Eos.FORCED:  # past OpenNMT-tf's last step: the live ones end
            ending, places = [], []
            for slot in slots:
                if slot.row is not None:
                    ending.append((slot.row, s.scores[slot.row]))
                    slot = Slot(None, slot.cum, slot.length, s.finished + len(ending) - 1)
                places.append(slot)
            return Selection([], [], [], ending, True, slots=tuple(places))
        alpha = s.options.length_penalty

        def scored(total: float, length: int) -> float:
            return total / ((5.0 + length + 1) / 6.0) ** alpha if alpha else total

        # (score, place, rank): a live place's continuation by its rank in ``ranked``,
        # or (rank -1) a finished place's EOS; best first, ties by place
        live_place = {slot.row: k for k, slot in enumerate(slots) if slot.row is not None}
        candidates = [
            (scored(float(total), slots[live_place[row]].length), live_place[row], rank)
            for rank, (row, total) in enumerate(zip(rows, ranked, strict=True))
            if total != NEG_INF
        ]
        candidates += [(scored(slot.cum, slot.length), k, -1)
                       for k, slot in enumerate(slots) if slot.row is None]  # fmt: skip
        candidates.sort(key=lambda c: (-c[0], c[1]))
        parents, tokens, scores, finished = [], [], [], []
        new: list[tuple[int | None, float, int, int]] = []  # a Slot's fields, hyp as found
        for place, (_, k, rank) in enumerate(candidates[: s.options.beam_size]):
            parent = slots[k]
            if rank < 0:  # a finished place: its hypothesis, with this place's old cum
                old = slots[place].cum if place < len(slots) else float("-inf")
                new.append((None, old, parent.length, parent.hyp))
            elif tokens_ranked[rank] == s.eos:
                finished.append((rows[rank], ranked[rank]))
                new.append((None, float(ranked[rank]), parent.length + 1, -len(finished)))
            else:
                new.append((len(parents), float(ranked[rank]), parent.length + 1, -1))
                parents.append(rows[rank])
                tokens.append(tokens_ranked[rank])
                scores.append(ranked[rank])
        kept = sorted(hyp for row, _, _, hyp in new if row is None and hyp >= 0)
        dropped = tuple(sorted(set(range(s.finished)) - set(kept)))
        # the finished hypotheses' indices once the dropped ones are gone and these joined
        renumber = {old: i for i, old in enumerate(kept)}

        def index(hyp: int) -> int:
            return renumber[hyp] if hyp >= 0 else len(kept) - hyp - 1

        places = tuple(
            Slot(row, cum, length, index(hyp) if row is None else -1)
            for row, cum, length, hyp in new
        )
        return Selection(parents, tokens, scores, finished, not parents, dropped=dropped,
                         slots=places)  # fmt: skip


class OneByOne:
    """A strategy that chooses for its sentences one at a time: ``select`` calls
    ``_choose(search, first_row, values, ids)`` for each (constrained and diverse searches,
    whose bookkeeping is per sentence)."""

    def select(self, searches, first_rows, values, ids) -> list[Selection]:
        return [
            self._choose(s, first, values, ids)  # type: ignore[attr-defined]
            for s, first in zip(searches, first_rows, strict=True)
        ]


class Sampling(OneByOne):
    """Random sampling (Eole's ``random_sampling_topk`` / ``random_sampling_temp``,
    CTranslate2's ``sampling_topk`` / ``sampling_temperature``): ``beam_size`` samples
    per sentence, each a row of its own (fairseq's ``--sampling --beam N``).

    Each step ranks a row's own candidates (its top-k and EOS, after the EOS rules and
    bans), keeps the ``sampling_topk`` best, then (``sampling_topp`` < 1) only the first
    of them whose tempered probabilities add up to ``sampling_topp`` (the nucleus of the
    k best, renormalised: Hugging Face's order; Eole cuts the nucleus from the whole
    distribution, then the k best), and draws one with probability
    ``softmax(log_prob / sampling_temperature)`` by one uniform number of the sample's
    own generator (:meth:`service.decoding.SentenceSearch.draw`) against the cumulative
    probabilities, in rank order. The first drawn step spreads the sentence's one row
    over its samples, each drawing from it on its own; a sample that draws EOS is
    finished, the others go on, and the search is done when every one is. The
    hypothesis's log-prob is the model's own (untempered) log-prob of what was drawn.
    Ties rank as the candidates come (a token before EOS), so each sample's draws are a
    function of the seed, the sentence's index, the sample's and the model alone.
    """

    def top_k(self, options: DecodeOptions) -> int:
        return options.sampling_topk

    @staticmethod
    def _choose(s: SentenceSearch, first: int, values, ids) -> Selection:
        spread = s.samples is None  # the one row, drawn from by every sample
        samples = range(s.options.beam_size) if spread else s.samples
        rows = [0] * len(samples) if spread else range(len(samples))
        v_rows, i_rows = own_columns(
            values[first : first + s.rows], ids[first : first + s.rows], s.top_k
        )
        parents, tokens, totals, kept, finished = [], [], [], [], []
        for row, sample in zip(rows, samples, strict=True):
            v, i = v_rows[row], i_rows[row]
            order = np.argsort(-v, kind="stable")[: s.rank_k]
            logits = v[order].astype(np.float64) / s.options.sampling_temperature
            if not np.isfinite(logits[0]):  # nothing allowed: end here (as greedy would)
                finished.append((row, s.scores[row] + float(v[order[0]])))
                continue
            weights = np.exp(logits - logits[0])  # -inf (banned) -> 0
            cumulative = np.cumsum(weights / weights.sum())
            if s.options.sampling_topp < 1.0:  # the nucleus: first to reach topp
                keep = int(np.searchsorted(cumulative, s.options.sampling_topp)) + 1
                order, weights = order[:keep], weights[:keep]
                cumulative = np.cumsum(weights / weights.sum())
            at = int(np.searchsorted(cumulative, s.draw(sample), side="right"))
            pick = order[min(at, len(order) - 1)]
            tok, total = int(i[pick]), s.scores[row] + float(v[pick])
            if tok == s.eos:
                finished.append((row, total))
            else:
                parents.append(row)
                tokens.append(tok)
                totals.append(total)
                kept.append(sample)
        return Selection(parents, tokens, totals, finished, not parents, samples=tuple(kept))


class Prefix:
    """Forced decoding of a target prefix, around any ``inner`` strategy.

    While a sentence's step is below ``len(search.prefix)`` its single row takes the
    next prefix token, whatever the EOS rules and bans say; from then on ``inner``
    chooses. The prefix tokens are part of every hypothesis's ``tokens`` and count in
    its length, and each adds its own log-prob (:attr:`SentenceSearch.forced_log_prob`,
    which the loop reads from the step's whole row: :mod:`service.forced`), so scores
    cover the whole translation, unless the search's rules drop them
    (:attr:`models.scoring.ScoringRules.prefix_scored`: Eole's and OpenNMT-py's reset
    the log-prob after the prefix). A prefix that ends with EOS is a whole translation
    (the ``Score`` RPC): the EOS ends the search, nothing is searched, every token counts.
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
                token = s.prefix[s.step]
                total = s.scores[0] + (s.forced_log_prob if s.prefix_scored else 0.0)
                if token == s.eos:
                    chosen[i] = Selection([], [], [], [(0, total)], True)
                else:
                    chosen[i] = Selection([0], [token], [total], [], False)
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
JOEY_BEAM: Strategy = JoeyBeam()
FAIRSEQ_BEAM: Strategy = FairseqBeam()
MARIAN_BEAM: Strategy = MarianBeam()
ONMT_TF_BEAM: Strategy = OnmtTfBeam()
SAMPLING: Strategy = Sampling()
BEAMS: dict[str, Strategy] = {
    "standard": BEAM,
    "eole": EOLE_BEAM,
    "opennmt-py-1": ONMT_PY1_BEAM,
    "opennmt-py-2": ONMT_PY2_BEAM,
    "joeynmt": JOEY_BEAM,
    "fairseq": FAIRSEQ_BEAM,
    "marian": MARIAN_BEAM,
    "opennmt-tf": ONMT_TF_BEAM,
}
# One wrapper per strategy, so that the loop groups such sentences together.
_PREFIXED: dict[Strategy, Strategy] = {s: Prefix(s) for s in (GREEDY, *BEAMS.values(), SAMPLING)}


def strategy_for(options: DecodeOptions, *, prefix: bool = False) -> Strategy:
    """Sampling when ``options`` ask for it, greedy for ``beam_size == 1`` (cheaper
    bookkeeping, same results), else the beam search ``options.search`` names (made diverse
    with ``diverse_beam_groups`` or a ``diversity_rate``: :mod:`service.diverse`); wrapped
    in :class:`Prefix` when ``prefix``."""
    inner = BEAMS[options.search]
    if options.sampling:
        inner = SAMPLING
    elif options.beam_size == 1:
        inner = GREEDY
    elif options.diverse:
        from service.diverse import diverse  # noqa: PLC0415 - it builds on this module

        inner = diverse(inner, options)
    if not prefix:
        return inner
    if inner not in _PREFIXED:  # the diverse searches, wrapped on first use
        _PREFIXED.setdefault(inner, Prefix(inner))
    return _PREFIXED[inner]
