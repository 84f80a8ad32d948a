"""What a long export is doing, shown on a terminal.

The export core logs each stage it starts (``log.info`` on the ``export`` loggers: tracing,
each check of the parity gate, a variant's BLEU gate ...); the gate alone takes minutes on
a real corpus. :class:`StageLine` shows the running stage with its elapsed seconds,
rewritten in place, and leaves one line per finished stage with the time it took:

    nmt-export: parity gate: greedy on 2,000 sentences, PyTorch vs ONNX Runtime: 41.2 s
    nmt-export: parity gate: beam 5 n-best on 200 sentences ... 12 s

Only on a terminal: piped or captured stderr gets nothing (one-line errors stay one line).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

LOGGER = "export"


class StageLine(logging.Handler):
    """Renders the ``export`` loggers' INFO records as stage lines on ``stream``.

    ``tick``: seconds between rewrites of the running stage's line (0: no ticker thread,
    the line is written when a stage starts and ends only)."""

    def __init__(
        self,
        prog: str,
        stream: TextIO,
        *,
        tick: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(logging.INFO)
        self.prog, self.stream, self.clock = prog, stream, clock
        self.stage: str | None = None
        self.started = 0.0
        self.stage_lock = threading.Lock()  # Handler.handle holds self.lock around emit
        self.stop = threading.Event()
        self.ticker = None
        if tick > 0:
            self.ticker = threading.Thread(
                target=self._tick, args=(tick,), name="nmt-export-stages", daemon=True
            )
            self.ticker.start()

    def emit(self, record: logging.LogRecord) -> None:
        with self.stage_lock:
            self._finish()
            self.stage, self.started = record.getMessage(), self.clock()
            self._show()

    def close(self) -> None:
        self.stop.set()
        if self.ticker is not None:
            self.ticker.join()
        with self.stage_lock:
            self._finish()
        super().close()

    def _tick(self, every: float) -> None:
        while not self.stop.wait(every):
            with self.stage_lock:
                self._show()

    def _show(self) -> None:
        if self.stage is not None:
            seconds = self.clock() - self.started
            self.stream.write(f"\r{self.prog}: {self.stage} ... {seconds:.0f} s\x1b[K")
            self.stream.flush()

    def _finish(self) -> None:
        if self.stage is not None:
            seconds = self.clock() - self.started
            self.stream.write(f"\r{self.prog}: {self.stage}: {seconds:.1f} s\x1b[K\n")
            self.stream.flush()
            self.stage = None


@contextlib.contextmanager
def shown_stages(prog: str, stream: TextIO | None = None) -> Iterator[None]:
    """While the block runs, a :class:`StageLine` on the ``export`` loggers when ``stream``
    (default stderr) is a terminal; afterwards the logger as it was and the last stage's
    line ended (before an error line the caller prints)."""
    stream = stream if stream is not None else sys.stderr
    if not stream.isatty():
        yield
        return
    handler = StageLine(prog, stream)
    logger = logging.getLogger(LOGGER)
    level = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        handler.close()
