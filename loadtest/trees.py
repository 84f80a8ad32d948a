"""``nmt-serve`` from another source tree, for side-by-side (A/B) measurements.

Point a benchmark at a ``git worktree`` of an older commit (``git worktree add
/tmp/before main~3``) and it starts that tree's server as a subprocess, with that tree's
code and the flags given, waits until it reports SERVING, and measures it in the same
run, on the same machine, as this tree's (:mod:`loadtest.attack`, ``nmt-bench
--ab-tree``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import grpc

from loadtest.hostile import own_channel


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_env(tree: Path | str, **extra: str) -> dict[str, str]:
    """This process's environment for a Python child that imports ``tree``'s code first:
    ``tree`` put before ``PYTHONPATH``, not in its place (packages installed with
    ``pip --target`` and named there, as on a lent GPU machine, stay importable)."""
    path = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def start_server(
    tree: Path,
    port: int,
    flags: Sequence[str] = ("--providers", "cpu"),
    *,
    model_repository: Path | None = None,
) -> subprocess.Popen:
    """``python -m service.server`` of ``tree`` on 127.0.0.1:``port`` (no metrics port),
    serving ``model_repository`` (default: the tree's own), with ``flags`` added."""
    env = tree_env(tree)
    repository = model_repository or tree / "model_repository"
    command = [
        sys.executable, "-m", "service.server", "--host", "127.0.0.1",
        "--port", str(port), "--metrics-port", "-1",
        "--model-repository", str(repository), "--log-level", "WARNING", *flags,
    ]  # fmt: skip
    return subprocess.Popen(command, cwd=tree, env=env)


def wait_serving(
    port: int, timeout: float = 120.0, process: subprocess.Popen | None = None
) -> None:
    """Until the server on ``port`` reports SERVING; exits with one line if it never does
    or its ``process`` ends first."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    end = time.monotonic() + timeout
    with own_channel(port) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < end:
            if process is not None and process.poll() is not None:
                raise SystemExit(
                    f"the server for port {port} exited with {process.returncode} before serving"
                )
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.5)
    raise SystemExit(f"the server on port {port} never reported SERVING")


def stop(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def commit_of(tree: Path) -> str:
    """The tree's short commit, with ``+`` when its tracked files have changes;
    ``unknown`` when the tree is no git checkout of its own (a copy inside another
    checkout would otherwise be labelled with that checkout's commit)."""
    try:
        top = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--show-toplevel"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        if Path(top).resolve() != Path(tree).resolve():
            return "unknown"
        head = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        return head + ("+" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def ab_servers(
    p: argparse.ArgumentParser, root: Path, trees: Sequence[Path], flags: Sequence[str]
) -> list[tuple[Path, str, list[str]]]:
    """The servers an A/B run compares, from ``--ab-tree`` (``trees``) and ``--ab-flags``
    (``flags``): ``root`` (this tree), each other tree, then ``root`` again with each set
    of flags, as ``(tree, label, extra flags)`` labelled by commit and flags (``#i``
    added when two labels would be the same); ``[]`` when neither is given. A path that is
    no source tree of this project, or flags that do not parse, are one-line
    ``p.error`` s."""
    for tree in trees:
        if not (tree / "service" / "server.py").is_file():
            p.error(f"--ab-tree {tree}: not a source tree of this project (no service/server.py)")
    try:
        extras = [shlex.split(extra) for extra in flags]
    except ValueError as exc:
        p.error(f"--ab-flags: {exc}")
    if [] in extras:  # the same as this tree's own row: nothing to compare
        p.error("--ab-flags: no flags given (e.g. --ab-flags='--greedy-steps 4')")
    if not trees and not extras:
        return []
    servers = [(root, []), *((t.resolve(), []) for t in trees), *((root, e) for e in extras)]
    labels = [" ".join([commit_of(t), *e]) for t, e in servers]
    if len(set(labels)) < len(labels):  # the same commit twice
        labels = [f"{label}#{i}" for i, label in enumerate(labels)]
    return [(t, label, e) for (t, e), label in zip(servers, labels, strict=True)]
