"""Soak and overload a translation server for as long as you like; watch its memory.

``python -m loadtest.soak [--minutes 30] [--clients 16] [--overload 3] [--half-open 0]
[--port P --metrics-port M | --start] [--out loadtest/results/soak-...] [-- SERVER FLAGS]``

``--start`` launches ``nmt-serve`` (``python -m service.server``) as a child process on
free 127.0.0.1 ports, on the CPU, over the committed ``model_repository/`` (flags after
``--`` go to it: ``-- --model-repository DIR --max-inflight 64``), waits for health
SERVING, and at the end stops it with SIGTERM and checks that it exits 0. Without it the
soak targets a server already running on this machine at ``--port`` / ``--metrics-port``
(give ``--pid`` to read its RSS and allocator environment from ``/proc``).

For the whole run:

* ``--clients`` closed-loop clients, each on a connection of its own, send a mix drawn
  from ``models/pretrained/en-es/test.en`` (the BLEU test set): greedy ``Translate``,
  beam 5 n-best 3, ``TranslateStream`` greedy and beam, some with ``return_attention``,
  ``ListModels``, and a small share of bad requests (a body that is not UTF-8, an unknown
  model, a beam over the limit), calls the client cancels mid-call and calls with a short
  deadline (``MIX`` below has the shares);
* ``--overload K``: every ``--overload-period`` seconds from ``--overload-first`` (by
  default 20 s before the warm-up ends, or at 0: the memory baseline comes after one
  burst), for ``--overload-burst`` seconds, K x ``--max-inflight`` more clients send good
  requests back to back; the server refuses the surplus (RESOURCE_EXHAUSTED, counted).
  During a burst the ordinary clients send no short-deadline or cancelled calls: a refusal
  the swamped server sends can reach the client after its 50 ms deadline or its cancel,
  and the server (RESOURCE_EXHAUSTED) and the client (DEADLINE_EXCEEDED, CANCELLED) would
  both be right;
* ``--half-open N``: N ``Translate`` calls that never send their message, renewed as the
  server ends them (``--receive-timeout``, DEADLINE_EXCEEDED);
* a health sampler in a process of its own (so the clients' GIL does not delay it) checks
  ``grpc.health.v1`` every ``--health-every`` seconds.

Every ``--sample-every`` seconds it records the server's RSS (``/proc/<pid>/status`` when
it knows the pid, else ``process_resident_memory_bytes`` from /metrics), the health
window's latencies and failures, the clients' tally and the server's
``nmt_requests_total``; a progress line a minute goes to stderr. At the end it waits for
every call to settle and compares the clients' tally with the server's counter per
(method, code): they must be equal.

The report (``<out>.json``, ``<out>.md``, the markdown printed) gives the RSS after the
warm-up and at the end, the least-squares slope in MB/min over the samples after the
warm-up and over the last half of the run (does it level off?), over every sample and over
those between overload bursts (a burst lifts RSS while it lasts), health p50/p99/max and
failures, throughput, the tally against the counter, the allocator environment of the
server (``MALLOC_*``, ``LD_PRELOAD``, ``GLIBC_TUNABLES``) and the versions. Exit status:
0 when health never failed, the counts match, the server (when started) exited 0 and the
slope is within ``--max-slope`` (when given); 1 otherwise; 2 when it could not run (no
server answering, bad flags), with a one-line error.

The health sampler and the half-open calls come from :mod:`loadtest.hostile` (the
reliability tests' misbehaving clients), which connect to 127.0.0.1: the soak runs
against a server on this machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import multiprocessing
import os
import platform
import queue
import random
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from types import ModuleType

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from loadtest.machine import cpu_name
from models.commands import show_defaults
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc
from nmt_client import DecodeOptions, Translator, TranslatorError, stream_request, translate_request

log = logging.getLogger("loadtest.soak")

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILE = ROOT / "models" / "pretrained" / "en-es" / "test.en"
SERVICE = "nmt.v1.Translator"
CALL_TIMEOUT = 30.0  # deadline of an ordinary call
SHORT_DEADLINE = 0.05  # the "short deadline" calls: far less than a long request takes
CANCEL_AFTER = 0.03  # a cancelled unary call is cancelled this long after it started
UNKNOWN_MODEL = "no-such-model"
OVER_LIMIT_BEAM = 1000
# Environment variables that choose or tune the allocator.
ALLOCATOR_ENV_PREFIXES = ("MALLOC_", "LD_PRELOAD", "GLIBC_TUNABLES", "JE_MALLOC_CONF")
ALLOCATOR_ENV_EXACT = ("MALLOC_CONF", "PYTHONMALLOC")

# What an ordinary client sends: (kind, weight in %). See LoadClient.call.
MIX = (
    ("greedy", 40),  # Translate, one sentence
    ("greedy_batch_attention", 8),  # Translate, 2-4 sentences, attention and scores
    ("beam5_nbest3", 18),  # Translate, beam 5, 3-best with scores
    ("beam5_attention", 4),  # the same with attention
    ("stream_greedy", 12),  # TranslateStream
    ("stream_beam5", 4),
    ("list_models", 1),
    ("bad_utf8_body", 2),  # INVALID_ARGUMENT
    ("unknown_model", 2),  # INVALID_ARGUMENT
    ("beam_over_limit", 2),  # INVALID_ARGUMENT
    ("cancel_unary", 2),  # long Translate, cancelled after CANCEL_AFTER
    ("cancel_stream", 2),  # TranslateStream of a paragraph, cancelled after 1 message
    ("short_deadline", 3),  # long Translate with a SHORT_DEADLINE deadline
)
# Kinds not sent during an overload burst (see the module doc), nor BURST_LEAD s before.
BURST_LEAD = 1.0
NOT_IN_BURSTS = ("short_deadline", "cancel_unary", "cancel_stream")
# Words of the paragraph a cancelled stream translates (about 90 source tokens on the
# committed model, under its 128-token limit).
PARAGRAPH_WORDS = 60
# What an overload client sends: good requests only.
OVERLOAD_MIX = (("greedy", 60), ("beam5_nbest3", 25), ("stream_greedy", 15))


class SoakError(Exception):
    """The soak could not run (one line for the user)."""


def hostile() -> ModuleType:
    """:mod:`loadtest.hostile`, the misbehaving clients."""
    from loadtest import hostile as module

    return module


# -- numbers ---------------------------------------------------------------------------


def slope_per_minute(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of ``(seconds, MB)`` points, in MB per minute; NaN with fewer
    than two points or no spread in time, or when any value is not finite."""
    pts = list(points)
    if len(pts) < 2 or not all(math.isfinite(t) and math.isfinite(v) for t, v in pts):
        return float("nan")
    mt = sum(t for t, _ in pts) / len(pts)
    mv = sum(v for _, v in pts) / len(pts)
    sxx = sum((t - mt) ** 2 for t, _ in pts)
    if sxx == 0:
        return float("nan")
    return 60.0 * sum((t - mt) * (v - mv) for t, v in pts) / sxx


def quantile(values: Sequence[float], q: float) -> float:
    """``hostile.percentile`` (nearest rank from below), NaN for no values."""
    return hostile().percentile(list(values), q) if values else float("nan")


def slope_ok(slope: float, max_slope: float) -> bool:
    """The memory gate: a finite slope at most ``max_slope`` MB/min (NaN, from no
    samples, fails)."""
    return math.isfinite(slope) and math.isfinite(max_slope) and slope <= max_slope


def health_ok(health: dict) -> bool:
    """At least one check, none failed."""
    return health.get("checks", 0) > 0 and health.get("failures", 1) == 0


GAVE_UP = ("CANCELLED", "DEADLINE_EXCEEDED")


def counts_match(client: dict[str, int], server: dict[str, float]) -> bool:
    """Every call counted once: per method the client's and the server's totals are
    equal, and not empty. Codes may differ only for calls the client gave up on
    (CANCELLED, DEADLINE_EXCEEDED) at the moment the server answered: the server counts
    those with its own status, so it can count more of any other code, never fewer."""
    if not client:
        return False
    keys = set(client) | set(server)
    methods = {k.split(" ")[0] for k in keys}
    for method in methods:
        mine = {k: v for k, v in client.items() if k.startswith(method + " ")}
        theirs = {k: v for k, v in server.items() if k.startswith(method + " ")}
        if sum(mine.values()) != sum(theirs.values()):
            return False
    for k in keys:
        gave_up = k.split(" ")[-1] in GAVE_UP
        c, v = client.get(k, 0), server.get(k, 0)
        if (gave_up and v > c) or (not gave_up and v < c):
            return False
    return True


def _round(value: float, digits: int = 2) -> float | None:
    return round(value, digits) if math.isfinite(value) else None


# -- the server ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid: int) -> dict[str, int]:
    """``/proc/<pid>/status`` memory fields in kB (VmRSS, RssAnon, ...) and Threads."""
    out = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.startswith(("Vm", "Rss")) or key == "Threads":
                out[key] = int(value.split()[0])
    return out


def allocator_env(env: dict[str, str]) -> dict[str, str]:
    return {
        k: v
        for k, v in sorted(env.items())
        if k.startswith(ALLOCATOR_ENV_PREFIXES) or k in ALLOCATOR_ENV_EXACT
    }


def proc_environ(pid: int) -> dict[str, str] | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def health_status(port: int, timeout: float = 2.0) -> str:
    """The translator's health status name, or the gRPC code of a failed check."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=timeout)
        except grpc.RpcError as exc:
            return exc.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


class ServerProcess:
    """``nmt-serve`` as a child process on free 127.0.0.1 ports, its log in a file."""

    def __init__(self, extra_args: Sequence[str], log_path: Path) -> None:
        self.port, self.metrics_port = free_port(), free_port()
        self.command = [
            sys.executable,
            "-m",
            "service.server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            str(self.metrics_port),
            "--providers",
            "cpu",
            *extra_args,
        ]
        self.env = dict(os.environ)
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.command, cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.pid = self.proc.pid

    def log_tail(self, lines: int = 1) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace").strip()
        return " | ".join(text.splitlines()[-lines:]) if text else "(no output)"

    def wait_serving(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        status = "no answer"
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise SoakError(
                    f"nmt-serve exited {self.proc.returncode} before serving: {self.log_tail()}"
                )
            status = health_status(self.port)
            if status == "SERVING":
                return
            time.sleep(0.5)
        raise SoakError(f"nmt-serve not SERVING within {timeout:g} s (health: {status})")

    def stop(self, timeout: float) -> int | None:
        """SIGTERM, then its exit status (None: it did not exit within ``timeout`` and
        was killed)."""
        rc: int | None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                rc = None
        else:
            rc = self.proc.returncode
        self._log.close()
        return rc


# -- metrics ---------------------------------------------------------------------------


def scrape(metrics_port: int, timeout: float = 5.0) -> dict:
    """``nmt_requests_total`` per ``"method code"``, the in-flight gauge, refusals and
    ``process_resident_memory_bytes`` from the server's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=timeout) as reply:  # noqa: S310 - local URL
        text = reply.read().decode("utf-8")
    out: dict = {"requests": {}, "rejected": {}, "rss_bytes": None, "inflight": None}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "nmt_requests_total":
                key = f"{s.labels['method']} {s.labels['code']}"
                out["requests"][key] = out["requests"].get(key, 0) + int(s.value)
            elif s.name == "nmt_rejected_requests_total":
                out["rejected"][s.labels["reason"]] = int(s.value)
            elif s.name == "process_resident_memory_bytes":
                out["rss_bytes"] = s.value
            elif s.name == "nmt_inflight_requests":
                out["inflight"] = s.value
    return out


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    keys = set(after) | set(before)
    out = {k: after.get(k, 0) - before.get(k, 0) for k in keys}
    return {k: v for k, v in sorted(out.items()) if v}


# -- the clients -------------------------------------------------------------------------


class Tally:
    """Thread-safe client tally: ``(method, code)``, ``(kind, code)``, latencies of the
    calls that ended OK per kind, sentences translated."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.kinds: Counter[tuple[str, str]] = Counter()
        self.latencies: dict[str, list[float]] = {}
        self.sentences = 0

    def add(self, kind: str, method: str, code: str, seconds: float, sentences: int) -> None:
        with self.lock:
            self.calls[(method, code)] += 1
            self.kinds[(kind, code)] += 1
            if code == "OK":
                self.latencies.setdefault(kind, []).append(seconds)
                self.sentences += sentences

    def by_call(self) -> dict[str, int]:
        with self.lock:
            return {f"{m} {c}": n for (m, c), n in sorted(self.calls.items())}

    def total(self) -> int:
        with self.lock:
            return sum(self.calls.values())


def _code(exc: grpc.RpcError | TranslatorError) -> str:
    code = exc.code if isinstance(exc, TranslatorError) else exc.code()
    return code.name if code is not None else "UNKNOWN"


GREEDY = DecodeOptions(beam_size=1, return_scores=False)
BEAM_NBEST3 = DecodeOptions(beam_size=5, n_best=3, return_scores=False)
# 16 long sentences, beam 5, 3-best: 100 ms and more even on an idle server (8 took
# 50-60 ms there: a cancel 50 ms in could arrive after the reply).
LONG = DecodeOptions(beam_size=5, n_best=3, max_length_ratio=3.0, return_scores=False)


class LoadClient(threading.Thread):
    """One closed-loop client on a connection of its own, drawing each call from
    ``mix`` until ``stop`` is set; every call ends in the tally with the code it saw."""

    def __init__(
        self,
        name: str,
        port: int,
        mix: Sequence[tuple[str, int]],
        sentences: Sequence[str],
        long_sentences: Sequence[str],
        tally: Tally,
        stop: threading.Event,
        seed: int,
        burst: threading.Event | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.burst = burst  # set while an overload burst runs
        self.port = port
        self.kinds = [k for k, _ in mix]
        self.weights = [w for _, w in mix]
        self.sentences = sentences
        self.long_sentences = long_sentences
        self.tally = tally
        self.stop = stop
        self.rng = random.Random(seed)

    def run(self) -> None:
        channel = hostile().own_channel(self.port)
        self.channel = channel
        self.stub = pb_grpc.TranslatorStub(channel)  # for the calls it cancels
        # every call is sent once and counted with the code it ended in: no retries
        self.translator = Translator(
            f"127.0.0.1:{self.port}", channel=channel, retries=0, timeout=CALL_TIMEOUT
        )
        try:
            while not self.stop.is_set():
                kind = self.rng.choices(self.kinds, self.weights)[0]
                while kind in NOT_IN_BURSTS and self.burst is not None and self.burst.is_set():
                    kind = self.rng.choices(self.kinds, self.weights)[0]
                self.call(kind)
        finally:
            channel.close()

    def _texts(self, n: int, long: bool = False) -> list[str]:
        pool = self.long_sentences if long else self.sentences
        return [self.rng.choice(pool) for _ in range(n)]

    def _paragraph(self) -> str:
        words: list[str] = []
        while len(words) < PARAGRAPH_WORDS:
            words += self.rng.choice(self.long_sentences).split()
        return " ".join(words[:PARAGRAPH_WORDS])

    def _long_request(self) -> pb.TranslateRequest:
        """The raw message (its call is cancelled): 16 long sentences, :data:`LONG`."""
        return translate_request(self._texts(16, long=True), LONG)

    def call(self, kind: str) -> None:
        start = time.monotonic()
        method, sentences = "Translate", 1
        stub, translator = self.stub, self.translator
        try:
            if kind == "greedy":
                translator.translate(self._texts(1), options=GREEDY)
            elif kind == "greedy_batch_attention":
                sentences = self.rng.randint(2, 4)
                translator.translate(
                    self._texts(sentences),
                    options=GREEDY,
                    return_attention=True,
                    return_scores=True,
                )
            elif kind in ("beam5_nbest3", "beam5_attention"):
                translator.translate(
                    self._texts(1),
                    options=BEAM_NBEST3,
                    return_scores=True,
                    return_attention=kind == "beam5_attention",
                )
            elif kind in ("stream_greedy", "stream_beam5"):
                method = "TranslateStream"
                options = GREEDY if kind == "stream_greedy" else BEAM_NBEST3
                for _ in translator.stream(self._texts(1)[0], options=options):
                    pass
            elif kind == "list_models":
                method, sentences = "ListModels", 0
                translator.list_models()
            elif kind == "bad_utf8_body":
                h = hostile()
                h.raw_translate(self.channel, h.invalid_utf8_request(), timeout=CALL_TIMEOUT)
            elif kind == "unknown_model":
                translator.translate(self._texts(1), model=UNKNOWN_MODEL, return_scores=False)
            elif kind == "beam_over_limit":
                translator.translate(self._texts(1), beam_size=OVER_LIMIT_BEAM, return_scores=False)
            elif kind == "cancel_unary":
                sentences = 16
                future = stub.Translate.future(self._long_request(), timeout=CALL_TIMEOUT)
                if not future.done():
                    time.sleep(CANCEL_AFTER)  # not stop.wait: the server must see the call
                if future.cancel():
                    self.tally.add(kind, method, "CANCELLED", 0.0, 0)
                    return
                future.result()  # it ended first: its own outcome
            elif kind == "cancel_stream":
                method = "TranslateStream"
                # A paragraph, greedy: its first message comes after one step and
                # dozens of steps remain (22 ms and more on an idle server, against 5 ms
                # for the longest single sentence), so the cancel lands while the server
                # still decodes unless this thread waits that long for the GIL.
                request = stream_request(self._paragraph(), GREEDY)
                call = stub.TranslateStream(request, timeout=CALL_TIMEOUT)
                first = next(call, None)
                if first is not None and not first.final and call.cancel():
                    self.tally.add(kind, method, "CANCELLED", 0.0, 0)
                    return
                for _ in call:  # a one-message translation: it ends on its own
                    pass
            elif kind == "short_deadline":
                sentences = 16
                translator.translate(
                    self._texts(16, long=True), options=LONG, timeout=SHORT_DEADLINE
                )
            else:
                raise ValueError(f"unknown request kind {kind!r}")
            code = "OK"
        except (grpc.RpcError, TranslatorError) as exc:
            code = _code(exc)
        self.tally.add(kind, method, code, time.monotonic() - start, sentences)


def start_clients(
    count: int,
    prefix: str,
    port: int,
    mix: Sequence[tuple[str, int]],
    sentences: Sequence[str],
    long_sentences: Sequence[str],
    tally: Tally,
    stop: threading.Event,
    seed: int,
    burst: threading.Event | None = None,
) -> list[LoadClient]:
    clients = [
        LoadClient(
            f"{prefix}-{i}",
            port,
            mix,
            sentences,
            long_sentences,
            tally,
            stop,
            seed * 100003 + i,
            burst,
        )
        for i in range(count)
    ]
    for c in clients:
        c.start()
    return clients


class OverloadBursts(threading.Thread):
    """``clients`` extra clients for ``burst`` s every ``period`` s, from ``first`` s
    after ``t0`` until ``end`` (monotonic); ``active`` is set while they run."""

    def __init__(
        self,
        clients: int,
        t0: float,
        first: float,
        period: float,
        burst: float,
        end: float,
        stop: threading.Event,
        spawn: Callable[[int, threading.Event], list[LoadClient]],
        active: threading.Event,
    ) -> None:
        super().__init__(name="soak-overload", daemon=True)
        self.clients, self.t0, self.first = clients, t0, first
        self.period, self.burst, self.end = period, burst, end
        self.stop, self.spawn = stop, spawn
        self.bursts: list[tuple[float, float]] = []  # (start, end) seconds after t0
        self.lagging: list[LoadClient] = []
        self.active = active

    def run(self) -> None:
        k = 0
        while True:
            start = self.t0 + self.first + k * self.period
            if start >= self.end or self.stop.wait(max(0.0, start - time.monotonic())):
                return
            until = min(start + self.burst, self.end)
            burst_stop = threading.Event()
            log.info(
                "overload burst %d: %d more clients for %.0f s", k + 1, self.clients, until - start
            )
            self.active.set()
            # Let the ordinary clients' calls in flight end before the first refusal.
            self.stop.wait(BURST_LEAD)
            threads = self.spawn(k, burst_stop)
            self.stop.wait(max(0.0, until - time.monotonic()))
            burst_stop.set()
            for t in threads:
                t.join(CALL_TIMEOUT + 5)
            self.active.clear()
            self.lagging += [t for t in threads if t.is_alive()]
            self.bursts.append((start - self.t0, time.monotonic() - self.t0))
            k += 1


class HalfOpenKeeper(threading.Thread):
    """``count`` half-open calls (:class:`hostile.HalfOpenCalls`) at all times, renewed
    as the server ends them; each ended call goes in the tally with its code."""

    def __init__(self, port: int, count: int, tally: Tally, stop: threading.Event) -> None:
        super().__init__(name="soak-half-open", daemon=True)
        self.port, self.count, self.tally, self.stop = port, count, tally, stop
        self.unsettled = 0

    def _settle(self, batch, timeout: float) -> None:
        end = time.monotonic() + timeout
        for future in batch.futures:
            try:
                exc = future.exception(timeout=max(0.0, end - time.monotonic()))
            except grpc.FutureTimeoutError:
                self.unsettled += 1
                continue
            except grpc.FutureCancelledError:
                exc = None
                code = "CANCELLED"
            else:
                code = "OK" if exc is None else _code(exc)
            self.tally.add("half_open", "Translate", code, 0.0, 0)
        batch.close()

    def run(self) -> None:
        h = hostile()
        while not self.stop.is_set():
            batch = h.HalfOpenCalls(self.port, self.count)
            # The server ends them after --receive-timeout; wait, then renew.
            while not all(f.done() for f in batch.futures):
                if self.stop.wait(0.2):
                    break
            # On stop: the calls still open end on the server's own timeout.
            self._settle(batch, timeout=120.0)


def _window_event(stop, until: float):
    """A stand-in for the ``threading.Event`` that :func:`hostile.health_latencies`
    watches: set at ``until`` (monotonic) or when ``stop`` is."""

    class Window:
        def is_set(self) -> bool:
            return stop.is_set() or time.monotonic() >= until

        def wait(self, timeout: float) -> bool:
            stop.wait(max(0.0, min(timeout, until - time.monotonic())))
            return self.is_set()

    return Window()


def health_child(port: int, every: float, window: float, out, stop) -> None:
    """In a process of its own: :func:`hostile.health_latencies` in windows of
    ``window`` s, each put on ``out`` as ``(end time, results)``; ``None`` last."""
    h = hostile()
    try:
        while not stop.is_set():
            results = h.health_latencies(
                port, _window_event(stop, time.monotonic() + window), every
            )
            out.put((time.time(), results))
    finally:
        out.put(None)


class HealthSampler:
    """The health child process and the windows it reported. The first check of a
    window opens its connection: its latency is kept apart (``first_check_max_ms``)."""

    def __init__(self, port: int, every: float, window: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.out = ctx.Queue()
        self.stop = ctx.Event()
        self.window = window
        self.process = ctx.Process(
            target=health_child,
            args=(port, every, window, self.out, self.stop),
            name="soak-health",
            daemon=True,
        )
        self.process.start()
        self.latencies: list[float] = []
        self.first: list[float] = []
        self.failures: Counter[str] = Counter()
        self.failure_times: list[float] = []
        self.done = False

    def _take(self, item) -> None:
        end, results = item
        for i, r in enumerate(results):
            if isinstance(r, float):
                (self.first if i == 0 else self.latencies).append(r)
            else:
                self.failures[r] += 1
                self.failure_times.append(end)

    def drain(self, block_until: float | None = None) -> None:
        while not self.done:
            try:
                wait = None if block_until is None else max(0.0, block_until - time.monotonic())
                item = (
                    self.out.get(timeout=wait) if block_until is not None else self.out.get_nowait()
                )
            except queue.Empty:
                return
            if item is None:
                self.done = True
            else:
                self._take(item)

    def close(self) -> None:
        self.stop.set()
        self.drain(block_until=time.monotonic() + self.window + 10)
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()

    def summary(self) -> dict:
        lat = self.latencies
        return {
            "checks": len(lat) + len(self.first) + sum(self.failures.values()),
            "failures": sum(self.failures.values()),
            "failure_codes": dict(self.failures),
            "p50_ms": _round(1000 * quantile(lat, 0.50), 3),
            "p99_ms": _round(1000 * quantile(lat, 0.99), 3),
            "max_ms": _round(1000 * max(lat), 3) if lat else None,
            "first_check_max_ms": _round(1000 * max(self.first), 3) if self.first else None,
        }

    def window_summary(self, since: int) -> dict:
        """Checks since index ``since`` of the latencies (the last sample's window)."""
        lat = self.latencies[since:]
        return {
            "health_checks": len(lat),
            "health_p99_ms": _round(1000 * quantile(lat, 0.99), 3),
            "health_max_ms": _round(1000 * max(lat), 3) if lat else None,
            "health_failures": sum(self.failures.values()),
        }


# -- the run ---------------------------------------------------------------------------


@dataclass
class Target:
    port: int
    metrics_port: int
    pid: int | None
    server: ServerProcess | None = None
    env: dict[str, str] | None = field(default=None)


def read_rss(target: Target, metrics: dict | None) -> dict:
    """RSS in MB (from /proc when the pid is known, else /metrics), with /proc's
    anonymous and file-backed parts and thread count when available."""
    out: dict = {"rss_mb": None, "rss_anon_mb": None, "rss_file_mb": None, "threads": None}
    if target.pid is not None:
        try:
            st = proc_status(target.pid)
        except OSError:
            st = {}
        if "VmRSS" in st:
            out["rss_mb"] = round(st["VmRSS"] / 1024, 2)
            out["rss_anon_mb"] = round(st.get("RssAnon", 0) / 1024, 2)
            out["rss_file_mb"] = round(st.get("RssFile", 0) / 1024, 2)
            out["threads"] = st.get("Threads")
            out["rss_source"] = "/proc/<pid>/status VmRSS"
            return out
    if metrics and metrics.get("rss_bytes") is not None:
        out["rss_mb"] = round(metrics["rss_bytes"] / 2**20, 2)
        out["rss_source"] = "process_resident_memory_bytes"
    return out


def versions() -> dict:
    out = {"python": platform.python_version()}
    for dist in ("grpcio", "onnxruntime", "onnxruntime-gpu", "protobuf", "numpy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    out["libc"] = " ".join(platform.libc_ver())
    return out


def shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    argv = list(argv)
    server_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, server_args = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(
        prog="nmt-soak",
        description=__doc__.splitlines()[0],
        epilog="Flags after -- go to nmt-serve (with --start).",
    )
    p.add_argument("--minutes", type=float, default=30.0, help="length of the load")
    p.add_argument("--clients", type=int, default=16, help="closed-loop clients, mixed calls")
    p.add_argument(
        "--overload",
        type=float,
        default=3.0,
        help="overload bursts of K x --max-inflight more clients (0: none)",
    )
    p.add_argument("--overload-period", type=float, default=300.0, help="seconds between bursts")
    p.add_argument("--overload-burst", type=float, default=30.0, help="seconds a burst lasts")
    p.add_argument(
        "--overload-first",
        type=float,
        default=None,
        help="seconds into the run of the first burst (default: so that it ends 20 s "
        "before the warm-up does, or at 0)",
    )
    p.add_argument(
        "--half-open",
        type=int,
        default=0,
        help="Translate calls that never send their message, kept open",
    )
    p.add_argument(
        "--max-inflight",
        type=int,
        default=None,
        help="the server's --max-inflight (default: its value after --, else 120)",
    )
    p.add_argument("--start", action="store_true", help="launch nmt-serve as a child process")
    p.add_argument("--host", default="127.0.0.1", help="the server: this machine only")
    p.add_argument("--port", type=int, default=50051)
    p.add_argument("--metrics-port", type=int, default=9464)
    p.add_argument(
        "--pid",
        type=int,
        default=None,
        help="pid of a server not started here: RSS and environment from /proc",
    )
    p.add_argument("--file", type=Path, default=DEFAULT_FILE, help="one sentence a line")
    p.add_argument(
        "--warmup", type=float, default=60.0, help="seconds of load before the memory baseline"
    )
    p.add_argument("--sample-every", type=float, default=10.0)
    p.add_argument("--health-every", type=float, default=0.05, help="seconds between checks")
    p.add_argument("--progress-every", type=float, default=60.0)
    p.add_argument(
        "--max-slope",
        type=float,
        default=None,
        help="fail unless the last half's RSS slope is at most this many MB/min",
    )
    p.add_argument("--start-timeout", type=float, default=180.0)
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        help="seconds to wait for a server that is not answering",
    )
    p.add_argument(
        "--settle-timeout",
        type=float,
        default=30.0,
        help="seconds for the server's counter to reach the clients' tally",
    )
    p.add_argument(
        "--stop-timeout",
        type=float,
        default=60.0,
        help="seconds nmt-serve may take to exit after SIGTERM",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="write OUT.json and OUT.md")
    args = show_defaults(p).parse_args(argv)
    if server_args and not args.start:
        p.error("server flags after -- need --start")
    if args.host not in ("127.0.0.1", "localhost"):
        p.error(
            "--host: the health sampler and half-open calls (loadtest/hostile.py) "
            "connect to 127.0.0.1; run the soak on the server's machine"
        )
    if not args.minutes > 0 or args.clients < 1 or args.half_open < 0 or args.overload < 0:
        p.error("--minutes and --clients must be positive, --half-open and --overload >= 0")
    if not (
        args.sample_every > 0
        and args.health_every > 0
        and args.overload_period > 0
        and args.overload_burst > 0
        and args.warmup >= 0
    ):
        p.error("intervals must be positive (--warmup >= 0)")
    if args.max_slope is not None and not math.isfinite(args.max_slope):
        p.error("--max-slope must be a finite number")
    if args.max_inflight is None:
        args.max_inflight = _server_flag(server_args, "--max-inflight", 120)
    return args, server_args


def _server_flag(args: Sequence[str], flag: str, default: int) -> int:
    value = default
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            value = int(args[i + 1])
        elif a.startswith(flag + "="):
            value = int(a.split("=", 1)[1])
    return value


def read_sentences(path: Path) -> tuple[list[str], list[str]]:
    try:
        lines = [s.strip() for s in path.read_text(encoding="utf-8").splitlines() if s.strip()]
    except OSError as exc:
        raise SoakError(f"cannot read --file {path}: {exc.strerror}") from None
    if not lines:
        raise SoakError(f"--file {path} has no sentences")
    ordered = sorted(lines, key=len)
    return lines, ordered[len(ordered) * 3 // 4 :]  # the longest quarter, shortest first


def connect(args: argparse.Namespace, server_args: list[str], log_dir: Path) -> Target:
    if args.start:
        log.info("starting nmt-serve %s", shlex.join(server_args))
        server = ServerProcess(server_args, log_dir / "nmt-serve.log")
        try:
            server.wait_serving(args.start_timeout)
        except SoakError:
            server.stop(10)
            raise
        log.info(
            "nmt-serve pid %d SERVING on port %d (metrics %d)",
            server.pid,
            server.port,
            server.metrics_port,
        )
        return Target(server.port, server.metrics_port, server.pid, server, server.env)
    end = time.monotonic() + args.connect_timeout
    status = "no answer"
    while time.monotonic() < end:
        status = health_status(args.port)
        if status == "SERVING":
            break
        time.sleep(0.5)
    else:
        raise SoakError(
            f"no SERVING server on 127.0.0.1:{args.port} within "
            f"{args.connect_timeout:g} s (health: {status})"
        )
    try:
        scrape(args.metrics_port)
    except (OSError, ValueError) as exc:
        raise SoakError(f"no /metrics on 127.0.0.1:{args.metrics_port} ({exc})") from None
    env = proc_environ(args.pid) if args.pid is not None else None
    return Target(args.port, args.metrics_port, args.pid, None, env)


def run(args: argparse.Namespace, server_args: list[str], argv: Sequence[str]) -> dict:
    sentences, long_sentences = read_sentences(args.file)
    log_dir = Path(tempfile.mkdtemp(prefix="nmt-soak-"))
    target = connect(args, server_args, log_dir)
    stop = threading.Event()
    tally = Tally()
    health = None
    clients: list[LoadClient] = []
    overload = keeper = None
    samples: list[dict] = []
    interrupted = False
    server_rc = None
    try:
        before = scrape(target.metrics_port)["requests"]
        health = HealthSampler(target.port, args.health_every, args.sample_every)
        duration = 60.0 * args.minutes
        t0 = time.monotonic()
        end = t0 + duration
        burst = threading.Event()  # set during an overload burst
        clients = start_clients(
            args.clients,
            "soak-client",
            target.port,
            MIX,
            sentences,
            long_sentences,
            tally,
            stop,
            args.seed,
            burst,
        )
        if args.overload > 0:
            extra = max(1, round(args.overload * args.max_inflight))

            def spawn(k: int, burst_stop: threading.Event) -> list[LoadClient]:
                return start_clients(
                    extra,
                    f"soak-overload{k}",
                    target.port,
                    OVERLOAD_MIX,
                    sentences,
                    long_sentences,
                    tally,
                    burst_stop,
                    args.seed + 1 + k,
                )

            first = args.overload_first
            if first is None:
                first = max(0.0, args.warmup - args.overload_burst - 20.0)
            overload = OverloadBursts(
                extra,
                t0,
                first,
                args.overload_period,
                args.overload_burst,
                end,
                stop,
                spawn,
                burst,
            )
            overload.start()
        if args.half_open:
            keeper = HalfOpenKeeper(target.port, args.half_open, tally, stop)
            keeper.start()
        log.info(
            "soak: %d clients for %.1f min (warm-up %.0f s)%s%s",
            args.clients,
            args.minutes,
            args.warmup,
            f", overload bursts of {overload.clients} clients" if overload else "",
            f", {args.half_open} half-open calls" if keeper else "",
        )
        next_sample = t0
        next_progress = t0 + args.progress_every
        health_index = 0
        try:
            while True:
                now = time.monotonic()
                if now >= next_sample:
                    health.drain()
                    samples.append(sample(target, tally, health, health_index, before, now - t0))
                    health_index = len(health.latencies)
                    next_sample += args.sample_every
                if now >= next_progress or now >= end:
                    progress(samples[-1], duration)
                    next_progress += args.progress_every
                if now >= end:
                    break
                time.sleep(max(0.0, min(next_sample, end) - time.monotonic()))
        except KeyboardInterrupt:
            interrupted = True
            log.warning("interrupted: stopping the clients and reporting what ran")
        wall = time.monotonic() - t0
        stop.set()
        log.info("load stopped after %.0f s; waiting for the calls to settle", wall)
        lagging = []
        for c in clients:
            c.join(CALL_TIMEOUT + 5)
            if c.is_alive():
                lagging.append(c.name)
        if overload is not None:
            overload.join(CALL_TIMEOUT + 10)
            lagging += [t.name for t in overload.lagging]
        if keeper is not None:
            keeper.join(130)
        health.close()
        client_counts = tally.by_call()
        server_counts: dict[str, int] = {}
        settle_end = time.monotonic() + args.settle_timeout
        after: dict = {"requests": {}, "rejected": {}}
        while True:
            try:
                after = scrape(target.metrics_port)
            except (OSError, ValueError) as exc:  # the server died: every count differs
                log.error("no /metrics at the end: %s", exc)
                break
            server_counts = delta(after["requests"], before)
            if counts_match(client_counts, server_counts) or time.monotonic() >= settle_end:
                break
            time.sleep(0.5)
        final = sample(target, tally, health, health_index, before, time.monotonic() - t0)
    finally:
        stop.set()
        if health is not None and not health.done:
            health.close()
        if target.server is not None:
            server_rc = target.server.stop(args.stop_timeout)
    result = report(
        args,
        server_args,
        argv,
        target,
        samples,
        final,
        tally,
        health,
        client_counts,
        server_counts,
        after,
        wall,
        interrupted,
        lagging,
        overload,
        keeper,
        server_rc,
    )
    return result


def sample(
    target: Target, tally: Tally, health: HealthSampler, health_index: int, before: dict, t: float
) -> dict:
    try:
        metrics = scrape(target.metrics_port)
    except (OSError, ValueError) as exc:
        log.warning("could not scrape /metrics: %s", exc)
        metrics = None
    row = {"t_s": round(t, 1)} | read_rss(target, metrics)
    row |= health.window_summary(health_index)
    row["client_calls"] = tally.total()
    if metrics is not None:
        row["server_calls"] = sum(delta(metrics["requests"], before).values())
        row["inflight"] = metrics["inflight"]
        row["metrics_rss_mb"] = (
            round(metrics["rss_bytes"] / 2**20, 2) if metrics["rss_bytes"] is not None else None
        )
    return row


def progress(row: dict, duration: float) -> None:
    log.info(
        "soak %.1f/%.1f min: rss %s MB, %d calls, health p99 %s ms, %d health failures",
        row["t_s"] / 60,
        duration / 60,
        row.get("rss_mb"),
        row["client_calls"],
        row.get("health_p99_ms"),
        row.get("health_failures", 0),
    )


def memory(
    samples: list[dict],
    warmup: float,
    wall: float,
    bursts: Sequence[tuple[float, float]] = (),
    tail: float = 10.0,
) -> dict:
    """RSS after the warm-up (the first sample outside a burst) and at the end, and
    least-squares slopes after the warm-up and over the last half of the run: over every
    sample, and over the samples between overload bursts (a burst raises RSS while it
    lasts; samples up to ``tail`` s after one are left out too)."""

    def quiet(t: float) -> bool:
        return not any(a <= t <= b + tail for a, b in bursts)

    pts = [(s["t_s"], s["rss_mb"]) for s in samples if s.get("rss_mb") is not None]
    after = [p for p in pts if p[0] >= warmup]
    last_half = [p for p in pts if p[0] >= wall / 2]
    calm = [p for p in after if quiet(p[0])]
    anon = [
        (s["t_s"], s["rss_anon_mb"])
        for s in samples
        if s.get("rss_anon_mb") is not None and s["t_s"] >= wall / 2
    ]
    return {
        "source": next((s["rss_source"] for s in samples if s.get("rss_source")), None),
        "samples": len(pts),
        "samples_after_warmup": len(after),
        "samples_last_half": len(last_half),
        "rss_start_mb": (calm or after)[0][1] if after else None,
        "rss_start_t_s": (calm or after)[0][0] if after else None,
        "rss_end_mb": pts[-1][1] if pts else None,
        "rss_max_mb": max(v for _, v in pts) if pts else None,
        "rss_quiet_min_last_half_mb": min((v for t, v in calm if t >= wall / 2), default=None),
        "rss_quiet_max_last_half_mb": max((v for t, v in calm if t >= wall / 2), default=None),
        "slope_after_warmup_mb_per_min": _round(slope_per_minute(after), 3),
        "slope_last_half_mb_per_min": _round(slope_per_minute(last_half), 3),
        "quiet_slope_after_warmup_mb_per_min": _round(slope_per_minute(calm), 3),
        "quiet_slope_last_half_mb_per_min": _round(
            slope_per_minute([p for p in calm if p[0] >= wall / 2]), 3
        ),
        "anon_slope_last_half_mb_per_min": _round(slope_per_minute(anon), 3),
    }


def report(
    args,
    server_args,
    argv,
    target: Target,
    samples,
    final,
    tally: Tally,
    health: HealthSampler,
    client_counts,
    server_counts,
    after,
    wall,
    interrupted,
    lagging,
    overload,
    keeper,
    server_rc,
) -> dict:
    mem = memory(samples, args.warmup, wall, overload.bursts if overload else (), args.sample_every)
    hs = health.summary()
    keys = sorted(set(client_counts) | set(server_counts))
    counts = [
        {
            "method": k.split()[0],
            "code": k.split()[1],
            "client": client_counts.get(k, 0),
            "server": server_counts.get(k, 0),
        }
        for k in keys
    ]
    for row in counts:
        row["match"] = row["client"] == row["server"]
    match = counts_match(client_counts, server_counts)
    kinds = {}
    with tally.lock:
        for (kind, code), n in sorted(tally.kinds.items()):
            kinds.setdefault(kind, {"codes": {}})["codes"][code] = n
        for kind, lat in tally.latencies.items():
            kinds[kind] |= {
                "ok_p50_ms": _round(1000 * quantile(lat, 0.5), 1),
                "ok_p99_ms": _round(1000 * quantile(lat, 0.99), 1),
            }
        sentences = tally.sentences
        ok_calls = sum(n for (_, code), n in tally.calls.items() if code == "OK")
    total = sum(client_counts.values())
    env = target.env
    slope = mem["slope_last_half_mb_per_min"]
    slope_value = float("nan") if slope is None else slope
    verdicts = {
        "health_never_failed": health_ok(hs),
        "counts_match": match,
        "server_exit_0": None if target.server is None else server_rc == 0,
        "slope_within_limit": None
        if args.max_slope is None
        else slope_ok(slope_value, args.max_slope),
    }
    lines = [
        f"health never failed ({hs['checks']} checks)"
        if verdicts["health_never_failed"]
        else f"health FAILED: {hs['failures']} of {hs['checks']} checks "
        f"({', '.join(f'{k} {v}' for k, v in hs['failure_codes'].items()) or 'no checks'})",
        f"counts match ({total} calls, {len(keys)} (method, code) pairs; "
        f"{sum(r['client'] - r['server'] for r in counts if r['code'] in GAVE_UP)} that "
        "the client gave up on as the server answered are counted with the server's status)"
        if match
        else "counts DO NOT match: "
        + ", ".join(
            f"{r['method']} {r['code']} client {r['client']} server {r['server']}"
            for r in counts
            if not r["match"]
        )
        or "no calls",
        f"memory slope last half {_fmt(slope, 3)} MB/min (between overload bursts "
        f"{_fmt(mem['quiet_slope_last_half_mb_per_min'], 3)} MB/min)"
        + (
            ""
            if args.max_slope is None
            else f" ({'within' if verdicts['slope_within_limit'] else 'OVER'} --max-slope "
            f"{args.max_slope:g})"
        ),
    ]
    if target.server is not None:
        lines.append(f"nmt-serve exited {server_rc} after SIGTERM")
    server_log = None
    if target.server is not None:
        text = target.server.log_path.read_text(encoding="utf-8", errors="replace")
        server_log = {
            "lines": len(text.splitlines()),
            "errors": sum(" ERROR " in ln or "Traceback" in ln for ln in text.splitlines()),
            "warnings": sum(" WARNING " in ln for ln in text.splitlines()),
            "path": str(target.server.log_path),
            "error_lines": [ln for ln in text.splitlines() if " ERROR " in ln or "Traceback" in ln][
                :10
            ],
        }
    return {
        "settings": {
            "command": shlex.join(["python", "-m", "loadtest.soak", *argv]),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "minutes": args.minutes,
            "clients": args.clients,
            "mix": dict(MIX),
            "overload": args.overload,
            "overload_clients": overload.clients if overload else 0,
            "overload_bursts_s": [[round(a, 1), round(b, 1)] for a, b in overload.bursts]
            if overload
            else [],
            "overload_mix": dict(OVERLOAD_MIX),
            "max_inflight": args.max_inflight,
            "half_open": args.half_open,
            "warmup_s": args.warmup,
            "sample_every_s": args.sample_every,
            "health_every_s": args.health_every,
            "sentence_file": shown(args.file),
            "started_server": target.server is not None,
            "server_command": shlex.join(target.server.command[1:]) if target.server else None,
            "server_pid": target.pid,
            "server_allocator_env": allocator_env(env) if env is not None else None,
            "nproc": os.cpu_count(),
            "affinity": len(os.sched_getaffinity(0)),
            "cpu": cpu_name(),
            "kernel": platform.release(),
            "versions": versions(),
        },
        "verdict": lines,
        "verdicts": verdicts,
        "passed": all(v is not False for v in verdicts.values()),
        "interrupted": interrupted,
        "wall_s": round(wall, 1),
        "memory": mem,
        "health": hs,
        "throughput": {
            "calls": total,
            "calls_per_s": _round(total / wall, 1) if wall > 0 else None,
            "ok_calls": ok_calls,
            "ok_sentences": sentences,
            "ok_sentences_per_s": _round(sentences / wall, 1) if wall > 0 else None,
        },
        "kinds": kinds,
        "counts": counts,
        "rejected": after.get("rejected", {}),
        "unsettled": {"client_threads": lagging, "half_open": keeper.unsettled if keeper else 0},
        "server_log": server_log,
        "samples": samples,
        "final_sample": final,
    }


def _fmt(value, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if digits != 3 else f"{value:.3f}"
    return str(value)


def markdown(r: dict) -> str:
    s, m, h, t = r["settings"], r["memory"], r["health"], r["throughput"]
    v = s["versions"]
    env = s["server_allocator_env"]
    env_text = (
        "unknown (server not started here; give --pid)"
        if env is None
        else ", ".join(f"`{k}={val}`" for k, val in env.items()) or "none (glibc malloc defaults)"
    )
    out = [
        f"# Soak: {s['minutes']:g} min, {s['clients']} clients",
        "",
        f"`{s['command']}`",
        "",
        f"* date {s['date']}; {s['nproc']} CPUs ({s['affinity']} usable), {s['cpu']}; "
        f"Linux {s['kernel']}",
        f"* Python {v['python']}, grpcio {v.get('grpcio', '–')}, onnxruntime "
        f"{v.get('onnxruntime') or v.get('onnxruntime-gpu', '–')}, protobuf "
        f"{v.get('protobuf', '–')}, numpy {v.get('numpy', '–')}, {v['libc']}",
        "* server: "
        + (
            f"`{s['server_command']}` (pid {s['server_pid']})"
            if s["started_server"]
            else f"already running (pid {s['server_pid']})"
        ),
        f"* allocator environment of the server: {env_text}",
        f"* load: {s['clients']} closed-loop clients over `{s['sentence_file']}`; "
        + (
            f"overload bursts of {s['overload_clients']} more clients "
            f"({s['overload']:g} x max-inflight {s['max_inflight']}) at "
            + ", ".join(f"{a:g}–{b:g} s" for a, b in s["overload_bursts_s"])
            if s["overload_clients"]
            else "no overload"
        )
        + f"; {s['half_open']} half-open calls"
        + f"; health checked every {s['health_every_s']:g} s from a process of its own",
        f"* ran {r['wall_s']:g} s" + (" (interrupted)" if r["interrupted"] else ""),
        "",
        "## Verdict",
        "",
        *[f"* {line}" for line in r["verdict"]],
        "",
        "## Memory",
        "",
        f"RSS from {m['source']}, a sample every {s['sample_every_s']:g} s, baseline after "
        f"a {s['warmup_s']:g} s warm-up.",
        "",
        "| | after warm-up | last half |",
        "|---|---|---|",
        f"| RSS slope, every sample | {_fmt(m['slope_after_warmup_mb_per_min'], 3)} MB/min | "
        f"{_fmt(m['slope_last_half_mb_per_min'], 3)} MB/min |",
        f"| RSS slope, between overload bursts | "
        f"{_fmt(m['quiet_slope_after_warmup_mb_per_min'], 3)} MB/min | "
        f"{_fmt(m['quiet_slope_last_half_mb_per_min'], 3)} MB/min |",
        f"| anonymous RSS slope, every sample | – | "
        f"{_fmt(m['anon_slope_last_half_mb_per_min'], 3)} MB/min |",
        "",
        f"RSS after the warm-up {_fmt(m['rss_start_mb'])} MB (t={_fmt(m['rss_start_t_s'])} s), "
        f"at the end {_fmt(m['rss_end_mb'])} MB, at most {_fmt(m['rss_max_mb'])} MB; between "
        f"bursts in the last half {_fmt(m['rss_quiet_min_last_half_mb'])}–"
        f"{_fmt(m['rss_quiet_max_last_half_mb'])} MB.",
        "",
        "## Health checks",
        "",
        "| checks | failures | p50 ms | p99 ms | max ms | first check of a connection, max ms |",
        "|---|---|---|---|---|---|",
        f"| {h['checks']} | {h['failures']} {h['failure_codes'] or ''} | {_fmt(h['p50_ms'], 3)} "
        f"| {_fmt(h['p99_ms'], 3)} | {_fmt(h['max_ms'], 3)} | {_fmt(h['first_check_max_ms'], 3)} |",
        "",
        "## Throughput",
        "",
        f"{t['calls']} calls ({_fmt(t['calls_per_s'])}/s), {t['ok_calls']} OK, "
        f"{t['ok_sentences']} sentences translated ({_fmt(t['ok_sentences_per_s'])}/s). "
        f"Server refusals: "
        + ", ".join(f"{k} {v_}" for k, v_ in sorted(r["rejected"].items()))
        + ".",
        "",
        "| kind | codes | OK p50 ms | OK p99 ms |",
        "|---|---|---|---|",
        *[
            f"| {k} | {', '.join(f'{c} {n}' for c, n in d['codes'].items())} | "
            f"{_fmt(d.get('ok_p50_ms'))} | {_fmt(d.get('ok_p99_ms'))} |"
            for k, d in r["kinds"].items()
        ],
        "",
        "## Client tally vs nmt_requests_total",
        "",
        "| method | code | clients saw | server counted | |",
        "|---|---|---|---|---|",
        *[
            f"| {c['method']} | {c['code']} | {c['client']} | {c['server']} | "
            f"{'=' if c['match'] else 'DIFFERENT'} |"
            for c in r["counts"]
        ],
    ]
    if r["server_log"] is not None:
        sl = r["server_log"]
        out += [
            "",
            f"Server log: {sl['lines']} lines, {sl['warnings']} warnings, {sl['errors']} errors.",
        ]
        out += [f"    {line}" for line in sl["error_lines"]]
    if r["unsettled"]["client_threads"] or r["unsettled"]["half_open"]:
        out += ["", f"Unsettled at the end: {r['unsettled']}"]
    shown_rows, minutes = [], set()
    for x in r["samples"]:
        if int(x["t_s"] // 60) not in minutes:
            minutes.add(int(x["t_s"] // 60))
            shown_rows.append(x)
    if r["samples"] and r["samples"][-1] is not shown_rows[-1]:
        shown_rows.append(r["samples"][-1])
    out += [
        "",
        "## Samples (the first of each minute; every sample is in the JSON)",
        "",
        "| t s | RSS MB | anon MB | file MB | threads | calls | health p99 ms | "
        "health max ms | in flight |",
        "|---|---|---|---|---|---|---|---|---|",
        *[
            f"| {x['t_s']:g} | {_fmt(x.get('rss_mb'))} | {_fmt(x.get('rss_anon_mb'))} | "
            f"{_fmt(x.get('rss_file_mb'))} | {_fmt(x.get('threads'))} | {x['client_calls']} | "
            f"{_fmt(x.get('health_p99_ms'), 3)} | {_fmt(x.get('health_max_ms'), 3)} | "
            f"{_fmt(x.get('inflight'), 0)} |"
            for x in shown_rows
        ],
    ]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, server_args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr
    )
    try:
        hostile()
        result = run(args, server_args, argv)
    except SoakError as exc:
        print(f"nmt-soak: error: {exc}", file=sys.stderr)
        return 2
    text = markdown(result)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        Path(f"{args.out}.md").write_text(text, encoding="utf-8")
        Path(f"{args.out}.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
        log.info("wrote %s.md and %s.json", args.out, args.out)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
