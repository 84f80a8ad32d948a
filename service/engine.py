"""The translation engine: one scheduler thread owns the decoder.

Requests are split into sentences. At every iteration the scheduler admits queued
sentences (encoded together, a small batch at a time) while the live-row budget
allows, runs **one** decoder step over all live rows of all requests, and retires
sentences that finished, were cancelled or ran past their deadline. A request
never waits for another request to finish: that is iteration-level batching.

Faults stay with the request that causes them: a decoder step or an encoder batch that
raises is retried on parts of its rows (bisected by request or sentence) and only the
requests that make it fail on their own fail (:class:`EngineFailure`); the others carry
on with the very results they would have had. An exception that escapes the scheduler
or the encoder thread (a bug) fails every request and leaves the engine dead, which
:meth:`Engine.health` reports, as it reports a scheduler that stopped making progress.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Sequence

from models.options import DecodeOptions
from service.bundle import Bundle
from service.constraints import Constraints
from service.decoding import SentenceSearch, make_search
from service.encoding import EncodeOutcome, encode_admitted
from service.errors import (
    Cancelled,
    DeadlineExpired,
    EngineFailure,
    NotReady,
    Overloaded,
    internal_failure,
    one_line,
)
from service.front import DEADLINE_MESSAGE, EngineFront
from service.jobs import Job, PrefixCallback, Timing, TranslationResult, decode_options
from service.limits import EngineConfig
from service.loop import DecodeLoop, isolate_failures
from service.metrics import Metrics

log = logging.getLogger(__name__)

# How long stop() waits, past its timeout, for the threads to leave the ONNX Runtime call
# they are in (one decoder step or encoder call: well under a second, bar a hang)
ABANDON_SECONDS = 10.0
SHUT_DOWN_MESSAGE = "the server shut down before this request finished: send it again"

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineFailure",
    "Job",
    "PrefixCallback",
    "Timing",
    "TranslationResult",
    "decode_options",
]


class EncoderThreadFailed(Exception):
    """Raised in the scheduler when the encoder thread died (``__cause__``: why)."""


class Engine(EngineFront):
    """A model's engine in this process: the scheduler and encoder threads over its ORT
    sessions (:class:`service.remote.RemoteEngine` runs one in a child process)."""

    def __init__(self, bundle: Bundle, config: EngineConfig, metrics: Metrics) -> None:
        self.bundle = bundle
        # admission settings left to the device: its own (limits.ADMISSION)
        self.config = config.for_device(bundle.model.provider == "CUDAExecutionProvider")
        self.metrics = metrics
        # The longest source served: the server's limit or, when shorter, the length the
        # export's parity gate verified (its manifest's max_source_tokens).
        verified = bundle.max_source_tokens
        self.max_source_tokens = min(config.max_source_tokens, verified or config.max_source_tokens)
        self._loop = DecodeLoop(
            bundle.model, bundle.special, max_top_k=bundle.config.tgt_vocab_size
        )
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
        # stop()'s time ran out: the scheduler fails what is left and ends (see stop)
        self._abandoned = False
        # whose queue a refusal names, when it is a share of --max-queue (service/lanes.py)
        self.queue_owner = ""
        self._thread: threading.Thread | None = None
        # The admitted batch that has not joined the loop yet (scheduler thread only).
        self._unjoined: list[tuple[Job, int]] = []
        # A decoder step failed and passed when retried; the next failure is not retried.
        self._step_retried = False
        # Watchdog state (see health): the time the scheduler last completed an
        # iteration (or had nothing to do), why the engine died, and an exception that
        # ended the encoder thread (the scheduler then fails everything and ends).
        self._progress = time.monotonic()
        self._failure: str | None = None
        self._fatal: BaseException | None = None
        # What this engine added to the live_rows and queue_depth gauges: several engines
        # of one model (decode lanes, service/lanes.py) share them, so each moves them by
        # its own change instead of setting them.
        self._gauges = {"live_rows": 0, "queue_depth": 0}

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        self._progress = time.monotonic()
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
        """Refuse new requests, finish the admitted and queued ones within ``timeout``
        seconds (None: however long they take), stop the threads. What is left when the
        time runs out fails with :class:`NotReady`, and the threads are waited for while
        they finish the ONNX Runtime call they are in (:data:`ABANDON_SECONDS` at most): a
        process that exits with a thread inside ONNX Runtime aborts (SIGABRT, "terminate
        called without an active exception") instead of exiting 0."""
        with self._cond:
            self._accepting = False
            self._stopping = True
            self._cond.notify_all()
        deadline = None if timeout is None else time.monotonic() + timeout
        self._join_threads(deadline)
        if not self._threads_alive():
            return
        with self._cond:
            self._abandoned = True
            self._cond.notify_all()
        self._join_threads(time.monotonic() + ABANDON_SECONDS)
        if self._threads_alive():
            log.error(
                "the engine's threads did not end within %g s of the shutdown grace",
                ABANDON_SECONDS,
            )

    def _join_threads(self, deadline: float | None) -> None:
        for thread in (self._thread, self._encoder_thread):
            if thread is not None:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                thread.join(left)

    def _threads_alive(self) -> bool:
        return any(t is not None and t.is_alive() for t in (self._thread, self._encoder_thread))

    @property
    def accepting(self) -> bool:
        return self._accepting

    def health(self) -> str | None:
        """``None`` while the engine works, else one line saying why it does not.

        Meant for a watchdog thread (any thread may call it; it takes no lock and costs
        microseconds). Between :meth:`start` and :meth:`stop` it reports:

        * the scheduler or the encoder thread no longer running. An unexpected exception
          ended it (a bug; logged with its traceback): every queued and live request was
          failed with :class:`EngineFailure` and new ones are refused with
          :class:`NotReady`. This is permanent.
        * a stall: no scheduler iteration completed for more than
          ``config.stall_timeout`` seconds while requests are queued, being encoded or
          decoding (a hung ONNX Runtime call, a deadlock). Requests then wait until their
          deadline. It clears if the scheduler moves again, but a server should treat it
          as fatal too: report NOT_SERVING and exit, so that it is restarted.

        Before :meth:`start` and once :meth:`stop` began it returns ``None``.
        """
        thread = self._thread
        if thread is None or self._stopping:
            return None
        if self._failure is not None:
            return self._failure
        if not thread.is_alive():
            return "the scheduler thread is no longer running"
        encoder = self._encoder_thread
        if encoder is not None and not encoder.is_alive():
            return "the encoder thread is no longer running"
        idle = time.monotonic() - self._progress
        if idle > self.config.stall_timeout:
            # a batch with the encoder thread, or being encoded by the scheduler itself
            encoding = self._encoding or bool(self._unjoined)
            queued, rows = len(self._queue), self._loop.live_rows
            if queued or rows or encoding or self._loop.active:
                busy = f"{queued} requests queued, {rows} rows decoding"
                if encoding:
                    busy += ", a batch being encoded"
                return (
                    f"the scheduler has made no progress for {idle:.0f} s "
                    f"(stall_timeout {self.config.stall_timeout:g} s) with {busy}"
                )
        return None

    # -- requests --------------------------------------------------------------------

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
        deadline = None if timeout is None else time.monotonic() + timeout
        job = Job(
            sources,
            options,
            deadline,
            on_prefix,
            on_cancel=self._note_cancel,
            prefixes=list(prefixes),
            constraints=list(constraints),
            draw_keys=list(draw_keys),
        )
        with self._cond:
            if not self._accepting:
                self.metrics.rejected.labels("unavailable").inc()
                if self._failure is not None:
                    raise NotReady(f"the translation engine failed: {self._failure}")
                raise NotReady("the server is not accepting requests (starting or shutting down)")
            if len(self._queue) >= self.config.max_queue:
                self.metrics.rejected.labels("queue_full").inc()
                raise Overloaded(
                    f"request queue is full ({self.config.max_queue} waiting{self.queue_owner})"
                )
            if not (self._queue or self._encoding or self._loop.active):
                # The scheduler had nothing to do: its stall clock starts now.
                self._progress = time.monotonic()
            self._queue.append(job)
            self._gauge("queue_depth", len(self._queue))
            self._cond.notify()
        return job

    def _note_cancel(self) -> None:
        self._cancel_noted = True

    def _gauge(self, name: str, value: int) -> None:
        """Set this engine's share of the gauge ``name`` to ``value``."""
        change = value - self._gauges[name]
        if change:
            self._gauges[name] = value
            getattr(self.metrics, name).inc(change)

    @property
    def load(self) -> int:
        """Rows admitted or waiting: where decode lanes (service/lanes.py) send the next
        request."""
        with self._cond:
            queued = sum(
                (len(job.sources) - job.next_sentence) * job.rows_per_sentence
                for job in self._queue
            )
            return self._rows_reserved + queued

    @property
    def idle(self) -> bool:
        """No row reserved and nothing queued, read without the lock (it may be held by
        the caller: a job's done callback runs where its future resolves). A hint: the
        engine process sends a reply straight from the scheduler thread when idle."""
        return not self._rows_reserved and not self._queue

    # -- scheduler ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._schedule()
        except BaseException as exc:  # noqa: BLE001 - a bug: fail everything, stay dead
            self._crash(exc)
        finally:
            with self._cond:  # the encoder thread ends with the scheduler
                self._scheduler_done = True
                self._encoder_cond.notify_all()

    def _schedule(self) -> None:
        while True:
            with self._cond:
                while not self._has_work():
                    self._cond.wait()
                if self._fatal is not None:
                    raise EncoderThreadFailed("the encoder thread failed") from self._fatal
                if self._abandoned:
                    left = self._take_all_jobs()
                    break
                if (
                    self._stopping
                    and not self._queue
                    and not self._loop.active
                    and not self._encoding
                ):
                    return
                admitted = self._admit() if not self._encoding and self._admit_now() else []
                if admitted:
                    self._unjoined = admitted
                if admitted and self._hand_over():
                    self._to_encode, self._encoding = admitted, True
                    self._encoder_cond.notify()
                    admitted = []
                ready, self._encoded = self._encoded, None
                if ready is not None:
                    self._encoding = False
            if admitted:  # encode here: nothing to overlap, or no encoder thread
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
                self._unjoined = []
                ready = None  # joined: its encoder outputs may be written again
            if self._loop.active:
                try:
                    self._step()
                except Exception as exc:  # noqa: BLE001
                    log.exception("decoder failure; failing the requests in flight")
                    self._fail_jobs({a.handle[0] for a in self._loop.active}, exc)
            self._progress = time.monotonic()
        for job in left:
            self._finish_error(job, NotReady(SHUT_DOWN_MESSAGE))

    def _crash(self, exc: BaseException) -> None:
        """An exception escaped the scheduler (or ended the encoder thread): fail every
        queued, admitted and live request, refuse new ones, and let the thread end."""
        if isinstance(exc, EncoderThreadFailed) and exc.__cause__ is not None:
            cause, where = exc.__cause__, "encoder"  # logged by the encoder thread
        else:
            cause, where = exc, "scheduler"
            log.critical(
                "the scheduler thread failed; failing every request, the engine is dead",
                exc_info=exc,
            )
        try:
            with self._cond:
                self._failure = f"the {where} thread failed: {one_line(cause)}"
                self._accepting = False
                jobs = self._take_all_jobs()
            for job in jobs:
                self._finish_error(job, internal_failure("in the translation engine", cause))
        except BaseException:  # noqa: BLE001 - health() still reports the dead thread
            log.exception("failure failing the requests of a dead scheduler")

    def _take_all_jobs(self) -> list[Job]:
        """Every queued, admitted and live request, the queue emptied (lock held)."""
        jobs = list(self._queue)
        self._queue.clear()
        for batch in (self._unjoined, self._to_encode or []):
            jobs += [job for job, _ in batch]
        if self._encoded is not None:
            jobs += [job for job, _ in self._encoded.admitted]
        self._gauge("queue_depth", 0)
        self._gauge("live_rows", 0)  # the engine ends: no row of it decodes any more
        jobs += [a.handle[0] for a in self._loop.active]
        return list(dict.fromkeys(jobs))

    def _has_work(self) -> bool:
        """Whether the scheduler can make progress now (lock held). While a batch is
        with the encoder and nothing decodes, it waits for that batch."""
        if self._loop.active or self._encoded is not None or self._fatal is not None:
            return True
        if self._abandoned:
            return True
        if self._encoding:
            return False
        return bool(self._queue) or self._stopping

    def _hand_over(self) -> bool:
        """Whether an admitted batch goes to the encoder thread (lock held): while rows
        decode, so that the encoder call overlaps their steps. With nothing decoding the
        scheduler would only wait for the batch, so it encodes it itself, two thread
        hand-overs sooner (~0.1 ms each on a 2-core VM), unless the encoder's CUDA graphs
        belong to the encoder thread (service/encodergraphs.py)."""
        if self._encoder_thread is None:
            return False
        return bool(self._loop.active) or self.bundle.model.encoder_graphs is not None

    def _run_encoder(self) -> None:
        try:
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
                # not held while the next batch encodes: fixed encoder outputs are written
                # again only once nothing refers to them (service/encodergraphs.py)
                outcome = None
        except BaseException as exc:  # noqa: BLE001 - a bug: the scheduler fails everything
            log.critical(
                "the encoder thread failed; failing every request, the engine is dead",
                exc_info=exc,
            )
            with self._cond:
                self._fatal = exc
                self._cond.notify_all()

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
        self._gauge("queue_depth", len(self._queue))
        return taken

    def _encode_batch(self, admitted: list[tuple[Job, int]]) -> EncodeOutcome:
        """Encode admitted sentences (in the encoder thread, or in the scheduler's
        without one) and count them. Never raises: a failure is part of the outcome."""
        start = time.monotonic()
        bundle = self.bundle
        outcome = encode_admitted(
            bundle.model, bundle.special.pad, self.config.encode_max_padding, admitted
        )
        try:
            seconds = time.monotonic() - start
            self.metrics.encoder_latency.observe(seconds)
            self.metrics.source_tokens.inc(outcome.source_tokens)
            for job in {job for job, _ in admitted}:
                job.timing.encode_seconds += seconds
        except Exception as exc:  # noqa: BLE001 - the scheduler fails these requests
            log.exception("encoder failure; failing the requests being admitted")
            return EncodeOutcome(admitted, [], tuple(range(len(admitted))), exc)
        return outcome

    def _join(self, outcome: EncodeOutcome) -> None:
        """Add an encoded batch to the decode loop; the requests of sentences that could
        not be encoded fail (rows already decoding carry on)."""
        admitted = outcome.admitted
        special = self.bundle.special
        for group, enc in outcome.encoded:
            handles = [admitted[i] for i in group]
            searches = [
                make_search(
                    len(j.sources[i]),
                    j.options,
                    special,
                    j.prefixes[i],
                    j.draw_keys[i],
                    j.constraints[i],
                )
                for j, i in handles
            ]
            self._loop.add_encoded(enc, searches, handles)
        if outcome.failed:
            # Their sentences that did encode have just joined and leave again here.
            failure = internal_failure("encoding this request", outcome.error)
            pending = [admitted[i] for i in outcome.failed]
            self._fail_jobs({job for job, _ in pending}, failure, pending=pending)
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
        failed: list[tuple[tuple[Job, int], Exception]] = []
        try:
            finished = self._loop.step(failed)
        except Exception as exc:  # noqa: BLE001 - the loop is as it was: isolate the fault
            self._isolate(exc)
            return
        self._step_retried = False
        self.metrics.decoder_step_latency.observe(time.monotonic() - start)
        self.metrics.rows_per_step.observe(rows)
        self.metrics.generated_tokens.inc(self._loop.last_tokens)
        # Before any request below resolves: a client that has its answer reads a gauge
        # without its rows (the finished and failed sentences have left the loop).
        self._gauge("live_rows", self._loop.live_rows)
        for (job, _), exc in failed:
            # This sentence's search raised taking its result and left the loop.
            log.error("failure advancing a sentence's search; failing its request", exc_info=exc)
            self._rows_reserved -= job.rows_per_sentence
            self._fail_jobs({job}, internal_failure("decoding this request", exc))
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

    def _isolate(self, exc: Exception) -> None:
        """The decoder step over every live row raised ``exc`` and changed nothing: fail
        only the requests whose rows make it fail on their own (found by bisecting the
        requests in flight, see :func:`isolate_failures`); the others take the step at
        the next iteration, exactly as it would have been. Logged once."""
        groups: dict[Job, list] = {}
        for active in self._loop.active:
            groups.setdefault(active.handle[0], []).append(active)

        def fails(jobs: list[Job]) -> bool:
            try:
                self._loop.probe([a for job in jobs for a in groups[job]])
            except Exception:  # noqa: BLE001 - the probe's answer
                return True
            return False

        bad = isolate_failures(list(groups), fails, confirm=not self._step_retried)
        if not bad:
            self._step_retried = True
            log.warning("a decoder step failed but passed when retried; carrying on", exc_info=exc)
            return
        log.error(
            "decoder step failure: failing %d of %d requests in flight (their rows make "
            "the step fail)",
            len(bad),
            len(groups),
            exc_info=exc,
        )
        self._fail_jobs(set(bad), internal_failure("decoding this request", exc))

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
            self._gauge("queue_depth", len(self._queue))
        self._gauge("live_rows", self._loop.live_rows)  # before the requests resolve
        for job in jobs:
            self._finish_error(job, exc)
