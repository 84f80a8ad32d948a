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
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def freeze(who: str) -> int:
    """Collect what start-up left, then freeze every object left: call once ``who`` (a
    process's name for the log) is loaded and warm. Returns the objects frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("%s: %d start-up objects frozen out of the garbage collector's passes", who, frozen)
    return frozen
