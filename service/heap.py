"""The start-up heap taken out of the cyclic garbage collector's reach (``gc.freeze``).

A process of the server holds some 40,000 objects once its models are loaded and warm
(the bundle's configuration, ORT session wrappers, gRPC, protobuf descriptors, the
tokenizers): every full collection of CPython's collector walks them all, and every
Python thread waits while it does. On 2 cores under 32 clients those pauses took 36-59 ms
(the longest full collection of each of four ``nmt-serve`` runs, timed with
``gc.callbacks``; 16-20 ms on an idle process), 9-14 ms once frozen, with the same
throughput (2026-11-27, the note of issue 16). These objects live as long as the process,
so moving them to the permanent generation costs nothing; the collector still collects
everything made later (requests, replies, batches). vLLM freezes its heap the same way
once its model is warm (``freeze_gc_heap``), and SGLang after its warm-up requests
(``freeze_gc``).

:class:`GcPauses` times every pass the collector still makes, into
``nmt_gc_pause_seconds{process,generation}``: what the figures above were measured with,
now on ``/metrics`` (Go programs export ``go_gc_duration_seconds`` for the same reason).
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import time
import weakref

from prometheus_client import Histogram

log = logging.getLogger(__name__)


def freeze(who: str) -> int:
    """Collect what start-up left, then freeze every object left: call once ``who`` (a
    process's name for the log) is loaded and warm. Returns the objects frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("%s: %d start-up objects frozen out of the garbage collector's passes", who, frozen)
    return frozen


def process_name() -> str:
    """This process's name for ``nmt_gc_pause_seconds{process}``: ``nmt-serve``, or the
    name a spawned process was given (``nmt-engine-<model>``, ``nmt-frontend-<i>``)."""
    name = multiprocessing.current_process().name
    return "nmt-serve" if name == "MainProcess" else name


class GcPauses:
    """Observes the duration of every collector pass of this process into ``histogram``
    (labels ``process``, ``generation``) until :meth:`close`, or until nothing refers to
    it any more. One ``gc.callbacks`` entry serves every instance (several servers share
    a test process): two clock reads and one observation a pass, and a server under
    load makes about ten passes a second (``loadtest/results/soak-6min-gcpauses.md``)."""

    def __init__(self, histogram: Histogram, process: str) -> None:
        self._children = tuple(
            histogram.labels(process=process, generation=str(g)) for g in range(3)
        )
        if _on_gc not in gc.callbacks:
            gc.callbacks.append(_on_gc)
        _watching.add(self)

    def close(self) -> None:
        _watching.discard(self)

    def observe(self, generation: int, seconds: float) -> None:
        self._children[generation].observe(seconds)


_watching: weakref.WeakSet[GcPauses] = weakref.WeakSet()
# perf_counter at the current pass's start. Passes never nest (CPython runs one at a
# time, holding the GIL), so one value serves every thread.
_started = 0.0


def _on_gc(phase: str, info: dict) -> None:
    global _started
    if phase == "start":
        _started = time.perf_counter()
        return
    seconds = time.perf_counter() - _started
    for watch in tuple(_watching):
        watch.observe(info["generation"], seconds)
