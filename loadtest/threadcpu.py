"""CPU time of this process by thread group, for attributing an in-process load test.

Linux only (``/proc/self/task/<tid>/schedstat``, nanosecond resolution); elsewhere every
snapshot is empty. Groups follow the service's thread names: the engine's
``nmt-scheduler`` thread (its Python plus every decoder call it makes), the
``nmt-encoder`` thread (encoder calls), the gRPC side (the ``grpc-loop`` event loop
thread and the ``nmt-reply`` threads that build replies; ``grpc_N`` handler threads of
a thread-pool server), and everything else (gRPC's own C threads, ORT
pool threads, the server's polling thread). Threads that exit between two snapshots
(closed-loop client threads do) are not in the second one: :func:`breakdown` reports
them as ``exited`` from the process's CPU time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

TASKS = Path("/proc/self/task")
# Whether the kernel keeps per-thread scheduler statistics (nanoseconds on a CPU).
SCHEDSTAT = Path("/proc/self/schedstat").exists()


def group_of(name: str | None) -> str:
    if name is None:
        return "native"
    if name.startswith("nmt-scheduler"):
        return "scheduler"
    if name.startswith("nmt-encoder"):
        return "encoder"
    if name.startswith(("grpc-loop", "nmt-reply", "grpc_")):
        return "grpc_handlers"
    return "other"


def snapshot(group: Callable[[str | None], str] = group_of) -> dict[str, float]:
    """CPU seconds per group (``group(thread name)``, :func:`group_of` by default) so
    far, plus ``process`` (all threads, exited ones too)."""
    out: dict[str, float] = {"process": time.process_time()}
    if not TASKS.is_dir():
        return out
    names = {t.native_id: t.name for t in threading.enumerate()}
    for task in os.listdir(TASKS):
        try:
            ns = int((TASKS / task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        key = group(names.get(int(task)))
        out[key] = out.get(key, 0.0) + ns / 1e9
    return out


def breakdown(before: dict[str, float], after: dict[str, float], per: int) -> dict[str, float]:
    """CPU milliseconds per unit of work (``per`` sentences) by group between snapshots."""
    out = {}
    known = 0.0
    for group, value in after.items():
        if group == "process":
            continue
        used = max(0.0, value - before.get(group, 0.0))
        known += used
        out[group] = round(1000 * used / per, 3)
    total = after["process"] - before["process"]
    out["exited"] = round(1000 * max(0.0, total - known) / per, 3)
    out["total"] = round(1000 * total / per, 3)
    return out


def process_seconds(pids: list[int]) -> float:
    """CPU seconds the processes ``pids`` used so far, e.g. ``nmt-serve --frontends``' front
    ends: each live thread's ``/proc/<pid>/task/<tid>/schedstat`` (nanoseconds; a thread
    that exits between two readings drops out, as in :func:`snapshot`). Where the kernel
    keeps no schedstat, ``/proc/<pid>/stat``'s user + system time, in whole clock ticks
    (10 ms): a front end that used 30 ms over a short run could read as 0 there. A
    process that is gone, or not Linux: 0."""
    return sum(_task_seconds(pid) if SCHEDSTAT else _stat_seconds(pid) for pid in pids)


def _task_seconds(pid: int) -> float:
    tasks = Path(f"/proc/{pid}/task")
    try:
        tids = os.listdir(tasks)
    except OSError:
        return 0.0
    total = 0.0
    for tid in tids:
        try:
            total += int((tasks / tid / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
    return total


def _stat_seconds(pid: int) -> float:
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / tick  # utime, stime
