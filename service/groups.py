"""Diverse beam search: the beam in groups (Vijayakumar et al. 2018, "Diverse Beam Search:
Decoding Diverse Solutions from Neural Sequence Models"; ``DecodeOptions.diverse_beam_groups``
and ``diverse_beam_strength``).

The rules are fairseq's (``fairseq-interactive --diverse-beam-groups G
--diverse-beam-strength S``) as its release 0.12.2 computes them (later fairseq defaults to
another penalty; its ``DiverseBeamSearch(diversity_discount=0, candidate_multiple=2)`` is
0.12.2's, the one ``tests/fixtures/fairseq/*/groups*.json`` were made with):

* the beam's ``B`` rows are ``G`` groups by position: row ``r`` is in group ``r mod G``
  (at the search's first step every group starts from the one row there is);
* groups choose in order: each ranks its own rows' continuations by cumulative score
  (its rows' scores plus the step's log-probs, float32), every token's log-prob first
  lowered by ``S`` for each time the token is among the candidates earlier groups took at
  this step (Hamming diversity), and takes its best ``2 B / G``;
* the groups' candidates are interleaved rank by rank (the r-th of group g at ``r G + g``)
  and fairseq's generator runs over that list: an EOS among its first ``B`` finishes a
  hypothesis (with fairseq's search no more than the sentence still needs), the first
  ``B`` others go on, in that order, which sets the next step's groups;
* the penalty stays in the cumulative scores the search goes on from, and so in each
  hypothesis's ``score``, as fairseq prints it; its ``log_prob`` is the model's own.

Each row needs its ``2 B`` best candidates (a token earlier groups took may fall out of a
group's ``2 B / G`` best, letting others in), which the decoder returns as it does for the
standard beam. Sentences are chosen one at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from models.options import DecodeOptions
from models.scoring import NEG_INF
from service.ranking import own_columns
from service.strategies import Selection

if TYPE_CHECKING:
    from service.decoding import SentenceSearch


class GroupedBeam:
    """Diverse beam search over the standard beam's rules, or (``capped``) fairseq's, whose
    step finishes no more hypotheses than the sentence still needs."""

    def __init__(self, *, capped: bool) -> None:
        self.capped = capped

    def top_k(self, options: DecodeOptions) -> int:
        return 2 * options.beam_size

    def select(self, searches, first_rows, values, ids) -> list[Selection]:
        return [
            self._choose(s, first, values, ids)
            for s, first in zip(searches, first_rows, strict=True)
        ]

    def _choose(self, s: SentenceSearch, first: int, values, ids) -> Selection:
        candidates = self._candidates(s, first, values, ids)
        beam, eos = s.options.beam_size, s.eos
        room = beam - s.finished if self.capped else beam
        # each row's own cumulative log-prob (at the first step nothing was taken yet)
        before = s.scores if s.step == len(s.prefix) else s.own_scores or [0.0] * s.rows
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
            total = (penalised if first_step else scores[rows][:, None] + penalised).ravel()
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
