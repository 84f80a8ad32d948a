"""Decode options and results shared by the PyTorch reference and the numpy/ONNX path.

Torch-free on purpose: the service imports this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SEARCHES = ("standard", "eole", "opennmt-py-1", "opennmt-py-2", "joeynmt", "fairseq", "marian",
            "opennmt-tf")  # fmt: skip
# Longest n-gram block_ngram_repeat may name: longer ones never repeat in a sentence the
# length limit allows, and each step scans the hypothesis once per row.
MAX_BLOCK_NGRAM = 32
# The beam searches diverse_beam_groups splits (their rules are fairseq's generator's).
GROUPED_SEARCHES = ("standard", "fairseq")
# How length_penalty divides a finished hypothesis's log-prob (DecodeOptions.length_penalty_form).
LENGTH_PENALTY_FORMS = ("", "average", "gnmt")
# Highest sampling temperature: past it every candidate is about equally likely anyway.
MAX_TEMPERATURE = 100.0
# Highest coverage_penalty β: GNMT's is 0.2; past 100 the penalty of one uncovered source
# position outweighs any log-prob difference already.
MAX_COVERAGE_PENALTY = 100.0
# Highest diversity_rate: past it a hypothesis's second continuation already trails the
# first by more than any log-prob gap, so the beam is one continuation per parent.
MAX_DIVERSITY_RATE = 100.0


class DecodeOptionsError(ValueError):
    """Decode options out of range; the message says which and how to fix it."""


@dataclass(frozen=True)
class DecodeOptions:
    """How to decode one sentence.

    ``beam_size == 1`` is greedy search. The length limit, the EOS rules and the score
    these fields set are :class:`models.scoring.ScoringRules` (``ScoringRules.of``).
    """

    beam_size: int = 1
    n_best: int = 1
    length_penalty: float = 1.0
    max_length: int = 256
    max_length_ratio: float = 2.0
    max_length_offset: int = 10
    min_length: int = 1
    return_attention: bool = False
    # "standard": this project's beam (service.strategies.BEAM); "eole": Eole's /
    # OpenNMT-py 3.x's (service.strategies.EOLE_BEAM), whose scores also count BOS in the
    # length; "opennmt-py-1"/"opennmt-py-2": OpenNMT-py 1.x's/2.x's, Eole's rules but
    # other ends (service.strategies.ONMT_PY1_BEAM, ONMT_PY2_BEAM); "joeynmt": Joey NMT
    # 2.x's (service.strategies.JOEY_BEAM), GNMT's length penalty with beam_size > 1;
    # "fairseq": fairseq's SequenceGenerator (service.strategies.FAIRSEQ_BEAM); "marian":
    # Marian's shrinking beam (service.strategies.MARIAN_BEAM), no EOS at the length limit;
    # "opennmt-tf": OpenNMT-tf 2.x's (service.strategies.ONMT_TF_BEAM), whose finished
    # hypotheses keep their places in the beam until better candidates push them out.
    search: str = "standard"
    # How length_penalty α divides a finished hypothesis's log-prob: "average" by
    # length ** α, "gnmt" by ((5 + length) / 6) ** α (GNMT, Wu et al. 2016; Eole's and
    # OpenNMT-py's -length_penalty wu); "": the search's own (GNMT for Joey NMT's and
    # OpenNMT-tf's, average for the others). models.scoring.ScoringRules.score.
    length_penalty_form: str = ""
    # GNMT coverage penalty β (models.scoring.ScoringRules.score); 0: none.
    coverage_penalty: float = 0.0
    # Never emit the unknown token (Eole/OpenNMT-py ``ban_unk_token``).
    ban_unk: bool = False
    # No n-gram of this many target tokens twice in a hypothesis (Eole/OpenNMT-py
    # ``block_ngram_repeat``); 0: no blocking. ``ignore_when_blocking``: target token ids
    # an n-gram may repeat with (e.g. punctuation). See ScoringRules.banned.
    block_ngram_repeat: int = 0
    ignore_when_blocking: tuple[int, ...] = ()
    # Replace each unknown target token by the source token the hypothesis attended to
    # most at that step (Luong et al. 2015; Eole/OpenNMT-py ``replace_unk``): done when
    # rendering text (service.front), from the attention the loop then keeps.
    replace_unk: bool = False
    # Random sampling (service.strategies.Sampling): each step draws the next token from
    # the ``sampling_topk`` most likely ones (0 or 1: no sampling; the vocabulary size or
    # more: the whole distribution), their probabilities tempered by
    # ``sampling_temperature``; ``beam_size`` samples per sentence, each a row drawn on
    # its own (fairseq's ``--sampling --beam N``), the ``n_best`` best scored returned.
    # ``seed``, the sentence's index in its request and the sample's fix the draws: the
    # same request gives the same translations, whatever else is being decoded.
    sampling_topk: int = 0
    sampling_temperature: float = 1.0
    # Nucleus sampling (Holtzman et al. 2020): of the ``sampling_topk`` candidates, only
    # the most likely ones whose probabilities first add up to ``sampling_topp``; 1.0: all.
    sampling_topp: float = 1.0
    seed: int = 0
    # Each hypothesis's token log-probs (Hypothesis.token_log_probs); the loop then keeps
    # them per live hypothesis, as it keeps attention for return_attention.
    return_token_scores: bool = False
    # A target prefix's log-prob counts in the hypotheses that continue it; False: Eole's
    # search, which resets the log-prob once the prefix is decoded (a model's decoding
    # default, export.eole.EOLE_DECODING; not a request option).
    prefix_scored: bool = True
    # False: a hypothesis at the length limit stops without an EOS: at most max_length - 1
    # tokens, the position the limit keeps for EOS left unscored (Joey's convention), as
    # TensorFlow's tutorial ``evaluate`` loop stops (a model's
    # decoding default, export.keras; Eole's, Joey's and Marian's searches stop so
    # anyway). See ScoringRules.eos_at_limit.
    eos_at_limit: bool = True
    # Diverse siblings (Li et al. 2016, "A Simple, Fast Diverse Decoding Algorithm for
    # Neural Generation"; fairseq's --diversity-rate): each step, the k-th best
    # continuation of a hypothesis loses k * diversity_rate, so a beam keeps fewer
    # continuations of one parent and its n-best list varies more
    # (service.diverse.Siblings); 0: off. Beam search only.
    diversity_rate: float = 0.0
    # Diverse beam search (Vijayakumar et al. 2018; fairseq's --diverse-beam-groups and
    # --diverse-beam-strength, as its release 0.12.2 computes them): the beam split into
    # this many groups of beam_size / groups hypotheses; each step a group's candidates
    # lose diverse_beam_strength for every time an earlier group's candidates hold the
    # same token (service.diverse.GroupedBeam); 0 or 1: off. The standard and fairseq
    # beam searches only.
    diverse_beam_groups: int = 0
    diverse_beam_strength: float = 0.5

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise DecodeOptionsError(f"beam_size must be >= 1, got {self.beam_size}")
        if not 1 <= self.n_best <= self.beam_size:
            raise DecodeOptionsError(
                f"n_best must be between 1 and beam_size ({self.beam_size}), got {self.n_best}"
            )
        if not (math.isfinite(self.length_penalty) and 0.0 <= self.length_penalty <= 5.0):
            raise DecodeOptionsError(f"length_penalty must be in [0, 5], got {self.length_penalty}")
        if self.max_length < 1:
            raise DecodeOptionsError(f"max_length must be >= 1, got {self.max_length}")
        if not (math.isfinite(self.max_length_ratio) and self.max_length_ratio >= 0.0):
            raise DecodeOptionsError(f"max_length_ratio must be >= 0, got {self.max_length_ratio}")
        if self.max_length_offset < 0:
            raise DecodeOptionsError(
                f"max_length_offset must be >= 0, got {self.max_length_offset}"
            )
        if self.min_length < 0:
            raise DecodeOptionsError(f"min_length must be >= 0, got {self.min_length}")
        c = self.coverage_penalty
        if not (math.isfinite(c) and 0.0 <= c <= MAX_COVERAGE_PENALTY):
            # (1e38 made every score -inf and the n-best order meaningless: helper-88)
            raise DecodeOptionsError(
                f"coverage_penalty must be >= 0 and <= {MAX_COVERAGE_PENALTY:g}, got {c}"
            )
        if not 0 <= self.block_ngram_repeat <= MAX_BLOCK_NGRAM:
            raise DecodeOptionsError(
                f"block_ngram_repeat must be between 0 (off) and {MAX_BLOCK_NGRAM}, "
                f"got {self.block_ngram_repeat}"
            )
        if any(i < 0 for i in self.ignore_when_blocking):
            raise DecodeOptionsError(
                f"ignore_when_blocking must hold token ids >= 0, got {self.ignore_when_blocking}"
            )
        if self.sampling_topk < 0:
            raise DecodeOptionsError(
                f"sampling_topk must be >= 0 (0: no sampling), got {self.sampling_topk}"
            )
        t = self.sampling_temperature
        if not (math.isfinite(t) and 0.0 < t <= MAX_TEMPERATURE):
            raise DecodeOptionsError(
                f"sampling_temperature must be in (0, {MAX_TEMPERATURE:g}], got {t}"
            )
        if not (math.isfinite(self.sampling_topp) and 0.0 < self.sampling_topp <= 1.0):
            raise DecodeOptionsError(
                f"sampling_topp must be in (0, 1] (1: no cut), got {self.sampling_topp}"
            )
        if not 0 <= self.seed < 2**64:
            raise DecodeOptionsError(f"seed must be in [0, 2^64), got {self.seed}")
        if self.sampling and self.diverse:
            raise DecodeOptionsError(
                "sampling draws its beam_size samples independently: leave diversity_rate "
                "at 0 and diverse_beam_groups unset, or sampling_topk 0 for a diverse beam"
            )
        d = self.diversity_rate
        if not (math.isfinite(d) and 0.0 <= d <= MAX_DIVERSITY_RATE):
            raise DecodeOptionsError(
                f"diversity_rate must be in [0, {MAX_DIVERSITY_RATE:g}] (0: off), got {d}"
            )
        if d > 0.0 and self.beam_size == 1:
            raise DecodeOptionsError(
                f"diversity_rate {d:g} ranks the continuations of a beam's hypotheses: use "
                "beam_size 2 or more, or diversity_rate 0"
            )
        self._check_groups()
        if self.length_penalty_form not in LENGTH_PENALTY_FORMS:
            raise DecodeOptionsError(
                f"length_penalty_form must be 'average' or 'gnmt' (or '': the search's own), "
                f"got {self.length_penalty_form!r}"
            )
        if self.search not in SEARCHES:
            raise DecodeOptionsError(f"search must be one of {SEARCHES}, got {self.search!r}")
        tf_beam = self.search == "opennmt-tf" and self.beam_size > 1
        if tf_beam and self.length_penalty_form == "average":
            raise DecodeOptionsError(
                "length_penalty_form 'average' does not apply to this model's beam search "
                "(OpenNMT-tf's, which ranks its places by GNMT's penalty): leave it unset or "
                "'gnmt', or use beam_size 1"
            )
        if tf_beam and self.coverage_penalty > 0:
            raise DecodeOptionsError(
                "coverage_penalty does not apply to this model's beam search (OpenNMT-tf's, "
                "which ranks by its places' log-probs): leave it at 0, or use beam_size 1"
            )

    def _check_groups(self) -> None:
        groups, strength = self.diverse_beam_groups, self.diverse_beam_strength
        if not (math.isfinite(strength) and 0.0 <= strength <= MAX_DIVERSITY_RATE):
            raise DecodeOptionsError(
                f"diverse_beam_strength must be in [0, {MAX_DIVERSITY_RATE:g}], got {strength}"
            )
        if groups < 0:
            raise DecodeOptionsError(f"diverse_beam_groups must be >= 0 (0: off), got {groups}")
        if groups <= 1:
            return
        if self.beam_size % groups:
            raise DecodeOptionsError(
                f"diverse_beam_groups {groups} must divide beam_size {self.beam_size}: each "
                "group holds beam_size / groups hypotheses"
            )
        if self.search not in GROUPED_SEARCHES:
            raise DecodeOptionsError(
                f"diverse_beam_groups works with the {' and '.join(GROUPED_SEARCHES)} beam "
                f"searches, not this model's {self.search!r}: use diversity_rate instead"
            )
        if self.diversity_rate > 0.0:
            raise DecodeOptionsError(
                "diverse_beam_groups and diversity_rate are two diverse searches: ask for one"
            )

    @property
    def sampling(self) -> bool:
        """Whether the tokens are drawn at random (``sampling_topk`` > 1)."""
        return self.sampling_topk > 1

    @property
    def diverse(self) -> bool:
        """Whether a diverse beam search decodes (``diversity_rate`` > 0 or
        ``diverse_beam_groups`` > 1: :mod:`service.diverse`)."""
        return self.diversity_rate > 0.0 or self.diverse_beam_groups > 1


@dataclass(frozen=True)
class Hypothesis:
    """One decoded target sentence.

    ``tokens`` exclude BOS and EOS. ``attention`` is ``(len(tokens) + 1, src_len)``:
    one row per generated token, the EOS step included, over real source positions.
    ``token_log_probs``: for a scored (forced) translation or with
    ``return_token_scores``, each token's log-prob, EOS's last (``len(tokens) + 1``, or
    ``len(tokens)`` for a hypothesis a search stopped at its length limit without
    scoring an EOS: Eole's, Joey's, Marian's, OpenNMT-tf's); they add up to ``log_prob``.
    """

    tokens: tuple[int, ...]
    score: float
    log_prob: float
    attention: np.ndarray | None = None
    token_log_probs: tuple[float, ...] | None = None
