"""The engine's limits (:class:`EngineConfig`) and the checks a request must pass
against them before it is queued. Torch-free, no ORT."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from models.options import DecodeOptions
from models.scoring import ScoringRules
from models.tokenizer import Tokenizer
from service.constraints import Constraints
from service.decoding import SpecialIds
from service.errors import InvalidRequest

# A source text longer than this many characters per allowed token cannot fit.
MAX_CHARS_PER_TOKEN = 64


# The longest duration any setting takes, in seconds: gRPC's channel arguments hold
# milliseconds in a C int (2**31 - 1 ms, about 24.8 days); time.sleep and the event loop
# refuse infinity too.
MAX_SECONDS = 2_147_483
# The most sentences a response cache may keep per model (each n-best list a few KB, more
# with attention kept: a million would be gigabytes).
MAX_RESPONSE_CACHE = 1_000_000
# The shortest stall_timeout: a decoder step on a loaded machine may take a good part of it.
MIN_STALL_SECONDS = 1.0


# A request's length limit when it sets none (max_length), whatever a model allows.
DEFAULT_MAX_LENGTH = 256


@dataclass(frozen=True)
class EngineConfig:
    # Hypothesis rows decoded together in one step (0: the device's default, LIVE_ROWS);
    # a request needs sentences x beam_size of them.
    max_live_rows: int = 0
    max_queue: int = 128
    max_sentences_per_request: int = 64
    max_source_tokens: int = 128
    max_beam_size: int = 16
    max_n_best: int = 16
    # Largest sampling_topk: a step asks the decoder for as many candidates for every
    # row it decodes, so one request sampling from thousands slows all the others (1/8
    # of the sentences sampling from all 8,000 tokens halved greedy throughput).
    max_sampling_topk: int = 100
    max_target_length: int = 512
    # Sentences whose n-best lists each model's front keeps to answer a repeat without
    # decoding it (service/cache.py); 0: no cache.
    response_cache: int = 0
    # Admission (None: the device's default, ADMISSION): sentences encoded per admission,
    # padding tokens an encoder batch may carry before it is split (see length_groups),
    # and, while sentences are decoding, how many queued requests are admitted at once
    # (or after they have waited admit_wait_steps decoder steps).
    encode_batch_sentences: int | None = None
    encode_max_padding: int | None = None
    admit_batch: int | None = None
    admit_wait_steps: int = 2
    # Encode admitted sentences on a thread of their own while the scheduler keeps
    # stepping the decoder: an encoder call then no longer stalls every live row, and
    # the two ONNX Runtime calls run on two cores at once.
    background_encoder: bool = True
    # Engines (scheduler, decode loop, encoder thread each) sharing the model's sessions,
    # each decoding its own requests (service/lanes.py); 0: auto (2 on a CPU with two
    # cores or more, 1 on CUDA).
    decode_lanes: int = 0
    # Engine.health() reports a stall once the scheduler has completed no iteration for
    # this many seconds while requests are queued or decoding. A CPU decoder step takes
    # milliseconds; warm-up and the longest encodes take far less than this.
    stall_timeout: float = 30.0

    @property
    def default_max_length(self) -> int:
        """The length limit of a request that sets no ``max_length`` (EOS counted):
        :data:`DEFAULT_MAX_LENGTH`, or ``max_target_length`` if lower (a model's own
        decoding default may lower it further: :func:`service.messages.to_options`)."""
        return min(DEFAULT_MAX_LENGTH, self.max_target_length)

    def __post_init__(self) -> None:
        if self.max_live_rows < 0:
            raise ValueError(f"max_live_rows must be >= 0 (0: auto), got {self.max_live_rows}")
        for name in (
            "max_queue",
            "max_sentences_per_request",
            "max_source_tokens",
            "max_beam_size",
            "max_n_best",
            "max_sampling_topk",
            "max_target_length",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("encode_batch_sentences", "admit_batch"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.decode_lanes < 0:
            raise ValueError(f"decode_lanes must be >= 0 (0: auto), got {self.decode_lanes}")
        if not 0 <= self.response_cache <= MAX_RESPONSE_CACHE:
            raise ValueError(
                f"response_cache must be 0 (off) to {MAX_RESPONSE_CACHE:,} sentences, "
                f"got {self.response_cache}"
            )
        for name in ("encode_max_padding", "admit_wait_steps"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        # (NaN fails too; below a second, a slow beam step under load killed a healthy
        # server: --stall-timeout 0.05 did, helper-89)
        if not MIN_STALL_SECONDS <= self.stall_timeout <= MAX_SECONDS:
            raise ValueError(
                f"stall_timeout must be >= {MIN_STALL_SECONDS:g} and <= {MAX_SECONDS} seconds, "
                f"got {self.stall_timeout}"
            )
        if self.max_live_rows and self.max_beam_size > self.max_live_rows:
            raise ValueError("max_beam_size cannot exceed max_live_rows")

    def for_device(self, gpu: bool) -> EngineConfig:
        """This config with the settings left to the device (admission at None,
        ``max_live_rows`` at 0) set for the device the engine's model runs on
        (:data:`ADMISSION`, :data:`LIVE_ROWS`)."""
        defaults = {k: v for k, v in ADMISSION[gpu].items() if getattr(self, k) is None}
        if not self.max_live_rows:
            defaults["max_live_rows"] = max(LIVE_ROWS[gpu], self.max_beam_size)
        return dataclasses.replace(self, **defaults)


# Admission defaults by device (EngineConfig.for_device). On the CPU an encoder call
# costs in proportion to its batch and padding, and one on one or two short sentences
# several times more per sentence than on eight. On a GPU a call costs ~2 ms whatever
# its batch (launch-bound) and padding is nearly free: with 16 / 16 / 8 an H100 decoded
# 25-30 rows a step with 256 clients waiting. A sweep there (2026-11-26, a scratch
# script, not kept) gave 1.2-2.4x the greedy sentences/s with 128 / 128 / 32 and two
# front ends; the bench's A/B against the previous settings, one front end: 1.04-1.14x
# (README, Performance on a GPU). An encoder call on CUDA is host-bound: 1.3 ms of wall
# for 0.22 ms of GPU kernels at one sentence, 0.38 ms at 32 (about a hundred launches of
# the GRU's per-step kernels; stepbench 1.4-1.6 ms from 1 to 32 sentences), so splitting
# an admission into length groups multiplies that cost while padding is nearly free: a
# batch is split there only past 4,096 padding tokens (1.06x beam 5, greedy even, three
# interleaved rounds, loadtest/results/bench-gpu-h100-encoder-rounds).
ADMISSION: dict[bool, dict[str, int]] = {
    False: {"encode_batch_sentences": 16, "encode_max_padding": 16, "admit_batch": 8},
    True: {"encode_batch_sentences": 128, "encode_max_padding": 4096, "admit_batch": 32},
}


# max_live_rows by device (EngineConfig.for_device). On a GPU a decoder step costs
# about the same for 600 rows as for 130 (0.96-1.3 ms on an H100), so more rows a step
# is nearly free throughput: with 1,024 the H100 decoded 600 beam-5 rows a step instead
# of 187 and gave 1.4-1.6x the beam sentences/s of 256 (2,048 gave no more); on the CPU
# a step's cost grows with its rows and 256 keeps latency in bounds (README, Performance
# on a GPU; loadtest/results/bench-gpu-h100-liverows*.json).
LIVE_ROWS: dict[bool, int] = {False: 256, True: 1024}


def validate_request(
    texts: Sequence[str],
    options: DecodeOptions,
    cfg: EngineConfig,
    tokenizer: Tokenizer,
    *,
    max_source_tokens: int | None = None,
    first_index: int = 0,
) -> list[list[int]]:
    """Tokenise and check limits; raise :class:`InvalidRequest` saying how to fix it.

    ``max_source_tokens``: the source length the model's export was verified up to (its
    manifest); a sentence may not exceed it nor ``cfg.max_source_tokens``.
    ``first_index``: what the messages call ``texts[0]`` is ``texts[first_index]`` (a
    caller that checks its input in slices names the line of the whole input).
    """
    limit = min(cfg.max_source_tokens, max_source_tokens or cfg.max_source_tokens)
    if not texts:
        raise InvalidRequest("no texts given: send at least one sentence in `texts`")
    if len(texts) > cfg.max_sentences_per_request:
        raise InvalidRequest(
            f"{len(texts)} sentences in one request; the limit is "
            f"{cfg.max_sentences_per_request}: split the request"
        )
    if options.beam_size > cfg.max_beam_size:
        what = "samples a sentence (beam_size, else n_best)" if options.sampling else "beam_size"
        raise InvalidRequest(
            f"{what} {options.beam_size} > max {cfg.max_beam_size}: "
            f"use beam_size <= {cfg.max_beam_size}"
        )
    if options.n_best > cfg.max_n_best:
        raise InvalidRequest(
            f"n_best {options.n_best} > max {cfg.max_n_best}: use n_best <= {cfg.max_n_best}"
        )
    if options.sampling_topk > cfg.max_sampling_topk:
        raise InvalidRequest(
            f"sampling_topk {options.sampling_topk} > max {cfg.max_sampling_topk}: use "
            f"sampling_topk <= {cfg.max_sampling_topk} (the server's --max-sampling-topk)"
        )
    if options.max_length > cfg.max_target_length:
        raise InvalidRequest(
            f"max_length {options.max_length} > server limit {cfg.max_target_length}: "
            f"use max_length <= {cfg.max_target_length} (or 0 for the default)"
        )
    rules = ScoringRules.of(options)
    sources = []
    for i, text in enumerate(texts, start=first_index):
        # Refused by its length before tokenising it: a megabyte of text would cost
        # every request in flight its tokenisation time first.
        if len(text) > limit * MAX_CHARS_PER_TOKEN:
            raise InvalidRequest(
                f"texts[{i}] has {len(text)} characters; the limit is "
                f"{limit * MAX_CHARS_PER_TOKEN} ({limit} source tokens): split the text"
            )
        if not text.strip():
            raise InvalidRequest(f"texts[{i}] is empty or whitespace only: send non-empty text")
        ids = tokenizer.encode(text)
        if not ids:
            raise InvalidRequest(
                f"texts[{i}] has no tokens after tokenisation: send text in the source language"
            )
        if len(ids) > limit:
            why = (
                f"the limit is {limit}"
                if limit == cfg.max_source_tokens
                else f"the model was verified up to {limit} source tokens"
            )
            raise InvalidRequest(
                f"texts[{i}] has {len(ids)} source tokens; {why}: split the sentence"
            )
        _check_min_length(i, len(ids), options, rules)
        sources.append(ids)
    if len(sources) * options.beam_size > cfg.max_live_rows:
        raise InvalidRequest(
            f"{len(sources)} sentences x beam {options.beam_size} needs more rows than "
            f"the server's max_live_rows ({cfg.max_live_rows}): send at most "
            f"{cfg.max_live_rows // options.beam_size} sentences per request at this beam size"
        )
    return sources


def _check_min_length(i: int, src_len: int, options: DecodeOptions, rules: ScoringRules) -> None:
    """A ``min_length`` the sentence's length limit leaves no room for is refused (as
    fairseq refuses ``--min-len`` over its ``max_len``): the limit would win, and a request
    for 1000 tokens got back a translation padded to the limit with whatever the model
    ranked next, or, at ``max_length`` 1, nothing."""
    limit = rules.length_limit(src_len)
    if options.min_length < limit:
        return
    ratio = f"{options.max_length_ratio:g} x {src_len} source tokens + {options.max_length_offset}"
    raise InvalidRequest(
        f"texts[{i}]: min_length {options.min_length} leaves no room before the length "
        f"limit, {limit} target tokens with EOS (the least of max_length "
        f"{options.max_length} and {ratio}): lower min_length below {limit}, or raise "
        "max_length or max_length_ratio"
    )


def validate_prefixes(
    prefixes: Sequence[str],
    sources: Sequence[Sequence[int]],
    options: DecodeOptions,
    tokenizer: Tokenizer,
    special: SpecialIds | None = None,
) -> list[tuple[int, ...]]:
    """Each sentence's forced target prefix as target token ids, ``()`` for none; raise
    :class:`InvalidRequest` saying how to fix an impossible one (a prefix holding one of
    the ``special`` tokens a model never produces, EOS among them, too).

    ``prefixes`` align with ``sources`` (the validated source ids); fewer prefixes than
    sentences leave the rest without one, an empty string is none. ``tokenizer`` is the
    *target* tokenizer. A prefix must leave room for EOS under the sentence's length
    limit (:meth:`models.scoring.ScoringRules.length_limit`).
    """
    if len(prefixes) > len(sources):
        raise InvalidRequest(
            f"{len(prefixes)} target prefixes for {len(sources)} texts: send at most one "
            "per text (an empty string for none)"
        )
    rules = ScoringRules.of(options)
    out: list[tuple[int, ...]] = []
    for i, src in enumerate(sources):
        text = prefixes[i] if i < len(prefixes) else ""
        if not text:
            out.append(())
            continue
        ids = tuple(tokenizer.encode(text))
        if not ids:
            raise InvalidRequest(
                f"target_prefix[{i}] has no tokens after tokenisation: send text in the "
                "target language, or an empty string for no prefix"
            )
        if special is not None:
            _refuse_specials(f"target_prefix[{i}]", ids, special)
        limit = rules.length_limit(len(src))
        if len(ids) >= limit:
            raise InvalidRequest(
                f"target_prefix[{i}] has {len(ids)} target tokens; texts[{i}] allows at most "
                f"{limit - 1} before EOS (max_length / max_length_ratio): shorten the prefix "
                "or raise the length limit"
            )
        out.append(ids)
    return out


# Phrases a request may give one text: fairseq's search keeps one state per hypothesis,
# and a step ranks each live row's continuation by every token that starts or goes on
# with a phrase
MAX_CONSTRAINTS = 16


def validate_constraints(
    constraints: Sequence[tuple[Sequence[str], bool]],
    sources: Sequence[Sequence[int]],
    options: DecodeOptions,
    tokenizer: Tokenizer,
    special: SpecialIds,
    prefixes: Sequence[Sequence[int]] = (),
    *,
    first_index: int = 0,
) -> list[Constraints | None]:
    """Each sentence's :class:`service.constraints.Constraints` (None: none) from its
    ``(phrases, ordered)`` (aligned with ``sources``; fewer leave the rest without);
    raise :class:`InvalidRequest` saying how to fix impossible ones: a phrase with no
    tokens, a special token or a word the target vocabulary lacks (it could only be met
    as the unknown token), more phrases or tokens than the length limit leaves room for,
    a text with a target prefix too, or sampling. ``tokenizer`` is the *target* one;
    ``first_index``: the index of ``sources[0]`` in its request (errors name it)."""
    if len(constraints) > len(sources):
        raise InvalidRequest(
            f"{len(constraints)} constraint sets for {len(sources)} texts: send at most one "
            "per text (no phrases for none)"
        )
    rules = ScoringRules.of(options)
    out: list[Constraints | None] = []
    for i, src in enumerate(sources):
        phrases, ordered = constraints[i] if i < len(constraints) else ((), False)
        if not phrases:
            out.append(None)
            continue
        where = f"constraints[{first_index + i}]"
        if options.sampling:
            raise InvalidRequest(
                f"{where}: constraints are decoded by beam search; leave sampling_topk and "
                "sampling_topp unset (beam_size 1 or more)"
            )
        if options.diverse:
            raise InvalidRequest(
                f"{where}: constraints are decoded by their own beam search, which is not "
                "diverse; leave diversity_rate at 0 and diverse_beam_groups unset"
            )
        if i < len(prefixes) and prefixes[i]:
            raise InvalidRequest(
                f"{where}: texts[{first_index + i}] has a target_prefix too; send one or the other"
            )
        if len(phrases) > MAX_CONSTRAINTS:
            raise InvalidRequest(
                f"{where} has {len(phrases)} phrases; at most {MAX_CONSTRAINTS} per text"
            )
        encoded = []
        for k, phrase in enumerate(phrases):
            ids = tuple(tokenizer.encode(phrase))
            if not ids:
                raise InvalidRequest(
                    f"{where}.phrases[{k}] has no tokens after tokenisation: send text in "
                    "the target language"
                )
            _refuse_specials(f"{where}.phrases[{k}]", ids, special)
            if special.unk >= 0 and special.unk in ids:
                raise InvalidRequest(
                    f"{where}.phrases[{k}] ({phrase!r}) has a word the target vocabulary "
                    "lacks: the model could only write it as the unknown token"
                )
            encoded.append(ids)
        limit = rules.length_limit(len(src))
        total = sum(map(len, encoded))
        if total >= limit:
            raise InvalidRequest(
                f"{where} has {total} target tokens; texts[{first_index + i}] allows at most "
                f"{limit - 1} before EOS (max_length / max_length_ratio): fewer phrases "
                "or a higher length limit"
            )
        out.append(Constraints(tuple(encoded), ordered))
    return out


def validate_targets(
    targets: Sequence[str],
    sources: Sequence[Sequence[int]],
    options: DecodeOptions,
    tokenizer: Tokenizer,
    special: SpecialIds,
    *,
    first_index: int = 0,
) -> list[tuple[int, ...]]:
    """The ``Score`` RPC's targets as whole forced translations: each one's target token
    ids followed by EOS (:class:`service.strategies.Prefix`); raise
    :class:`InvalidRequest` saying how to fix an impossible one. One target per source
    (the validated ``sources``); ``""`` scores EOS alone. ``tokenizer`` is the *target*
    tokenizer; a target may hold at most ``options.max_length`` tokens, EOS counted, and
    none of the ``special`` tokens a model never produces (EOS, BOS, padding).
    ``first_index``: what the messages call ``targets[0]``, as in :func:`validate_request`."""
    if len(targets) != len(sources):
        raise InvalidRequest(
            f"{len(targets)} targets for {len(sources)} texts: send exactly one target per "
            "text, the translation to score"
        )
    limit = options.max_length
    out: list[tuple[int, ...]] = []
    for i, text in enumerate(targets, start=first_index):
        if len(text) > limit * MAX_CHARS_PER_TOKEN:
            raise InvalidRequest(
                f"targets[{i}] has {len(text)} characters; the limit is "
                f"{limit * MAX_CHARS_PER_TOKEN} ({limit} target tokens): split the pair"
            )
        ids = tuple(tokenizer.encode(text)) if text.strip() else ()
        _refuse_specials(f"targets[{i}]", ids, special)
        if len(ids) + 1 > limit:
            raise InvalidRequest(
                f"targets[{i}] has {len(ids)} target tokens; at most {limit - 1} before EOS "
                f"(the server's --max-target-length {limit}): split the pair"
            )
        out.append((*ids, special.eos))
    return out


def _refuse_specials(what: str, ids: Sequence[int], special: SpecialIds) -> None:
    """Refuse ``ids`` holding EOS, BOS or padding: tokens no decoder step produces (the
    graph ranks them at -inf), which a text can spell in a word vocabulary (``</s>``)."""
    names = {special.eos: "end-of-sentence", special.bos: "start", special.pad: "padding"}
    found = next((names[t] for t in ids if t in names), None)
    if found is not None:
        raise InvalidRequest(
            f"{what} tokenises to the {found} token, which the model never produces: "
            "remove that marker from the text"
        )
