"""The translation engine: one scheduler thread owns the decoder.

Requests are split into sentences. At every iteration the scheduler admits queued
sentences (encoded together, a small batch at a time) while the live-row budget
allows, runs **one** decoder step over all live rows of all requests, and retires
sentences that finished, were cancelled or ran past their deadline. A request
never waits for another request to finish: that is iteration-level batching.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from models.options import DecodeOptions, Hypothesis
from service.bundle import Bundle
from service.decoding import Encoded, SentenceSearch, length_groups, make_search, pad_batch
from service.errors import Cancelled, DeadlineExpired, NotReady, Overloaded
from service.jobs import Job, PrefixCallback, Timing, TranslationResult, decode_options
from service.limits import EngineConfig, validate_request
from service.loop import DecodeLoop
from service.metrics import Metrics

log = logging.getLogger(__name__)
DEADLINE_MESSAGE = (
    "the deadline passed before the translation finished: allow a longer deadline, "
    "send fewer sentences or lower max_length"
)

__all__ = [
    "Engine",
    "EngineConfig",
    "Job",
    "PrefixCallback",
    "Timing",
    "TranslationResult",
    "decode_options",
]


@dataclass(frozen=True)
class EncodeOutcome:
    """An admitted batch back from the encoder: ``encoded`` holds ``(group, Encoded)``
    per length group (indices into ``admitted``), or ``error`` says why there is none."""

    admitted: list[tuple[Job, int]]
    encoded: list[tuple[list[int], Encoded]]
    error: BaseException | None


class Engine:
    def __init__(self, bundle: Bundle, config: EngineConfig, metrics: Metrics) -> None:
        self.bundle = bundle
        self.config = config
        self.metrics = metrics
        # The longest source served: the server's limit or, when shorter, the length the
        # export's parity gate verified (its manifest's max_source_tokens).
        verified = bundle.max_source_tokens
        self.max_source_tokens = min(config.max_source_tokens, verified or config.max_source_tokens)
        self._loop = DecodeLoop(bundle.model, bundle.special)
        self._queue: deque[Job] = deque()
        # One lock, two conditions: the scheduler waits on ``_cond`` (new requests,
        # finished encodings), the encoder thread on ``_encoder_cond`` (a batch to encode).
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        self._encoder_cond = threading.Condition(lock)
        # At most one admitted batch is with the encoder at a time: ``_to_encode`` until
        # the encoder thread takes it, ``_encoded`` once it is done, ``_encoding`` from
        # hand-over until the scheduler collects the outcome.
        self._to_encode: list[tuple[Job, int]] | None = None
        self._encoded: EncodeOutcome | None = None
        self._encoding = False
        self._encoder_thread: threading.Thread | None = None
        self._scheduler_done = False
        self._rows_reserved = 0
        # The scheduler scans for cancelled or expired sentences only when a job was
        # cancelled or the earliest deadline among admitted jobs has passed.
        self._cancel_noted = False
        self._next_deadline = math.inf
        self._deferred = 0  # iterations admission was put off (see _admit_now)
        self._accepting = False
        self._stopping = False
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        if self.config.background_encoder:
            self._encoder_thread = threading.Thread(
                target=self._run_encoder, name="nmt-encoder", daemon=True
            )
            self._encoder_thread.start()
        self._thread = threading.Thread(target=self._run, name="nmt-scheduler", daemon=True)
        self._thread.start()
        with self._cond:
            self._accepting = True

    def stop(self, timeout: float | None = None) -> None:
        """Refuse new requests, finish the admitted and queued ones, stop the threads."""
        with self._cond:
            self._accepting = False
            self._stopping = True
            self._cond.notify_all()
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in (self._thread, self._encoder_thread):
            if thread is not None:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                thread.join(left)

    @property
    def accepting(self) -> bool:
        return self._accepting

    # -- requests --------------------------------------------------------------------

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
    ) -> Job:
        """Validate and queue a request; raises if it cannot be queued."""
        return self._enqueue(self.validate(texts, options), options, timeout, on_prefix)

    def _enqueue(
        self,
        sources: list[list[int]],
        options: DecodeOptions,
        timeout: float | None = None,
        on_prefix: PrefixCallback | None = None,
    ) -> Job:
        deadline = None if timeout is None else time.monotonic() + timeout
        job = Job(sources, options, deadline, on_prefix, on_cancel=self._note_cancel)
        with self._cond:
            if not self._accepting:
                self.metrics.rejected.labels("unavailable").inc()
                raise NotReady("the server is not accepting requests (starting or shutting down)")
            if len(self._queue) >= self.config.max_queue:
                self.metrics.rejected.labels("queue_full").inc()
                raise Overloaded(f"request queue is full ({self.config.max_queue} waiting)")
            self._queue.append(job)
            self.metrics.queue_depth.set(len(self._queue))
            self._cond.notify()
        return job

    def _note_cancel(self) -> None:
        self._cancel_noted = True

    def wait(self, job: Job, timeout: float | None = None) -> list[list[Hypothesis]]:
        """Block until ``job`` is done; translate timeouts into :class:`DeadlineExpired`."""
        try:
            return job.future.result(timeout)
        except TimeoutError:
            job.cancel()
            raise DeadlineExpired(DEADLINE_MESSAGE) from None

    def render(self, job: Job, nbest: list[list[Hypothesis]]) -> list[TranslationResult]:
        """Detokenise (in the caller's thread, not the scheduler's)."""
        src_tok, tgt_tok = self.bundle.src_tokenizer, self.bundle.tgt_tokenizer
        out = []
        for ids, hyps in zip(job.sources, nbest, strict=True):
            out.append(
                TranslationResult(
                    source_pieces=src_tok.pieces(ids),
                    hypotheses=[
                        (tgt_tok.decode(h.tokens), tgt_tok.pieces(h.tokens), h) for h in hyps
                    ],
                )
            )
        return out

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
            job = self._enqueue(sources, options, timeout=60)
            self.render(job, self.wait(job, 60))

    # -- scheduler ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._schedule()
        finally:
            with self._cond:  # the encoder thread ends with the scheduler
                self._scheduler_done = True
                self._encoder_cond.notify_all()

    def _schedule(self) -> None:
        while True:
            with self._cond:
                while not self._has_work():
                    self._cond.wait()
                if (
                    self._stopping
                    and not self._queue
                    and not self._loop.active
                    and not self._encoding
                ):
                    return
                admitted = self._admit() if not self._encoding and self._admit_now() else []
                if admitted and self._encoder_thread is not None:
                    self._to_encode, self._encoding = admitted, True
                    self._encoder_cond.notify()
                    admitted = []
                ready, self._encoded = self._encoded, None
                if ready is not None:
                    self._encoding = False
            if admitted:  # no encoder thread: encode here, between two decoder steps
                ready = self._encode_batch(admitted)
            if self._cancel_noted or time.monotonic() > self._next_deadline:
                try:
                    self._drop_dead()
                except Exception as exc:  # noqa: BLE001 - keep serving other requests
                    log.exception("scheduler failure; failing the requests in flight")
                    self._fail_jobs({a.handle[0] for a in self._loop.active}, exc)
            if ready is not None:
                try:
                    self._join(ready)
                except Exception as exc:  # noqa: BLE001
                    log.exception("failure adding encoded sentences; failing their requests")
                    joined = {a.handle for a in self._loop.active}
                    waiting = [h for h in ready.admitted if h not in joined]
                    self._fail_jobs({job for job, _ in ready.admitted}, exc, pending=waiting)
            if self._loop.active:
                try:
                    self._step()
                except Exception as exc:  # noqa: BLE001
                    log.exception("decoder failure; failing the requests in flight")
                    self._fail_jobs({a.handle[0] for a in self._loop.active}, exc)

    def _has_work(self) -> bool:
        """Whether the scheduler can make progress now (lock held). While a batch is
        with the encoder and nothing decodes, it waits for that batch."""
        if self._loop.active or self._encoded is not None:
            return True
        if self._encoding:
            return False
        return bool(self._queue) or self._stopping

    def _run_encoder(self) -> None:
        while True:
            with self._encoder_cond:
                while self._to_encode is None and not self._scheduler_done:
                    self._encoder_cond.wait()
                admitted, self._to_encode = self._to_encode, None
                if admitted is None:
                    return
            outcome = self._encode_batch(admitted)
            with self._cond:
                self._encoded = outcome
                self._cond.notify()

    def _admit_now(self) -> bool:
        """Admit now, or let the queue fill a little while the loop is busy (lock held)."""
        if (
            self._queue
            and self._loop.active
            and len(self._queue) < self.config.admit_batch
            and self._deferred < self.config.admit_wait_steps
        ):
            self._deferred += 1
            return False
        self._deferred = 0
        return True

    def _admit(self) -> list[tuple[Job, int]]:
        """Take queued sentences that fit the row budget (called with the lock held)."""
        taken: list[tuple[Job, int]] = []
        budget = self.config.max_live_rows
        now = time.monotonic()
        while self._queue and len(taken) < self.config.encode_batch_sentences:
            job = self._queue[0]
            if job.cancelled or (job.deadline is not None and now > job.deadline):
                self._queue.popleft()
                self._finish_error(job, None)
                continue
            rows = job.rows_per_sentence
            if self._rows_reserved + rows > budget and (self._rows_reserved or taken):
                break
            if job.timing.admitted is None:
                job.timing.admitted = now
                self.metrics.queue_wait.observe(now - job.timing.submitted)
                if job.deadline is not None:
                    self._next_deadline = min(self._next_deadline, job.deadline)
            taken.append((job, job.next_sentence))
            job.next_sentence += 1
            self._rows_reserved += rows
            if job.next_sentence == len(job.sources):
                self._queue.popleft()
        self.metrics.queue_depth.set(len(self._queue))
        return taken

    def _encode_batch(self, admitted: list[tuple[Job, int]]) -> EncodeOutcome:
        """Encode admitted sentences in length groups (in the encoder thread, or in the
        scheduler's without one). Never raises: a failure is part of the outcome."""
        try:
            sources = [job.sources[i] for job, i in admitted]
            groups = length_groups([len(s) for s in sources], self.config.encode_max_padding)
            start = time.monotonic()
            encoded = []
            for group in groups:
                ids, lengths = pad_batch([sources[i] for i in group], self.bundle.special.pad)
                encoded.append((group, self.bundle.model.encode(ids, lengths)))
            seconds = time.monotonic() - start
            self.metrics.encoder_latency.observe(seconds)
            self.metrics.source_tokens.inc(sum(len(s) for s in sources))
            for job in {job for job, _ in admitted}:
                job.timing.encode_seconds += seconds
            return EncodeOutcome(admitted, encoded, None)
        except Exception as exc:  # noqa: BLE001 - the scheduler fails these requests
            log.exception("encoder failure; failing the requests being admitted")
            return EncodeOutcome(admitted, [], exc)

    def _join(self, outcome: EncodeOutcome) -> None:
        """Add an encoded batch to the decode loop: all its groups or, when its encoding
        failed, none (and only its requests fail; rows already decoding carry on)."""
        admitted = outcome.admitted
        if outcome.error is not None:
            self._fail_jobs({job for job, _ in admitted}, outcome.error, pending=admitted)
            return
        special = self.bundle.special
        for group, enc in outcome.encoded:
            handles = [admitted[i] for i in group]
            searches = [make_search(len(j.sources[i]), j.options, special) for j, i in handles]
            self._loop.add_encoded(enc, searches, handles)
        # A request cancelled, expired or failed while its sentences were being encoded
        # leaves the loop at the next dead-sentence scan; a scan during the encoding
        # did not see its deadline.
        if any(job.cancelled or job.future.done() for job, _ in admitted):
            self._cancel_noted = True
        for job, _ in admitted:
            if job.deadline is not None:
                self._next_deadline = min(self._next_deadline, job.deadline)

    def _step(self) -> None:
        rows = self._loop.live_rows
        start = time.monotonic()
        finished = self._loop.step()
        self.metrics.decoder_step_latency.observe(time.monotonic() - start)
        self.metrics.rows_per_step.observe(rows)
        self.metrics.generated_tokens.inc(rows)
        for active in list(self._loop.active):
            job, _ = active.handle
            if job.on_prefix is not None and not job.future.done():
                try:
                    job.on_prefix(active.search.stable_prefix(), False)
                except Exception as exc:  # noqa: BLE001 - a stream's failure is its own
                    log.exception("failure streaming a prefix; failing its request")
                    self._fail_jobs({job}, exc)
        for (job, i), search in finished:
            # These sentences have left the loop: a failure here must fail their request
            # itself, or it would never resolve and its rows would stay reserved.
            self._rows_reserved -= job.rows_per_sentence
            try:
                self._finish_sentence(job, i, search)
            except Exception as exc:  # noqa: BLE001 - other requests carry on
                log.exception("failure finishing a sentence; failing its request")
                self._fail_jobs({job}, exc)
        self.metrics.live_rows.set(self._loop.live_rows)

    def _finish_sentence(self, job: Job, i: int, search: SentenceSearch) -> None:
        job.results[i] = search.results()
        if job.on_prefix is not None:
            job.on_prefix(search.stable_prefix(), True)
        job.remaining -= 1
        if job.remaining == 0:
            job.timing.finished = time.monotonic()
            best = sum(len(r[0].tokens) + 1 for r in job.results if r)
            self.metrics.target_tokens.observe(best)
            if not job.future.done():
                job.future.set_result(job.results)

    def _drop_dead(self) -> None:
        """Fail admitted jobs that were cancelled or passed their deadline."""
        self._cancel_noted = False
        now = time.monotonic()
        dead, next_deadline = set(), math.inf
        for job, _ in (a.handle for a in self._loop.active):
            if (
                job.cancelled
                or job.future.done()
                or (job.deadline is not None and now > job.deadline)
            ):
                dead.add(job)
            elif job.deadline is not None:
                next_deadline = min(next_deadline, job.deadline)
        self._next_deadline = next_deadline
        if dead:
            self._fail_jobs(dead, None)

    def _finish_error(self, job: Job, exc: BaseException | None) -> None:
        if job.future.done():
            return
        if exc is None:
            exc = (
                Cancelled("the client cancelled")
                if job.cancelled
                else DeadlineExpired(DEADLINE_MESSAGE)
            )
        job.future.set_exception(exc)

    def _fail_jobs(
        self,
        jobs: set[Job],
        exc: BaseException | None,
        *,
        pending: Sequence[tuple[Job, int]] = (),
    ) -> None:
        """Fail ``jobs`` and release every row they hold.

        ``pending`` are admitted sentences that never reached the decode loop (their
        encoding failed): their rows were reserved but are not in the loop. ``exc=None``
        means cancelled or past the deadline.
        """
        handles = {a.handle for a in self._loop.active if a.handle[0] in jobs}
        self._loop.drop(handles)
        with self._cond:
            for job, _ in [*handles, *pending]:
                self._rows_reserved -= job.rows_per_sentence
            # A partly admitted job may still sit in the queue.
            for job in jobs:
                if job in self._queue:
                    self._queue.remove(job)
            self.metrics.queue_depth.set(len(self._queue))
        for job in jobs:
            self._finish_error(job, exc)
        self.metrics.live_rows.set(self._loop.live_rows)
