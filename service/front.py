"""What the servicer and the server call on a model's engine, wherever it runs.

:class:`EngineFront` validates and tokenises a request in the caller's process, hands
the token ids to :meth:`EngineFront.enqueue` (the engine's own: a queue in this process,
:class:`service.engine.Engine`, or a pipe to a child process,
:class:`service.remote.RemoteEngine`), waits for the job's future and detokenises the
result, again in the caller's thread, never the scheduler's.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Sequence

from models.options import DecodeOptions, Hypothesis
from models.scoring import ScoringRules
from service import sentences
from service.alignment import replace_unknowns, source_span
from service.bundle import Bundle
from service.cache import ResponseCache, cacheable, through_cache
from service.constraints import Constraints
from service.errors import DeadlineExpired, InvalidRequest
from service.jobs import Job, PrefixCallback, TranslationResult
from service.limits import (
    EngineConfig,
    validate_constraints,
    validate_prefixes,
    validate_request,
    validate_targets,
)
from service.metrics import Metrics

DEADLINE_MESSAGE = (
    "the deadline passed before the translation finished: allow a longer deadline, "
    "send fewer sentences or lower max_length"
)


def check_forcing(bundle: Bundle) -> None:
    """Raise :class:`InvalidRequest` when ``bundle``'s decoder cannot report a forced
    token's log-prob (:mod:`service.forced`), which ``Score``, target prefixes and
    constraints need."""
    error = getattr(bundle.model, "forcing_error", None)
    if error is not None:
        raise InvalidRequest(
            f"this model cannot score forced tokens ({error}): it serves neither Score "
            "nor target_prefix nor constraints; re-export it with this version's exporter"
        )


class EngineFront(abc.ABC):
    """The request side of an engine; subclasses set ``bundle``, ``config``,
    ``max_source_tokens`` and ``metrics`` and implement :meth:`enqueue`."""

    bundle: Bundle
    config: EngineConfig
    max_source_tokens: int
    metrics: Metrics

    @abc.abstractmethod
    def enqueue(
        self,
        sources: list[list[int]],
        options: DecodeOptions,
        timeout: float | None = None,
        on_prefix: PrefixCallback | None = None,
        prefixes: Sequence[tuple[int, ...]] = (),
        constraints: Sequence[Constraints | None] = (),
        draw_keys: Sequence[tuple[int, ...]] = (),
    ) -> Job:
        """Queue validated ``sources`` (token ids per sentence) and return the job whose
        future the engine resolves; raises :class:`service.errors.NotReady` or
        :class:`service.errors.Overloaded` when it cannot take it. ``timeout``: seconds
        from now; ``prefixes``: each sentence's forced target token ids; ``constraints``:
        each one's target phrases (:mod:`service.constraints`); ``draw_keys``: each one's
        key among the request's random draws (:attr:`service.jobs.Job.draw_keys`)."""

    def validate(self, texts: Sequence[str], options: DecodeOptions) -> list[list[int]]:
        """Tokenise and check limits; raise :class:`InvalidRequest` saying how to fix it."""
        return validate_request(
            texts,
            options,
            self.config,
            self.bundle.src_tokenizer,
            max_source_tokens=self.bundle.max_source_tokens,
        )

    def submit(
        self,
        texts: Sequence[str],
        options: DecodeOptions,
        *,
        timeout: float | None = None,
        on_prefix: PrefixCallback | None = None,
        prefixes: Sequence[str] = (),
        constraints: Sequence[tuple[Sequence[str], bool]] = (),
        split: bool = False,
    ) -> Job:
        """Validate and queue a request; raises if it cannot be queued. ``prefixes``:
        each text's forced target start (target-language text, "" for none);
        ``constraints``: each text's ``(phrases, ordered)``, target-language phrases its
        translation must hold (none: no phrases); ``split``: each text cut into its
        sentences, decoded as sentences of their own (:mod:`service.sentences`; the
        caller refuses what does not combine with it: n-best lists, attention,
        prefixes, constraints)."""
        splits = None
        if split:
            splits = [sentences.split(t) for t in texts]
            texts = sentences.sentences_of(splits)
            limit = self.config.max_sentences_per_request
            if len(texts) > limit:
                fix = "send fewer texts a request" if len(splits) > 1 else "send it in parts"
                held = "the texts hold" if len(splits) > 1 else "texts[0] holds"
                raise InvalidRequest(
                    f"{held} {len(texts)} sentences; the limit is {limit} a request: {fix}"
                )
            try:
                sources = self.validate(texts, options)
            except InvalidRequest as exc:
                raise InvalidRequest(sentences.renamed(str(exc), splits)) from None
        else:
            sources = self.validate(texts, options)
        if any(prefixes) or any(phrases for phrases, _ in constraints):
            check_forcing(self.bundle)
        special, tgt = self.bundle.special, self.bundle.tgt_tokenizer
        forced = validate_prefixes(prefixes, sources, options, tgt, special)
        phrases = validate_constraints(constraints, sources, options, tgt, special, forced)
        surface = None
        if options.replace_unk:  # before queueing: a tokenizer error must not leave a job
            surface = [self.bundle.src_tokenizer.surface(t) for t in texts]
        cache = self.response_cache
        if cache is not None and cacheable(
            options, streamed=on_prefix is not None, prefixes=forced, constraints=phrases
        ):
            job = through_cache(
                cache, sources, options, lambda s: self.enqueue(s, options, timeout)
            )
        else:
            keys = sentences.draw_keys(splits) if splits is not None else ()
            job = self.enqueue(sources, options, timeout, on_prefix, forced, phrases, keys)
        job.surface = surface
        job.splits = splits
        return job

    @functools.cached_property
    def response_cache(self) -> ResponseCache | None:
        """The model's response cache (``--response-cache``), None when off."""
        if not self.config.response_cache:
            return None
        counter = self.metrics.response_cache

        def counted(hit: bool, n: int) -> None:
            counter.labels("hit" if hit else "miss").inc(n)

        return ResponseCache(self.config.response_cache, counted)

    def score(
        self,
        texts: Sequence[str],
        targets: Sequence[str],
        options: DecodeOptions,
        *,
        timeout: float | None = None,
    ) -> Job:
        """Validate and queue a ``Score`` request: each text's target forced whole, EOS
        included (:func:`service.limits.validate_targets`), under ``options``
        (:func:`service.messages.to_score_options`). Its results: one hypothesis per text,
        with ``token_log_probs``."""
        sources = self.validate(texts, options)
        check_forcing(self.bundle)
        tokenizer, special = self.bundle.tgt_tokenizer, self.bundle.special
        forced = validate_targets(targets, sources, options, tokenizer, special)
        return self.enqueue(sources, options, timeout, None, forced)

    def wait(self, job: Job, timeout: float | None = None) -> list[list[Hypothesis]]:
        """Block until ``job`` is done; translate timeouts into :class:`DeadlineExpired`."""
        try:
            return job.future.result(timeout)
        except TimeoutError:
            job.cancel()
            raise DeadlineExpired(DEADLINE_MESSAGE) from None

    def render(self, job: Job, nbest: list[list[Hypothesis]]) -> list[TranslationResult]:
        """Detokenise (in the caller's thread, not the scheduler's); with ``replace_unk``,
        unknown target tokens first become the source tokens they attended to most."""
        src_tok, tgt_tok = self.bundle.src_tokenizer, self.bundle.tgt_tokenizer
        surface = job.surface if job.options.replace_unk else None
        unk, marks = self.bundle.config.unk_id, self.bundle.source_marks
        pad = self.bundle.source_pad
        rules = ScoringRules.of(job.options)
        out = []
        for i, (ids, hyps) in enumerate(zip(job.sources, nbest, strict=True)):
            rendered = []
            for h in hyps:
                pieces = tgt_tok.pieces(h.tokens)
                if surface is not None and unk in h.tokens:
                    pieces = replace_unknowns(pieces, h, surface[i], unk, marks, pad)
                    rendered.append((tgt_tok.detokenize(pieces), pieces, h))
                else:
                    rendered.append((tgt_tok.decode(h.tokens), pieces, h))
            source_pieces = src_tok.pieces(ids)
            out.append(
                TranslationResult(
                    source_pieces=source_pieces,
                    hypotheses=rendered,
                    source_ids=tuple(ids),
                    source_span=source_span(source_pieces, marks, pad),
                    at_limit=tuple(rules.reached_limit(len(h.tokens), len(ids)) for h in hyps),
                )
            )
        return out if job.splits is None else sentences.join(out, job.splits)

    def translate(
        self, texts: Sequence[str], options: DecodeOptions, *, timeout: float | None = None
    ) -> tuple[Job, list[TranslationResult]]:
        job = self.submit(texts, options, timeout=timeout)
        return job, self.render(job, self.wait(job, timeout))

    def warmup(self) -> None:
        """One real translation through the whole path (greedy and beam), its source cut
        to the model's verified length (a request that long would be refused)."""
        sources = [self.bundle.src_tokenizer.encode("Warm up.")[: self.max_source_tokens]]
        for beam in (1, 2):
            options = DecodeOptions(beam_size=beam, return_attention=True)
            job = self.enqueue(sources, options, timeout=60)
            self.render(job, self.wait(job, 60))
