"""service/heap.py: the start-up heap frozen out of the collector's full passes."""

from __future__ import annotations

import gc
import logging
import weakref

import pytest
from prometheus_client import CollectorRegistry

from service import heap
from service.metrics import create_metrics


class Node:
    """An object in a reference cycle with itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def thawed():
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test session collects as before


def test_freeze_keeps_what_lives_and_collects_the_rest(thawed, caplog):
    dropped = weakref.ref(Node())  # start-up garbage: collected, not frozen
    kept = Node()
    with caplog.at_level(logging.INFO, logger="service.heap"):
        frozen = heap.freeze("test")
    assert dropped() is None
    assert frozen > 1000 and gc.get_freeze_count() > 1000  # (frozen objects still die)
    # out of the collector's passes: not among the objects it walks
    assert not any(o is kept for o in gc.get_objects())
    assert f"test: {frozen} start-up objects frozen" in caplog.text
    # what is made later is still collected
    later = weakref.ref(Node())
    assert later() is not None
    gc.collect()
    assert later() is None


# -- nmt_gc_pause_seconds ----------------------------------------------------------------------


def _passes(registry: CollectorRegistry, generation: int, process: str = "test") -> float:
    labels = {"process": process, "generation": str(generation)}
    return registry.get_sample_value("nmt_gc_pause_seconds_count", labels) or 0.0


def _seconds(registry: CollectorRegistry, generation: int) -> float:
    labels = {"process": "test", "generation": str(generation)}
    return registry.get_sample_value("nmt_gc_pause_seconds_sum", labels) or 0.0


@pytest.fixture
def registry():
    """A registry, with the collector's own passes off: only the test's ``gc.collect``
    calls are counted, whatever other threads allocate meanwhile."""
    gc.disable()
    yield CollectorRegistry()
    gc.enable()


@pytest.mark.parametrize("generation", [0, 1, 2])
def test_every_pass_is_timed_under_its_generation(registry, generation):
    pauses = heap.GcPauses(create_metrics(registry).gc_pause, "test")
    try:
        before = [_passes(registry, g) for g in range(3)]
        for _ in range(3):
            gc.collect(generation)
        after = [_passes(registry, g) for g in range(3)]
    finally:
        pauses.close()
    added = [a - b for a, b in zip(after, before, strict=True)]
    assert added == [3 * (g == generation) for g in range(3)]
    assert 0 < _seconds(registry, generation) < 3.0


def test_closed_or_dropped_watches_stop_observing(registry):
    metrics = create_metrics(registry)
    closed = heap.GcPauses(metrics.gc_pause, "closed")
    closed.close()
    dropped = weakref.ref(heap.GcPauses(metrics.gc_pause, "dropped"))
    kept = heap.GcPauses(metrics.gc_pause, "test")
    try:
        assert dropped() is None
        gc.collect()
        gc.collect()
        assert _passes(registry, 2) == 2
        assert _passes(registry, 2, "closed") == _passes(registry, 2, "dropped") == 0
        # one callback serves every watch
        assert sum(c is heap._on_gc for c in gc.callbacks) == 1
    finally:
        kept.close()


def test_several_watches_each_see_every_pass(registry):
    one, two = registry, CollectorRegistry()
    watches = [heap.GcPauses(create_metrics(r).gc_pause, "test") for r in (one, two)]
    try:
        gc.collect()
    finally:
        for watch in watches:
            watch.close()
    assert _passes(one, 2) == _passes(two, 2) == 1


def test_process_name():
    assert heap.process_name() == "nmt-serve"  # the main process
