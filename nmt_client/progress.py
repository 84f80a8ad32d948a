"""A progress line for the client's commands on long jobs (``nmt-eval``, ``nmt-score``,
``nmt-translate`` reading a file): on stderr, only when it is a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


class Progress:
    """One status line on a terminal, rewritten at most every ``interval`` seconds:
    ``nmt-eval: 1,200/3,000 sentences (40%), 35.2 sentences/s, about 51 s left``, or,
    ``total`` unknown (a stream), ``nmt-translate: 1,200 sentences, 35.2 sentences/s``.
    Disabled (silent) unless ``enabled``, by default when ``stream`` is a terminal."""

    def __init__(
        self,
        total: int | None,
        stream=None,
        *,
        enabled: bool | None = None,
        interval: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        prog: str,
    ) -> None:
        self.total, self.done, self.prog = total, 0, prog
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.interval, self.clock = interval, clock
        self.start = self.last = clock()
        self.shown = False

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = self.clock()
        finished = self.total is not None and self.done >= self.total
        if self.enabled and (now - self.last >= self.interval or finished):
            self.last = now
            rate = self.done / max(now - self.start, 1e-9)
            if self.total is None:
                line = f"{self.done:,} sentences, {rate:.1f} sentences/s"
            else:
                left = (self.total - self.done) / rate if rate > 0 else 0.0
                line = (
                    f"{self.done:,}/{self.total:,} sentences "
                    f"({100 * self.done // max(self.total, 1)}%), {rate:.1f} sentences/s, "
                    f"about {left:.0f} s left"
                )
            self.stream.write(f"\r{self.prog}: {line}\x1b[K")
            self.stream.flush()
            self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
