"""Decoding options of a request, and the request messages built from them.

:class:`DecodeOptions` holds every field of ``nmt.v1.DecodeOptions``; a field left
``None`` is left to the server (the model's own default, else the documented one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from nmt_api import LENGTH_PENALTY_FORMS
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_client.errors import InvalidOptions

Strategy = Literal["greedy", "beam"]
_STRATEGIES = {"greedy": pb.STRATEGY_GREEDY, "beam": pb.STRATEGY_BEAM}
# for type checkers; the names are LENGTH_PENALTY_FORMS's (a test holds them equal)
PenaltyForm = Literal["average", "gnmt"]
# Fields that are proto3 ``optional`` of the same name: None here is unset there. Read
# from the proto, so a new optional field cannot be left out (each must be a field here).
_OPTIONAL = tuple(f.name for f in pb.DecodeOptions.DESCRIPTOR.fields if f.has_presence)


@dataclass(frozen=True)
class DecodeOptions:
    """How to decode. ``strategy`` ``None``: beam search when ``beam_size > 1``, else
    greedy. ``beam_size`` ``None``: 1 for greedy, the server's default (5) for beam.
    ``n_best``: hypotheses per sentence, best first (at most ``beam_size``).
    ``length_penalty``: score = log-prob / length**lp (server default 1.0).
    ``max_length``: cap on target tokens; ``max_length_ratio``: cap = ratio x source
    tokens + 10 (server default 2.0). ``return_attention``: each hypothesis's attention
    matrix. ``return_scores``: each hypothesis's score and log-prob (unlike the proto's
    default, on unless turned off).

    Values the server could never accept (a negative length, n_best past the beam)
    raise :class:`~nmt_client.errors.InvalidOptions` here (an ``InvalidRequest``, and a
    ``ValueError``); upper limits are the server's to check (INVALID_ARGUMENT)."""

    strategy: Strategy | None = None
    beam_size: int | None = None
    n_best: int | None = None
    length_penalty: float | None = None
    max_length: int | None = None
    max_length_ratio: float | None = None
    return_attention: bool = False
    return_scores: bool = True
    # GNMT coverage penalty beta >= 0 (server default 0: none)
    coverage_penalty: float | None = None
    # Each hypothesis's attention diagnostics (entropy, coverage; Hypothesis.diagnostics)
    return_diagnostics: bool = False
    # Fewest target tokens before EOS (server default: the model's, usually 1)
    min_length: int | None = None
    # Never emit the unknown token (Eole's ban_unk_token; server default: off)
    ban_unk: bool | None = None
    # No n-gram of this many target tokens twice in a hypothesis (0: off, at most 32;
    # server default: off), except n-grams holding a token of ignore_when_blocking
    # (target tokens as Hypothesis.tokens spells them)
    block_ngram_repeat: int | None = None
    ignore_when_blocking: tuple[str, ...] = ()
    # Unknown target tokens become the source tokens they attended to most (Translate only)
    replace_unk: bool = False
    # Random sampling among the sampling_topk most likely tokens (0/None: none),
    # tempered by sampling_temperature (server default 1.0); beam_size samples (unset:
    # n_best of them), the n_best best returned; seed fixes the draws (unset: the server
    # picks one)
    sampling_topk: int | None = None
    sampling_temperature: float | None = None
    # nucleus: of those, the most likely whose probabilities add up to this (default 1.0)
    sampling_topp: float | None = None
    seed: int | None = None
    # Each hypothesis's token log-probs (Hypothesis.token_log_probs), then </s>'s
    return_token_scores: bool = False
    # Each hypothesis's hard alignment (Hypothesis.alignment: per target token, the index
    # in Result.source_pieces of the source token it attended to most)
    return_alignment: bool = False
    # Diverse siblings (Li et al. 2016, fairseq's --diversity-rate), beam only: each step
    # the k-th best continuation of a hypothesis loses k x this from its score (0: off)
    diversity_rate: float | None = None
    # How length_penalty divides the log-prob: "average" (length ** lp) or "gnmt"
    # (((5 + length) / 6) ** lp, Eole's -length_penalty wu); None: the model's
    length_penalty_form: PenaltyForm | None = None
    # Diverse beam search (Vijayakumar et al. 2018, fairseq's --diverse-beam-groups): the
    # beam in this many groups (it must divide beam_size); each step a group's candidates
    # lose diverse_beam_strength (server default 0.5) for each earlier group's same token
    diverse_beam_groups: int | None = None
    diverse_beam_strength: float | None = None

    def __post_init__(self) -> None:
        if self.strategy is not None and self.strategy not in _STRATEGIES:
            raise InvalidOptions(
                f"strategy must be 'greedy', 'beam' or None, got {self.strategy!r}"
            )
        for name in ("beam_size", "n_best", "max_length"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0
            ):
                raise InvalidOptions(
                    f"{name} must be an integer >= 1 (0 or None: the server's default), "
                    f"got {value!r}"
                )
            if value == 0:  # as the proto reads 0
                object.__setattr__(self, name, None)
        if self.strategy == "greedy" and (self.beam_size or 1) > 1:
            raise InvalidOptions(f"strategy 'greedy' with beam_size {self.beam_size}: use 'beam'")
        # None: the server's choice (the model's own beam; 5 for strategy "beam")
        beam = self.beam_size or (1 if self.strategy == "greedy" else None)
        if self.n_best is not None and beam is not None and self.n_best > beam:
            raise InvalidOptions(f"n_best {self.n_best} needs beam_size {self.n_best} or more")
        for name in ("length_penalty", "max_length_ratio", "coverage_penalty", "diversity_rate",
                     "diverse_beam_strength"):  # fmt: skip
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise InvalidOptions(
                    f"{name} must be a finite number >= 0 (or None), got {value!r}"
                )
        _check_form(self.length_penalty_form)
        groups = self.diverse_beam_groups or 0
        if groups > 1 and beam is not None and beam % groups:
            raise InvalidOptions(
                f"diverse_beam_groups {groups} must divide beam_size {beam}: each group holds "
                "beam_size / groups hypotheses"
            )
        if self.diversity_rate and beam == 1:
            raise InvalidOptions(
                f"diversity_rate {self.diversity_rate!r} ranks a beam's continuations: "
                "use beam_size 2 or more"
            )
        t = self.sampling_temperature
        if t is not None and not (math.isfinite(t) and t > 0):
            raise InvalidOptions(f"sampling_temperature must be a finite number > 0, got {t!r}")
        p = self.sampling_topp
        if p is not None and not (math.isfinite(p) and 0 < p <= 1):
            raise InvalidOptions(f"sampling_topp must be in (0, 1], got {p!r}")
        for name in ("min_length", "block_ngram_repeat", "sampling_topk", "seed",
                     "diverse_beam_groups"):  # fmt: skip
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0
            ):
                raise InvalidOptions(f"{name} must be an integer >= 0 (or None), got {value!r}")
        if isinstance(self.ignore_when_blocking, str):
            raise InvalidOptions("ignore_when_blocking is a sequence of tokens: pass [token]")
        object.__setattr__(self, "ignore_when_blocking", tuple(self.ignore_when_blocking))
        if not all(isinstance(t, str) and t for t in self.ignore_when_blocking):
            raise InvalidOptions(
                f"ignore_when_blocking must hold non-empty strings, got {self.ignore_when_blocking}"
            )

    def with_(self, **changes: Any) -> DecodeOptions:
        """A copy with the fields in ``changes`` that are not ``None`` replaced."""
        given = {k: v for k, v in changes.items() if v is not None}
        unknown = set(given) - {f.name for f in fields(self)}
        if unknown:
            raise TypeError(f"unknown decode options: {', '.join(sorted(unknown))}")
        return replace(self, **given) if given else self

    def to_proto(self) -> pb.DecodeOptions:
        """The ``nmt.v1.DecodeOptions`` message."""
        msg = pb.DecodeOptions(
            # unset: beam_size decides, else the model's own beam (greedy for most)
            strategy=_STRATEGIES.get(self.strategy or "", pb.STRATEGY_UNSPECIFIED),
            beam_size=self.beam_size or 0,
            n_best=self.n_best or 0,
            max_length=self.max_length or 0,
            return_attention=self.return_attention,
            return_scores=self.return_scores,
            return_diagnostics=self.return_diagnostics,
        )
        for name in _OPTIONAL:  # None: unset, the server's default
            value = getattr(self, name)
            if value is not None:
                setattr(msg, name, value)
        msg.ignore_when_blocking.extend(self.ignore_when_blocking)
        msg.replace_unk = self.replace_unk
        msg.sampling_topk = self.sampling_topk or 0
        msg.return_token_scores = self.return_token_scores
        msg.return_alignment = self.return_alignment
        if self.length_penalty_form is not None:
            msg.length_penalty_form = LENGTH_PENALTY_FORMS[self.length_penalty_form]
        msg.diverse_beam_groups = self.diverse_beam_groups or 0
        return msg

    @classmethod
    def from_proto(cls, msg: pb.DecodeOptions) -> DecodeOptions:
        """The options a ``nmt.v1.DecodeOptions`` message asks for."""
        strategy = {v: k for k, v in _STRATEGIES.items()}.get(msg.strategy)
        return cls(
            strategy=strategy,
            beam_size=msg.beam_size or None,
            n_best=msg.n_best or None,
            max_length=msg.max_length or None,
            return_attention=msg.return_attention,
            return_scores=msg.return_scores,
            return_diagnostics=msg.return_diagnostics,
            ignore_when_blocking=tuple(msg.ignore_when_blocking),
            replace_unk=msg.replace_unk,
            sampling_topk=msg.sampling_topk or None,
            return_token_scores=msg.return_token_scores,
            return_alignment=msg.return_alignment,
            length_penalty_form=_form_of(msg.length_penalty_form),
            diverse_beam_groups=msg.diverse_beam_groups or None,
            **{name: getattr(msg, name) if msg.HasField(name) else None for name in _OPTIONAL},
        )


def _check_form(form: str | None) -> None:
    if form is not None and form not in LENGTH_PENALTY_FORMS:
        names = ", ".join(repr(name) for name in LENGTH_PENALTY_FORMS)
        raise InvalidOptions(f"length_penalty_form must be one of {names} or None, got {form!r}")


def _form_of(value: int) -> PenaltyForm | None:
    """A proto ``LengthPenaltyForm`` as its name here (unspecified: None)."""
    return next((name for name, v in LENGTH_PENALTY_FORMS.items() if v == value), None)


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list; a bare string is refused (it would be sent letter by letter)."""
    if isinstance(texts, (str, bytes)):
        raise InvalidOptions("texts must be a sequence of sentences, not one string: pass [text]")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise InvalidOptions(f"texts[{i}] is {type(text).__name__}, not str")
    return out


def translate_request(
    texts: Sequence[str],
    options: DecodeOptions | None = None,
    *,
    model: str | None = None,
    target_prefix: Sequence[str] = (),
    constraints: Sequence[Sequence[str]] = (),
    ordered_constraints: bool = False,
    split_sentences: bool = False,
) -> pb.TranslateRequest:
    """The ``nmt.v1.TranslateRequest`` for ``texts`` (for callers that need the raw
    message); ``target_prefix``: each text's forced translation start ("" for none);
    ``constraints``: each text's target phrases its translation must hold (none: an
    empty list), in this order when ``ordered_constraints``; ``split_sentences``: each
    text translated sentence by sentence."""
    if isinstance(target_prefix, str):
        raise InvalidOptions("target_prefix is one string per text: pass a list")
    return pb.TranslateRequest(
        texts=check_texts(texts),
        model=model or "",
        options=(options or DecodeOptions()).to_proto(),
        target_prefix=list(target_prefix),
        constraints=[_constraints(c, ordered_constraints) for c in constraints],
        split_sentences=split_sentences,
    )


def _constraints(phrases: Sequence[str], ordered: bool) -> pb.TargetConstraints:
    if isinstance(phrases, str):
        raise InvalidOptions("constraints are a list of phrases per text: pass a list of lists")
    return pb.TargetConstraints(phrases=list(phrases), ordered=ordered)


def stream_request(
    text: str,
    options: DecodeOptions | None = None,
    *,
    model: str | None = None,
    target_prefix: str = "",
    constraints: Sequence[str] = (),
    ordered_constraints: bool = False,
) -> pb.TranslateStreamRequest:
    """The ``nmt.v1.TranslateStreamRequest`` for one sentence."""
    if not isinstance(text, str):
        raise InvalidOptions(f"text is {type(text).__name__}, not str")
    return pb.TranslateStreamRequest(
        text=text,
        model=model or "",
        options=(options or DecodeOptions()).to_proto(),
        target_prefix=target_prefix,
        constraints=_constraints(constraints, ordered_constraints),
    )


def score_request(
    texts: Sequence[str],
    targets: Sequence[str],
    *,
    length_penalty: float | None = None,
    coverage_penalty: float | None = None,
    return_attention: bool = False,
    return_diagnostics: bool = False,
    model: str | None = None,
    length_penalty_form: PenaltyForm | None = None,
    return_alignment: bool = False,
) -> pb.ScoreRequest:
    """The ``nmt.v1.ScoreRequest`` of ``targets`` (one per text: the translation to
    score); the penalties default to the model's."""
    sources, scored = check_texts(texts), check_texts(targets)
    if len(scored) != len(sources):
        raise InvalidOptions(f"{len(scored)} targets for {len(sources)} texts: give one per text")
    options = pb.ScoreOptions(
        return_attention=return_attention,
        return_diagnostics=return_diagnostics,
        return_alignment=return_alignment,
    )
    if length_penalty is not None:
        options.length_penalty = length_penalty
    if coverage_penalty is not None:
        options.coverage_penalty = coverage_penalty
    _check_form(length_penalty_form)
    if length_penalty_form is not None:
        options.length_penalty_form = LENGTH_PENALTY_FORMS[length_penalty_form]
    return pb.ScoreRequest(texts=sources, targets=scored, model=model or "", options=options)
