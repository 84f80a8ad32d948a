"""Soak and overload a translation server for as long as you like; watch its memory.

``python -m loadtest.soak [--minutes 30] [--clients 16] [--overload 3] [--half-open 0]
[--port P --metrics-port M | --start] [--out loadtest/results/soak-...] [-- SERVER FLAGS]``

``--start`` launches ``nmt-serve`` (``python -m service.server``) as a child process on
free 127.0.0.1 ports, on the CPU, over the committed ``model_repository/`` (flags after
``--`` go to it: ``-- --model-repository DIR --max-inflight 64``), waits for health
SERVING, and at the end stops it with SIGTERM and checks that it exits 0. Without it the
soak targets a server already running on this machine at ``--port`` / ``--metrics-port``
(give ``--pid`` to read its RSS and allocator environment from ``/proc``).

For the whole run (the load is :mod:`loadtest.soakload`, the watching
:mod:`loadtest.soakprobe`):

* ``--clients`` closed-loop clients, each on a connection of its own, send a mix drawn
  from ``models/pretrained/en-es/test.en`` (the BLEU test set) of good calls, bad
  requests, cancelled calls and short deadlines (``soakload.MIX`` has the shares);
* ``--overload K``: every ``--overload-period`` seconds from ``--overload-first`` (by
  default 20 s before the warm-up ends, or at 0: the memory baseline comes after one
  burst), for ``--overload-burst`` seconds, K x ``--max-inflight`` more clients send good
  requests back to back; the server refuses the surplus (RESOURCE_EXHAUSTED, counted);
* ``--half-open N``: N ``Translate`` calls that never send their message, renewed as the
  server ends them (``--receive-timeout``, DEADLINE_EXCEEDED);
* a health sampler in a process of its own (so the clients' GIL does not delay it) checks
  ``grpc.health.v1`` every ``--health-every`` seconds.

Every ``--sample-every`` seconds it records the server's RSS, the health window's
latencies and failures, the clients' tally and the server's ``nmt_requests_total``; a
progress line a minute goes to stderr. At the end it waits for every call to settle and
compares the clients' tally with the server's counter per (method, code).

The report (``<out>.json``, ``<out>.md``, the markdown printed; :mod:`loadtest.soakreport`
says what is in it) gives the RSS and its slopes, health latencies and failures,
throughput, the tally against the counter, the allocator environment of the server and the
versions. Exit status: 0 when health never failed, the counts match, the server (when
started) exited 0 and the slope over the last half of the run is within ``--max-slope``
(when given); 1 otherwise; 2 when it could not run (no server answering, bad flags), with
a one-line error.

The health sampler and the half-open calls come from :mod:`loadtest.hostile` (the
reliability tests' misbehaving clients), which connect to 127.0.0.1: the soak runs
against a server on this machine.
"""

from __future__ import annotations

import argparse
import logging
import math
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from loadtest.outputs import write_result
from loadtest.soakload import (
    CALL_TIMEOUT,
    MIX,
    OVERLOAD_MIX,
    HalfOpenKeeper,
    LoadClient,
    OverloadBursts,
    Tally,
    start_clients,
)
from loadtest.soakprobe import (
    ROOT,
    HealthSampler,
    ServerProcess,
    SoakError,
    Target,
    delta,
    gc_pauses,
    health_status,
    hostile,
    proc_environ,
    scrape,
)
from loadtest.soakreport import counts_match, markdown, progress, report, sample
from models.commands import show_defaults

log = logging.getLogger("loadtest.soak")

DEFAULT_FILE = ROOT / "models" / "pretrained" / "en-es" / "test.en"


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
        at_start = scrape(target.metrics_port)
        before = at_start["requests"]
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
        gc_pauses(at_start["gc"], after.get("gc", {}), wall),
    )
    return result


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
        json_path, md_path = write_result(args.out, result, text)
        log.info("wrote %s and %s", md_path, json_path)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
