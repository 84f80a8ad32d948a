"""Watching a server under soak: ``nmt-serve`` started as a child process on free
127.0.0.1 ports (:class:`ServerProcess`) or one already running (:class:`Target`), its
health checked in a process of its own so that the load's GIL does not delay the checks
(:class:`HealthSampler`, over :func:`hostile.health_latencies`), its /metrics scraped
(``nmt_requests_total``, refusals, calls in flight, RSS) and, when its pid is known, its
RSS, threads and allocator environment read from ``/proc/<pid>``; with
:class:`SoakError`, the one-line error when the soak cannot run, and the numbers the
health summary shares with the report (:func:`quantile`, :func:`_round`)."""

from __future__ import annotations

import math
import multiprocessing
import os
import queue
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
SERVICE = "nmt.v1.Translator"
# Environment variables that choose or tune the allocator.
ALLOCATOR_ENV_PREFIXES = ("MALLOC_", "LD_PRELOAD", "GLIBC_TUNABLES", "JE_MALLOC_CONF")
ALLOCATOR_ENV_EXACT = ("MALLOC_CONF", "PYTHONMALLOC")


class SoakError(Exception):
    """The soak could not run (one line for the user)."""


def hostile() -> ModuleType:
    """:mod:`loadtest.hostile`, the misbehaving clients."""
    from loadtest import hostile as module

    return module


# -- numbers ---------------------------------------------------------------------------


def quantile(values: Sequence[float], q: float) -> float:
    """``hostile.percentile`` (nearest rank from below), NaN for no values."""
    return hostile().percentile(list(values), q) if values else float("nan")


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
    """``nmt_requests_total`` per ``"method code"``, the in-flight gauge, refusals,
    ``process_resident_memory_bytes`` and the collector's passes (``gc``: see
    :func:`gc_pauses`) from the server's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=timeout) as reply:  # noqa: S310 - local URL
        text = reply.read().decode("utf-8")
    out: dict = {"requests": {}, "rejected": {}, "rss_bytes": None, "inflight": None, "gc": {}}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("nmt_gc_pause_seconds_"):
                _gc_sample(out["gc"], s)
            elif s.name == "nmt_requests_total":
                key = f"{s.labels['method']} {s.labels['code']}"
                out["requests"][key] = out["requests"].get(key, 0) + int(s.value)
            elif s.name == "nmt_rejected_requests_total":
                out["rejected"][s.labels["reason"]] = int(s.value)
            elif s.name == "process_resident_memory_bytes":
                out["rss_bytes"] = s.value
            elif s.name == "nmt_inflight_requests":
                out["inflight"] = s.value
    return out


def _gc_sample(out: dict, s) -> None:
    """One ``nmt_gc_pause_seconds`` sample into ``out[(process, generation)]``:
    ``count``, ``sum`` and the cumulative ``buckets`` ``{upper bound: passes}``."""
    key = (s.labels["process"], s.labels["generation"])
    entry = out.setdefault(key, _no_passes())
    if s.name.endswith("_bucket"):
        entry["buckets"][float(s.labels["le"])] = s.value
    elif s.name.endswith("_count"):
        entry["count"] = s.value
    elif s.name.endswith("_sum"):
        entry["sum"] = s.value


def _no_passes() -> dict:
    return {"count": 0.0, "sum": 0.0, "buckets": {}}


def _bound(buckets: list[tuple[float, float]], passes: float) -> float:
    """The smallest upper bound whose cumulative count reaches ``passes``."""
    return next((le for le, n in buckets if n >= passes), math.inf)


def gc_pauses(before: dict, after: dict, wall: float) -> list[dict]:
    """The collector's passes between two scrapes, a row per process and generation
    that made any: passes, passes a second, seconds in all and their share of ``wall``
    (%), and the bucket bounds (ms) under which 99% and all of them ended."""
    rows = []
    for (process, generation), end in sorted(after.items()):
        start = before.get((process, generation)) or _no_passes()
        passes = end["count"] - start["count"]
        if not passes > 0:  # none, or a count that is not a number (NaN)
            continue
        buckets = sorted(
            (le, n - start["buckets"].get(le, 0.0)) for le, n in end["buckets"].items()
        )
        seconds = end["sum"] - start["sum"]
        rows.append(
            {
                "process": process,
                "generation": int(generation),
                "passes": int(passes),
                "per_s": _round(passes / wall, 2) if wall > 0 else None,
                "seconds": _round(seconds, 3),
                "wall_pct": _round(100 * seconds / wall, 2) if wall > 0 else None,
                "p99_under_ms": _round(1000 * _bound(buckets, math.ceil(0.99 * passes)), 3),
                "max_under_ms": _round(1000 * _bound(buckets, passes), 3),
            }
        )
    return rows


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    keys = set(after) | set(before)
    out = {k: after.get(k, 0) - before.get(k, 0) for k in keys}
    return {k: v for k, v in sorted(out.items()) if v}


# -- health ----------------------------------------------------------------------------


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


# -- the target ------------------------------------------------------------------------


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
