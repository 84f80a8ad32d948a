"""Spawned child processes (the engine process, front-end processes): how the server
waits for a child's first word and says why a child ended."""

from __future__ import annotations

import signal
import time

# ``spawn``, never ``fork``: the server has threads by the time it starts a child.
START_METHOD = "spawn"
# How long a child may take to load its bundles and say it is ready.
START_SECONDS = 600.0
# Time a child gets past the drain timeout to stop, then it is terminated.
STOP_MARGIN_SECONDS = 5.0


def first_message(conn, process, who: str, doing: str, error: type[Exception]) -> tuple:
    """The first message a spawned child ``process`` sends on ``conn`` (``ready``, or
    ``failed`` and why); ``error`` naming ``who`` and what it was ``doing`` when the child
    ends first or sends nothing for :data:`START_SECONDS`."""
    deadline = time.monotonic() + START_SECONDS
    while not conn.poll(0.1):
        if not process.is_alive():
            raise error(
                f"{who} ended while {doing} ({exit_reason(process.exitcode)}); "
                "see its log lines above"
            )
        if time.monotonic() > deadline:
            raise error(f"{who} was still {doing} after {START_SECONDS:g} s")
    try:
        return conn.recv()
    except (EOFError, OSError):
        process.join(5)
        raise error(f"{who} ended while {doing} ({exit_reason(process.exitcode)})") from None


def exit_reason(exitcode: int | None) -> str:
    """A child process's ``exitcode`` in words, for logs and health."""
    if exitcode is None:
        return "its pipe closed"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"
