"""Health under attack: one server, three phases, health checks sampled throughout.

``python -m loadtest.attack [--tree DIR] [--half-open 150] [--overload 3] [--seconds 15]
[--out loadtest/results/attack-cpu]``

Starts ``nmt-serve`` from the source tree ``--tree`` (default: this checkout; point it at
a ``git worktree`` of an older commit to measure before/after side by side) on the CPU
with the demo model committed in that tree and the tree's default flags, waits for SERVING, then:

1. ``idle``: health checks alone;
2. ``half-open``: ``--half-open`` Translate calls that send headers and never their
   message (one client, one connection), plus one ordinary translation;
3. ``overload``: ``--overload`` times 120 closed-loop greedy clients (120 = the
   translations the server keeps in flight by default, before and after grpc.aio) on
   grpc.aio in a child process at low priority;
4. ``overload_bare_health``: the same overload again, health sampled from a separate
   process that only answers health checks: the latency floor a saturated machine sets
   for any server, to read the server's own figures against.

Health ``Check`` is sampled every 20 ms on a connection of its own with a 2 s deadline;
each phase reports p50/p99/max and every failed check by status. Writes ``<out>.json``
and ``<out>.md`` and prints the markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import platform
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import grpc

from loadtest.hostile import HalfOpenCalls, health_latencies, own_channel, percentile
from loadtest.outputs import write_result
from loadtest.trees import commit_of, free_port, start_server, stop, wait_serving
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parent.parent
CAPACITY = 120
SENTENCES = ROOT / "models" / "sample" / "sample.en"


BARE_HEALTH_SERVER = """
import sys, threading
from concurrent.futures import ThreadPoolExecutor
import grpc
from grpc_health.v1 import health, health_pb2_grpc
server = grpc.server(ThreadPoolExecutor(2))
health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
server.add_insecure_port("127.0.0.1:" + sys.argv[1])
server.start()
threading.Event().wait()
"""


def summary(samples: list) -> dict:
    times = [x for x in samples if isinstance(x, float)]
    failed = Counter(x for x in samples if not isinstance(x, float))
    out = {"checks": len(samples), "failed": dict(failed)}
    if times:
        out |= {
            "p50_ms": round(1000 * percentile(times, 0.5), 2),
            "p99_ms": round(1000 * percentile(times, 0.99), 2),
            "max_ms": round(1000 * max(times), 2),
        }
    return out


def sampled(port: int, seconds: float, during=None) -> tuple[dict, object]:
    """Health samples for ``seconds`` while ``during()`` runs (its result returned)."""
    stop, samples = threading.Event(), []
    sampler = threading.Thread(target=lambda: samples.extend(health_latencies(port, stop)))
    sampler.start()
    result = None
    try:
        result = during() if during is not None else time.sleep(seconds)
    finally:
        stop.set()
        sampler.join()
    return summary(samples), result


def _overload_child(port: int, clients: int, seconds: float) -> dict:
    # The load generator shares the server's cores here; at low priority it stands in
    # for clients on other machines, which is what the server's numbers should reflect.
    os.nice(10)

    async def main() -> Counter:
        tally: Counter = Counter()
        texts = [t for t in SENTENCES.read_text().splitlines() if t.strip()]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.TranslatorStub(channel)
            end = time.monotonic() + seconds

            async def client(i: int) -> None:
                while time.monotonic() < end:
                    request = pb.TranslateRequest(texts=[texts[i % len(texts)]])
                    try:
                        await stub.Translate(request, timeout=30)
                        tally["OK"] += 1
                    except grpc.aio.AioRpcError as exc:
                        tally[exc.code().name] += 1
                        await asyncio.sleep(0.05)  # a refused client backs off a little
                    i += clients

            await asyncio.gather(*(client(i) for i in range(clients)))
        return tally

    return dict(asyncio.run(main()))


def run(tree: Path, half_open: int, overload: int, seconds: float) -> dict:
    port = free_port()
    server = start_server(tree, port)
    try:
        wait_serving(port, process=server)
        phases = {}
        phases["idle"], _ = sampled(port, seconds)

        def attack() -> str:
            calls = HalfOpenCalls(port, half_open)
            try:
                time.sleep(1.0)
                with own_channel(port) as channel:
                    try:
                        pb_grpc.TranslatorStub(channel).Translate(
                            pb.TranslateRequest(texts=["The cat sat on the mat."]), timeout=5
                        )
                        outcome = "OK"
                    except grpc.RpcError as exc:
                        outcome = exc.code().name
                time.sleep(max(0.0, seconds - 1.0))
                return outcome
            finally:
                calls.close()

        phases["half_open"], outcome = sampled(port, seconds, attack)
        phases["half_open"]["translate_during"] = outcome
        clients = overload * CAPACITY
        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        with pool:
            phases["overload"], tally = sampled(
                port, seconds, lambda: pool.submit(_overload_child, port, clients, seconds).result()
            )
        phases["overload"] |= {"clients": clients, "translate_codes": tally}
        # The floor the machine sets: the same overload, health sampled from a process
        # that does nothing but answer health checks (no GIL or loop shared with anyone).
        bare_port = free_port()
        bare = subprocess.Popen([sys.executable, "-c", BARE_HEALTH_SERVER, str(bare_port)])
        try:
            wait_serving(bare_port, process=bare)
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
                future = pool.submit(_overload_child, port, clients, seconds)
                phases["overload_bare_health"], _ = sampled(bare_port, seconds, future.result)
        finally:
            bare.kill()
            bare.wait()
        return phases
    finally:
        stop(server)


def to_markdown(report: dict) -> str:
    lines = [
        f"# Health under attack ({report['date']}, {report['cpus']} CPUs)",
        "",
        f"`{report['command']}`",
        "",
        "| tree | phase | checks | p50 ms | p99 ms | max ms | failed checks | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for tree in report["trees"]:
        for phase, row in tree["phases"].items():
            notes = ""
            if "translate_during" in row:
                during = row["translate_during"]
                notes = f"{report['half_open']} half-open calls; a translation: {during}"
            if "clients" in row:
                notes = f"{row['clients']} clients: {row['translate_codes']}"
            lines.append(
                f"| {tree['commit']} | {phase} | {row['checks']} | {row.get('p50_ms', '-')} | "
                f"{row.get('p99_ms', '-')} | {row.get('max_ms', '-')} | {row['failed'] or 0} | "
                f"{notes} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m loadtest.attack", description=__doc__.split("\n")[0]
    )
    p.add_argument("--tree", type=Path, action="append", help="source tree(s); default: this one")
    p.add_argument("--half-open", type=int, default=150)
    p.add_argument("--overload", type=int, default=3)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--out", type=Path, default=ROOT / "loadtest" / "results" / "attack-cpu")
    args = p.parse_args(argv)
    trees = args.tree or [ROOT]
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "grpc": grpc.__version__,
        "command": " ".join(["python -m loadtest.attack", *(argv or sys.argv[1:])]),
        "half_open": args.half_open,
        "trees": [],
    }
    for tree in trees:
        print(f"attack: {tree} ({commit_of(tree)})", file=sys.stderr)
        phases = run(tree, args.half_open, args.overload, args.seconds)
        report["trees"].append({"tree": str(tree), "commit": commit_of(tree), "phases": phases})
    markdown = to_markdown(report)
    write_result(args.out, report, markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
