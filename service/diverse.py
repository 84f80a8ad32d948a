"""Diverse beam searches: n-best lists whose hypotheses differ more than a plain beam's.

Two, each a strategy the decode loop calls like any other (``strategy_for`` picks them):

* :class:`Siblings`, diverse siblings (Li et al. 2016, "A Simple, Fast Diverse Decoding
  Algorithm for Neural Generation"; fairseq's ``--diversity-rate``,
  ``DiverseSiblingsSearch``; ``DecodeOptions.diversity_rate``), around any beam search;
* :class:`GroupedBeam`, diverse beam search (Vijayakumar et al. 2018, "Diverse Beam
  Search: Decoding Diverse Solutions from Neural Sequence Models";
  ``DecodeOptions.diverse_beam_groups`` and ``diverse_beam_strength``), with the rules of
  fairseq's ``--diverse-beam-groups`` as its release 0.12.2 computes them (later fairseq
  defaults to another penalty; its ``DiverseBeamSearch(diversity_discount=0,
  candidate_multiple=2)`` is 0.12.2's, the one ``tests/fixtures/fairseq/*/groups*.json``
  were made with):

  * the beam's ``B`` rows are ``G`` groups by position: row ``r`` is in group ``r mod G``
    (at the search's first step every group starts from the one row there is);
  * groups choose in order: each ranks its own rows' continuations by cumulative score
    (its rows' scores plus the step's log-probs, float32), every token's log-prob first
    lowered by ``S`` for each time the token is among the candidates earlier groups took
    at this step (Hamming diversity), and takes its best ``2 B / G``;
  * the groups' candidates are interleaved rank by rank (the r-th of group g at
    ``r G + g``) and fairseq's generator runs over that list: an EOS among its first
    ``B`` finishes a hypothesis (with fairseq's search no more than the sentence still
    needs), the first ``B`` others go on, in that order, which sets the next step's groups.

  Each row needs its ``2 B`` best candidates (a token earlier groups took may fall out of
  a group's ``2 B / G`` best, letting others in), which the decoder returns as it does for
  the standard beam.

In both the penalties stay in the cumulative scores the search goes on from, and so in
each hypothesis's ``score``, as fairseq prints it; its ``log_prob`` is the model's own
(:attr:`Selection.own_scores`, float32 sums as a plain beam's). Sentences are chosen one
at a time, outside the loop's beam arrays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from models.options import DecodeOptions
from models.scoring import NEG_INF
from service.ranking import own_columns, ranked_one, ranked_siblings
from service.strategies import BEAMS, OneByOne, Selection, Strategy

if TYPE_CHECKING:
    from service.decoding import SentenceSearch


class Siblings(OneByOne):
    """Diverse siblings (Li et al. 2016, "A Simple, Fast Diverse Decoding Algorithm for
    Neural Generation"; fairseq's ``--diversity-rate``, ``DiverseSiblingsSearch``) around
    a beam search ``inner`` (``DecodeOptions.diversity_rate`` > 0).

    Each step ranks every hypothesis's continuations among themselves and takes
    ``k * diversity_rate`` off its k-th best (k from 1); ``inner`` then ranks all of them
    by what is left and applies its own rules (which finish, which go on, when the
    sentence is done), so a beam keeps fewer continuations of one parent. As in fairseq
    the penalty stays in the cumulative score the search goes on from, and so in the
    finished hypothesis's ``score``; its ``log_prob`` (and ``token_log_probs``) is the
    model's own. The search's first free step (one row, nothing to tell apart) is the
    plain beam's, as fairseq's step 0. Sentences are chosen one at a time.
    """

    def __init__(self, inner: Strategy) -> None:
        self.inner = inner

    def top_k(self, options: DecodeOptions) -> int:
        return self.inner.top_k(options)

    def _choose(self, s: SentenceSearch, first: int, values, ids) -> Selection:
        if s.step == len(s.prefix):  # nothing taken yet: the scores are the model's own
            chosen = self.inner._choose(s, *ranked_one(s, first, values, ids))  # type: ignore[attr-defined]
            own = tuple(chosen.scores)
            return chosen._replace(
                own_scores=own, ended_own_scores=tuple(score for _, score in chosen.finished)
            )
        rate = s.options.diversity_rate
        rows, ranked, tokens, raw = ranked_siblings(s, first, values, ids, rate)
        chosen = self.inner._choose(s, rows, ranked, tokens)  # type: ignore[attr-defined]
        step: dict[tuple[int, int], float] = {}
        for key in zip(rows, tokens, raw, strict=True):
            # the first of a (row, token): a step capped at the vocabulary also lists EOS
            # among its top-k, at -inf, after the real one
            step.setdefault(key[:2], key[2])
        before = s.own_scores  # set from the search's first free step on

        def own(row: int, token: int) -> float:
            # float32, as a plain beam adds the same log-probs
            return float(np.float32(before[row]) + np.float32(step.get((row, token), NEG_INF)))

        going_on = zip(chosen.parents, chosen.tokens, strict=True)
        return chosen._replace(
            own_scores=tuple(own(p, t) for p, t in going_on),
            # an EOS a search adds at its length limit unranked (Joey's) is not scored:
            # take() then reads the row's own score, not this
            ended_own_scores=tuple(own(r, s.eos) for r, _ in chosen.finished),
        )


class GroupedBeam(OneByOne):
    """Diverse beam search over the standard beam's rules, or (``capped``) fairseq's, whose
    step finishes no more hypotheses than the sentence still needs."""

    def __init__(self, *, capped: bool) -> None:
        self.capped = capped

    def top_k(self, options: DecodeOptions) -> int:
        return 2 * options.beam_size

    def _choose(self, s: SentenceSearch, first: int, values, ids) -> Selection:
        candidates = self._candidates(s, first, values, ids)
        beam, eos = s.options.beam_size, s.eos
        room = beam - s.finished if self.capped else beam
        # each row's own cumulative log-prob (at the first step nothing was taken yet)
        before = s.scores if s.step == len(s.prefix) else s.own_scores
        parents, tokens, scores, own, finished, ended = [], [], [], [], [], []
        for place, (score, row, token, raw) in enumerate(candidates):
            total = float(np.float32(before[row]) + np.float32(raw))  # as a plain beam adds
            if token == eos:
                # fairseq finishes an EOS among the first beam places, in their order (a
                # -inf one, which only a step capped at the vocabulary lists, never)
                if score != NEG_INF and place < beam and len(finished) < room:
                    finished.append((row, score))
                    ended.append(total)
                continue
            if len(parents) < beam:  # the first beam others, -inf ones too (as fairseq)
                parents.append(row)
                tokens.append(token)
                scores.append(score)
                own.append(total)
        alive = any(score != NEG_INF for score in scores)
        done = s.finished + len(finished) >= beam or not alive
        return Selection(parents, tokens, scores, finished, done,
                         own_scores=tuple(own), ended_own_scores=tuple(ended))  # fmt: skip

    @staticmethod
    def _candidates(
        s: SentenceSearch, first: int, values: np.ndarray, ids: np.ndarray
    ) -> list[tuple[float, int, int, float]]:
        """The step's candidates in fairseq's interleaved order: ``(cumulative score, row,
        token, its log-prob as the model gave it)``."""
        options = s.options
        groups, beam = options.diverse_beam_groups, options.beam_size
        per = 2 * (beam // groups)  # each group's candidates
        strength = np.float32(options.diverse_beam_strength)
        v, i = own_columns(values[first : first + s.rows], ids[first : first + s.rows], s.top_k)
        width = v.shape[1]
        scores = np.asarray(s.scores, dtype=np.float32)
        first_step = s.step == len(s.prefix)
        taken: dict[int, int] = {}  # token -> times among earlier groups' candidates
        picked: list[list[tuple[float, int, int, float]]] = []
        for g in range(groups):
            rows = [0] if first_step else list(range(g, s.rows, groups))
            vg, ig = v[rows], i[rows]
            penalised = vg
            if taken:  # S x the times each candidate's token was taken, (rows, width)
                counts = [[taken.get(t, 0) for t in row] for row in ig.tolist()]
                penalised = vg - strength * np.asarray(counts, dtype=np.float32)
            # at the first step too: after a target prefix its row's score is the prefix's
            total = (scores[rows][:, None] + penalised).ravel()
            order = np.argsort(-total, kind="stable")[:per]
            flat_ids, raw = ig.ravel(), vg.ravel()
            chosen = [
                (float(total[o]), rows[o // width], int(flat_ids[o]), float(raw[o]))
                for o in order.tolist()
            ]
            for _, _, token, _ in chosen:
                taken[token] = taken.get(token, 0) + 1
            picked.append(chosen)
        return [group[r] for r in range(per) for group in picked if r < len(group)]


GROUPED_BEAM = GroupedBeam(capped=False)
GROUPED_FAIRSEQ_BEAM = GroupedBeam(capped=True)
GROUPED = {"standard": GROUPED_BEAM, "fairseq": GROUPED_FAIRSEQ_BEAM}
# One wrapper per beam search, so that the loop groups such sentences together.
SIBLINGS: dict[Strategy, Siblings] = {s: Siblings(s) for s in BEAMS.values()}


def diverse(inner: Strategy, options: DecodeOptions) -> Strategy:
    """The diverse search ``options`` ask for, of the beam search ``inner``."""
    if options.diverse_beam_groups > 1:
        return GROUPED[options.search]
    return SIBLINGS[inner]
