"""Where a scheduler step's time goes, and the engine in-process vs in a child process.

``python -m loadtest.hostpath [--levels greedy:32,greedy:64] [--engine-process off,on]``

Starts one in-process server per ``--engine-process`` mode (both up at once) and runs
every level against each, interleaved, with closed-loop clients in a child process
(:class:`loadtest.clients.ClientProcess`). A level runs plainly (throughput and latency)
and, with ``--instrument``, again with the scheduler thread instrumented, wherever that
thread lives (``RemoteEngine.call`` reaches the engine process).

At each decoder ORT call (entry and return) and around each wait for work, the
instrumented scheduler reads its CPU time (``CLOCK_THREAD_CPUTIME_ID``) and its runqueue
wait (``/proc/thread-self/schedstat``: runnable, waiting for a core), so a step's wall
time (one ORT call's start to the next's, waits for work left out) splits into on-CPU,
runqueue wait (busy cores, not the GIL) and blocked. The single-threaded ORT session
runs on the calling thread, which then blocks for nothing but the GIL: blocked inside
``session.run`` is the time from ORT's return to the next bytecode. Blocked in the host
part of the step is the GIL (and, briefly, the engine lock) held by other threads. The
reads cost about 15 µs a step; the plain rows give throughput and latency.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from prometheus_client import CollectorRegistry

from export import spec
from loadtest.clients import ClientProcess
from loadtest.concurrency import DEFAULT_SENTENCES, beam_of, start_server
from loadtest.outputs import write_result
from loadtest.threadcpu import snapshot
from nmt_client import DecodeOptions
from service.remote import RemoteEngine, on_engine

# -- run in the engine's process (directly, or through RemoteEngine.call) ----------------


class _Recorder:
    def __init__(self, engine) -> None:
        self.ident = engine._thread.ident
        self.fd: int | None = None
        self.ort: list[tuple] = []  # (single-threaded session, rows, wall, cpu, runq) ns
        # run start to run start: (wall, cpu, runq) ns, then those of the waits for work
        self.steps: list[tuple] = []
        self.prev: tuple | None = None
        self.idle = (0, 0, 0)  # waits for work so far: wall, cpu, runq

    def stat(self) -> tuple[int, int, int]:
        if self.fd is None:
            self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        # The runqueue wait of schedstat is current; its CPU time may lag by a tick.
        runq = int(os.pread(self.fd, 96, 0).split()[1])
        return time.perf_counter_ns(), time.thread_time_ns(), runq

    def wrap_run(self, run, single: bool, bound: bool = False):
        """``session.run`` (rows from the feeds) or, ``bound``, ``run_with_iobinding``
        (IO binding, CUDA's path: the rows are on the device, not counted)."""

        def timed(*args, **kwargs):
            if threading.get_ident() != self.ident:
                return run(*args, **kwargs)
            start = self.stat()
            if self.prev is not None:
                step = (b - a for a, b in zip(self.prev, start + self.idle, strict=True))
                self.steps.append(tuple(step))
            out = run(*args, **kwargs)
            end = self.stat()
            rows = None if bound else len(args[1][spec.PREV_TOKENS])
            self.ort.append((single, rows, *(b - a for a, b in zip(start, end, strict=True))))
            self.prev = start + self.idle
            return out

        return timed

    def wrap_wait(self, wait):
        def timed(timeout=None):
            if threading.get_ident() != self.ident:
                return wait(timeout)
            start = self.stat()
            try:
                return wait(timeout)
            finally:
                took = (b - a for a, b in zip(start, self.stat(), strict=True))
                self.idle = tuple(a + b for a, b in zip(self.idle, took, strict=True))

        return timed


def _decoder_sessions(model) -> list[tuple]:
    """The sessions a decoder call runs in, each with whether it is the single-threaded
    twin: one step, and several greedy steps (``--greedy-steps``; a call counts as one
    step here), and on CUDA their capturing sessions (the fixed buffers' steps)."""
    pairs = [(model.decoder, False), (model._decoder_1, True)]
    pairs += [(model._greedy, False), (model._greedy_1, True)] if model._greedy else []
    for steps in (model.graph_steps, model.greedy_graph_steps):
        if steps is not None and all(steps.session is not s for s, _ in pairs):
            pairs.append((steps.session, False))
    return pairs


def install(engine) -> None:
    model, recorder = engine.bundle.model, _Recorder(engine)
    for session, single in _decoder_sessions(model):
        if "run" not in vars(session):
            # Blocked inside a single-threaded CPU session is the GIL alone; inside a CUDA
            # one it is the GPU too, so there the GIL wait counts the host part only.
            single = (single or model.parallel_rows == 0) and model.device != "cuda"
            session.run = recorder.wrap_run(session.run, single)
            session.run_with_iobinding = recorder.wrap_run(
                session.run_with_iobinding, single, bound=True
            )
    engine._cond.wait = recorder.wrap_wait(engine._cond.wait)
    engine._hostpath = recorder


def uninstall(engine) -> None:
    model = engine.bundle.model
    for session, _ in _decoder_sessions(model):
        vars(session).pop("run", None)
        vars(session).pop("run_with_iobinding", None)
    vars(engine._cond).pop("wait", None)
    vars(engine).pop("_hostpath", None)


def harvest(engine) -> dict:
    """Per-step means in µs of the steps recorded since :func:`install`."""
    r = engine._hostpath
    n = min(len(r.steps), len(r.ort))
    if n == 0:
        return {"steps": 0}
    steps, ort = r.steps[:n], r.ort[:n]

    def mean(values) -> float:
        values = list(values)
        return round(statistics.fmean(values) / 1000, 1) if values else 0.0

    wall, cpu, runq, idle, idle_cpu, idle_runq = (mean(s[i] for s in steps) for i in range(6))
    o_wall, o_cpu, o_runq = (mean(o[i] for o in ort) for i in (2, 3, 4))
    single = [o for o in ort if o[0]]
    counted = [o[1] for o in ort if o[1] is not None]
    gil_after = [(o[2] - o[3] - o[4]) / 1000 for o in single]
    busy = wall - idle
    host_wall, host_cpu = busy - o_wall, cpu - idle_cpu - o_cpu
    host_runq = runq - idle_runq - o_runq
    host_gil = host_wall - host_cpu - host_runq
    ort_blocked = o_wall - o_cpu - o_runq
    # Blocked in a multi-threaded ORT call: the GIL and ORT's pool threads, not apart.
    gil_in_ort = sum(o[2] - o[3] - o[4] for o in single) / 1000 / n
    return {
        "steps": n,
        "rows_per_step": round(statistics.fmean(counted), 1) if counted else None,
        "single_thread_steps": len(single),
        "step_wall_us": round(busy, 1),
        "idle_us": idle,
        "ort_wall_us": o_wall,
        "ort_cpu_us": o_cpu,
        "ort_runq_us": o_runq,
        "ort_blocked_us": round(ort_blocked, 1),
        "gil_after_ort_us_single": round(statistics.fmean(gil_after), 1) if gil_after else None,
        "gil_after_ort_p90_us_single": round(sorted(gil_after)[int(0.9 * len(gil_after))], 1)
        if gil_after
        else None,
        "host_wall_us": round(host_wall, 1),
        "host_cpu_us": round(host_cpu, 1),
        "host_runq_us": round(host_runq, 1),
        "host_gil_us": round(host_gil, 1),
        "gil_wait_us": round(gil_in_ort + host_gil, 1),
        "gil_wait_pct": round(100 * (gil_in_ort + host_gil) / busy, 1) if busy else None,
        "runq_pct": round(100 * (runq - idle_runq) / busy, 1) if busy else None,
        "ort_cpu_us_per_row": round(o_cpu / statistics.fmean(counted), 1) if counted else None,
    }


def _group(name: str | None) -> str:
    if name is None:
        return "native"
    for prefix in ("nmt-scheduler", "nmt-encoder", "grpc-loop", "nmt-reply", "nmt-ipc"):
        if name.startswith(prefix):
            return prefix
    return "native" if name.startswith("Dummy") else "other"


def thread_cpu(engine=None) -> dict[str, float]:
    """CPU seconds of this process by thread group (:func:`_group`), plus ``process``;
    ``engine`` is unused (the signature of a function run in the engine process)."""
    return snapshot(_group)


# -- the harness ------------------------------------------------------------------------------


def _machine_busy() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]  # total, idle + iowait


def _cpu_ms(before: dict, after: dict, sentences: int, prefix: str) -> dict:
    return {
        f"{prefix}{k}": round(1000 * (after[k] - before.get(k, 0.0)) / sentences, 3) for k in after
    }


def measure(server, clients, target, sentences, options, n, instrumented) -> dict:
    engine = next(iter(server.engines.values()))
    remote = isinstance(engine, RemoteEngine)
    if instrumented:
        on_engine(engine, install)
    cpu0, child0 = thread_cpu(), on_engine(engine, thread_cpu) if remote else {}
    machine0, load0 = _machine_busy(), os.getloadavg()[0]
    level, _ = clients.run_level(target, sentences, n, options)
    machine1 = _machine_busy()
    cpu1, child1 = thread_cpu(), on_engine(engine, thread_cpu) if remote else {}
    total, idle = (b - a for a, b in zip(machine0, machine1, strict=True))
    row = {
        "mode": "on" if remote else "off",
        "instrumented": instrumented,
        "load_avg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "machine_idle_pct": round(100 * idle / max(total, 1), 1),
        "cpu_ms_per_sentence": _cpu_ms(cpu0, cpu1, len(sentences), "")
        | (_cpu_ms(child0, child1, len(sentences), "engine:") if remote else {})
        | {"clients": round(1000 * level.pop("client_cpu_s") / len(sentences), 3)},
    } | level
    if instrumented:
        row["breakdown"] = on_engine(engine, harvest)
        on_engine(engine, uninstall)
    return row


def _median(rows: list[dict], key: str):
    values = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(values), 1) if values else None


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    for key in dict.fromkeys((r["strategy"], r["clients"], r["mode"]) for r in rows):
        runs = [r for r in rows if (r["strategy"], r["clients"], r["mode"]) == key]
        plain = [r for r in runs if not r["instrumented"]] or runs
        parts = [r["breakdown"] for r in runs if r.get("breakdown", {}).get("steps")]
        summary = {"strategy": key[0], "clients": key[1], "engine_process": key[2]}
        summary |= {k: _median(plain, k) for k in ("sentences_per_s", "p50_ms", "p95_ms")}
        summary["sentences_per_s_all"] = [r["sentences_per_s"] for r in plain]
        summary["errors"] = sum(r["errors"] for r in runs)
        cpu = [r["cpu_ms_per_sentence"] for r in plain]
        summary["cpu_ms_per_sentence"] = {k: _median(cpu, k) for k in cpu[0]}
        summary["machine_idle_pct"] = _median(plain, "machine_idle_pct")
        if parts:
            summary["breakdown"] = {k: _median(parts, k) for k in parts[0]}
        out.append(summary)
    return out


def ratios(rows: list[dict]) -> list[dict]:
    """Engine process on over off, round by round (the two ran back to back)."""
    runs = {(r["strategy"], r["clients"], r["round"], r["mode"]): r for r in rows}
    out = []
    for strategy, clients in dict.fromkeys((r["strategy"], r["clients"]) for r in rows):
        pairs = [
            (runs[(strategy, clients, n, "on")], runs[(strategy, clients, n, "off")])
            for n in sorted({r["round"] for r in rows})
            if (strategy, clients, n, "on") in runs and (strategy, clients, n, "off") in runs
        ]
        if pairs:
            thr = [round(on["sentences_per_s"] / off["sentences_per_s"], 3) for on, off in pairs]
            p50 = [round(on["p50_ms"] / off["p50_ms"], 3) for on, off in pairs]
            out.append(
                {"strategy": strategy, "clients": clients, "throughput_on_over_off": thr}
                | {"median_throughput_ratio": statistics.median(thr), "p50_on_over_off": p50}
                | {"median_p50_ratio": statistics.median(p50)}
            )
    return out


def table(summary: list[dict]) -> str:
    steps = any(s.get("breakdown") for s in summary)
    head = "| level | engine process | sentences/s | p50 ms | p95 ms |"
    if steps:
        head += (
            " step µs | rows | 1-thread steps | ORT µs (cpu/runq/blocked) | host µs "
            "(cpu/runq/GIL) | GIL wait µs/step (%) |"
        )
    head += " CPU ms/sentence (server/engine/clients) |"
    lines = [head, "|" + "---|" * head.count(" |")]
    for s in summary:
        line = f"| {s['strategy']} x{s['clients']} | {s['engine_process']} | "
        line += f"{s['sentences_per_s']} | {s['p50_ms']} | {s['p95_ms']} |"
        b = s.get("breakdown") or {}
        if steps:
            single = (
                f"{100 * b['single_thread_steps'] / b['steps']:.0f} %"
                if b and b["single_thread_steps"]
                else None
            )
            line += (
                f" {b.get('step_wall_us')} | {b.get('rows_per_step')} | {single} | "
                f"{b.get('ort_wall_us')} ({b.get('ort_cpu_us')}/{b.get('ort_runq_us')}/"
                f"{b.get('ort_blocked_us')}) | {b.get('host_wall_us')} ({b.get('host_cpu_us')}/"
                f"{b.get('host_runq_us')}/{b.get('host_gil_us')}) | {b.get('gil_wait_us')} "
                f"({b.get('gil_wait_pct')}) |"
            )
        cpu = s["cpu_ms_per_sentence"]
        line += f" {cpu['process']}/{cpu.get('engine:process', '–')}/{cpu['clients']} |"
        # what was not measured (rows of an IO-bound step, single-thread steps on CUDA)
        lines.append(line.replace("None", "–"))
    return "\n".join(lines)


def report(settings: dict, summary: list[dict], paired: list[dict]) -> str:
    low, high = settings["load_avg_1m_range"]
    lines = [
        f"`{settings['command']}` ({settings['time']}, {settings['cores']} cores, "
        f"{settings.get('device', 'cpu')}, 1-minute "
        f"load average {low}-{high} during the run; medians of {settings['rounds']} rounds; "
        "µs are per decoder step)",
        "",
        table(summary),
        "",
    ]
    for r in paired:
        lines.append(
            f"* {r['strategy']} x{r['clients']}: on/off sentences/s by round "
            f"{r['throughput_on_over_off']} (median {r['median_throughput_ratio']}), "
            f"p50 {r['p50_on_over_off']} (median {r['median_p50_ratio']})"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--levels", default="greedy:32,greedy:64", help="STRATEGY:CLIENTS,...")
    p.add_argument("--engine-process", default="off,on", help="modes to compare")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--sentences", type=int, default=500)
    p.add_argument("--file", type=Path, default=DEFAULT_SENTENCES)
    p.add_argument("--model-repository", type=Path, default=None)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="ORT intra-op")
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="ORT's provider (cuda: IO binding on; blocked inside session.run then includes "
        "waiting for the GPU, not only the GIL)",
    )
    p.add_argument(
        "--client-processes",
        type=int,
        default=1,
        help="processes the clients are dealt out over (a GPU server needs several)",
    )
    p.add_argument("--instrument", choices=("on", "off", "both"), default="both")
    p.add_argument("--out", type=Path, default=None, help="write OUT.json and OUT.md")
    args = p.parse_args(argv)
    if args.client_processes < 1:
        p.error(f"--client-processes must be >= 1, got {args.client_processes}")
    sentences = [s for s in args.file.read_text(encoding="utf-8").splitlines() if s.strip()]
    sentences = sentences[: args.sentences]
    levels = []
    try:
        for item in args.levels.split(","):
            strategy, n = item.split(":")
            levels.append((DecodeOptions(beam_size=beam_of(strategy), return_scores=False), int(n)))
    except ValueError as exc:
        p.error(f"--levels {args.levels!r}: STRATEGY:CLIENTS,... e.g. greedy:32,beam5:8 ({exc})")
    modes = [m.strip() for m in args.engine_process.split(",")]
    if not set(modes) <= {"on", "off"}:
        p.error(f"--engine-process {args.engine_process!r}: on, off or both (off,on)")
    passes = {"on": [True], "off": [False], "both": [False, True]}[args.instrument]
    # CUDA alone on a GPU (a silent CPU fallback would report CPU numbers as GPU ones)
    servers = {
        mode: start_server(
            args.model_repository,
            intra_op_threads=args.threads,
            registry=CollectorRegistry(),
            providers=(args.device,),
            engine_process=mode,
            decode_lanes=1,  # the breakdown follows one scheduler thread
        )
        for mode in modes
    }
    rows: list[dict] = []
    try:
        with ClientProcess(args.client_processes) as clients:
            for _, target in servers.values():  # warm-up, not measured
                clients.run_level(target, sentences[:32], 8, levels[0][0])
            for number in range(args.rounds):
                for options, n in levels:
                    for mode in modes if number % 2 == 0 else modes[::-1]:
                        for instrumented in passes:
                            server, target = servers[mode]
                            row = measure(
                                server, clients, target, sentences, options, n, instrumented
                            )
                            print(json.dumps(row), file=sys.stderr, flush=True)
                            rows.append(row | {"round": number + 1})
    finally:
        for server, _ in servers.values():
            server.stop(0)
    summary, paired = summarize(rows), ratios([r for r in rows if not r["instrumented"]] or rows)
    loads = [x for r in rows for x in r["load_avg_1m"]]
    settings = {
        "command": "python -m loadtest.hostpath " + " ".join(argv or sys.argv[1:]),
        "cores": os.cpu_count(),
        "device": args.device,
        "client_processes": args.client_processes,
        "ort_intra_op_threads": args.threads,
        "sentences": len(sentences),
        "rounds": args.rounds,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_avg_1m_range": [min(loads), max(loads)],
    }
    markdown = report(settings, summary, paired)
    print(markdown)
    if args.out:
        result = {"settings": settings, "summary": summary, "ratios": paired, "rows": rows}
        write_result(args.out, result, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
