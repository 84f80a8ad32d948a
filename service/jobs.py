"""A translation request inside the engine: its options, sentences, deadline, timing and
the future its caller waits on. Torch-free, no ORT: plain bookkeeping."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from models.options import DecodeOptions, DecodeOptionsError, Hypothesis
from service.constraints import Constraints
from service.errors import InvalidRequest

PrefixCallback = Callable[[tuple[int, ...], bool], None]


@dataclass
class Timing:
    submitted: float
    admitted: float | None = None
    encode_seconds: float = 0.0
    finished: float | None = None

    @property
    def queue_ms(self) -> float:
        return 1000 * ((self.admitted or self.submitted) - self.submitted)

    @property
    def decode_ms(self) -> float:
        if self.admitted is None or self.finished is None:
            return 0.0
        return max(0.0, 1000 * (self.finished - self.admitted) - self.encode_ms)

    @property
    def encode_ms(self) -> float:
        return 1000 * self.encode_seconds

    @property
    def total_ms(self) -> float:
        return 1000 * ((self.finished or time.monotonic()) - self.submitted)


@dataclass(eq=False)
class Job:
    """One request in the engine. ``future`` resolves to the n-best lists per sentence."""

    sources: list[list[int]]
    options: DecodeOptions
    deadline: float | None
    on_prefix: PrefixCallback | None = None
    future: Future = field(default_factory=Future)
    results: list[list[Hypothesis] | None] = field(default_factory=list)
    next_sentence: int = 0
    remaining: int = 0
    timing: Timing = field(default_factory=lambda: Timing(time.monotonic()))
    cancelled: bool = False
    on_cancel: Callable[[], None] | None = field(default=None, repr=False)
    # Per sentence, the target token ids its translation is forced to start with.
    prefixes: list[tuple[int, ...]] = field(default_factory=list)
    # Per sentence, the target phrases its translation must hold (None: none).
    constraints: list[Constraints | None] = field(default_factory=list)
    # Per sentence, its key among the request's random draws (sampling): ``(i,)`` for
    # the request's i-th text, ``(i, j)`` for the j-th sentence (j >= 1) of a text cut
    # by ``split_sentences`` (service.decoding.SentenceSearch.draw).
    draw_keys: list[tuple[int, ...]] = field(default_factory=list)
    # Per sentence, its source tokens as written (``replace_unk``); set by the front,
    # which renders the result, and never sent to an engine process.
    surface: list[list[str]] | None = field(default=None, repr=False)
    # With ``split_sentences``, how the request's texts were cut into the sentences
    # decoded (:mod:`service.sentences`); the front joins their results. Front only too.
    splits: list | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.prefixes:
            self.prefixes = [()] * len(self.sources)
        if not self.constraints:
            self.constraints = [None] * len(self.sources)
        if not self.draw_keys:
            self.draw_keys = [(i,) for i in range(len(self.sources))]
        self.results = [None] * len(self.sources)
        self.remaining = len(self.sources)

    @property
    def rows_per_sentence(self) -> int:
        return self.options.beam_size

    def cancel(self) -> None:
        """Called when the client goes away; the scheduler drops it at the next step."""
        self.cancelled = True
        if self.on_cancel is not None and not self.future.done():
            self.on_cancel()


@dataclass(frozen=True)
class TranslationResult:
    """One source sentence's result, ready for the servicer."""

    source_pieces: list[str]
    hypotheses: list[tuple[str, list[str], Hypothesis]]
    source_ids: tuple[int, ...] = ()
    # (first, end): the source_pieces the request's text wrote (service.front.source_span)
    source_span: tuple[int, int] = (0, 0)
    # Per hypothesis: whether it ended at the length limit (ScoringRules.reached_limit).
    at_limit: tuple[bool, ...] = ()


def decode_options(defaults: DecodeOptions | None = None, **fields) -> DecodeOptions:
    """``defaults`` (the model's decoding defaults) with ``fields`` replaced; range
    errors become :class:`InvalidRequest`."""
    try:
        return dataclasses.replace(defaults or DecodeOptions(), **fields)
    except DecodeOptionsError as exc:
        raise InvalidRequest(str(exc)) from None
