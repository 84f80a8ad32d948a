"""service/heap.py: the start-up heap frozen out of the collector's full passes."""

from __future__ import annotations

import gc
import logging
import weakref

import pytest

from service import heap


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
