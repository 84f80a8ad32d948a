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

import logging
import sys
import threading
import time
from collections.abc import Callable
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
        self.level_before = logging.NOTSET  # the logger's, restored by hide_stages
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


def show_stages(prog: str, stream: TextIO | None = None) -> StageLine | None:
    """Attach a :class:`StageLine` to the ``export`` loggers when ``stream`` (default
    stderr) is a terminal; returns it (call :func:`hide_stages` when done) or None."""
    stream = stream if stream is not None else sys.stderr
    if not stream.isatty():
        return None
    handler = StageLine(prog, stream)
    logger = logging.getLogger(LOGGER)
    handler.level_before = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    return handler


def hide_stages(handler: StageLine | None) -> None:
    """Detach ``handler``, restore the logger's level and end the last stage's line."""
    if handler is not None:
        logger = logging.getLogger(LOGGER)
        logger.removeHandler(handler)
        logger.setLevel(handler.level_before)
        handler.close()
