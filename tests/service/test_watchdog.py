"""Engine.health(): what a watchdog reads to tell a working engine from a zombie (a dead
scheduler or encoder thread, or a scheduler that stopped making progress)."""

from __future__ import annotations

import threading
import time

import pytest

from models.options import DecodeOptions
from service.engine import EngineConfig, EngineFailure
from service.errors import NotReady
from tests.service.server_helpers import wait_until
from tests.service.test_fault_isolation import (
    BEAM,
    GREEDY,
    TIMEOUT,
    engine_factory,
    innocent_texts,
    load_tiny_bundle,
)

DEAD = r"^internal error \((RuntimeError|MemoryError)\) in the translation engine;"


@pytest.fixture(scope="module")
def bundle(tiny_bundle):
    return load_tiny_bundle(tiny_bundle)


@pytest.fixture
def make_engine(bundle):
    yield from engine_factory(bundle)


def test_healthy_engine_idle_and_under_load(make_engine, tiny_bundle):
    engine, _ = make_engine()
    assert engine.health() is None
    texts = innocent_texts(tiny_bundle)
    jobs = [engine.submit(texts, options, timeout=TIMEOUT) for options in (GREEDY, BEAM) * 4]
    reports = set()
    while not all(job.future.done() for job in jobs):
        reports.add(engine.health())
        time.sleep(0.001)
    assert reports <= {None}
    for job in jobs:
        assert len(job.future.result(TIMEOUT)) == len(texts)
    assert engine.health() is None
    engine.stop(TIMEOUT)
    assert engine.health() is None


def test_health_before_start_and_after_stop(make_engine):
    engine, _ = make_engine()
    engine.stop(TIMEOUT)
    assert not engine._thread.is_alive()
    assert engine.health() is None  # stopped on purpose: not a fault


@pytest.mark.parametrize("seconds", [0, 0.05, float("nan")])
def test_stall_timeout_must_be_a_second_or_more(seconds):
    with pytest.raises(ValueError, match="stall_timeout must be >= 1 and"):
        EngineConfig(stall_timeout=seconds)


def test_scheduler_crash_fails_live_and_queued_requests(make_engine, tiny_bundle, monkeypatch):
    texts = innocent_texts(tiny_bundle)
    engine, model = make_engine()
    model.hold_steps()
    live = engine.submit(texts[:2], BEAM, timeout=TIMEOUT)
    assert model.entered.wait(TIMEOUT), "the request never reached the decoder"
    queued = [engine.submit([t], GREEDY, timeout=TIMEOUT) for t in texts[2:5]]

    def admit_now():
        raise RuntimeError("injected scheduler bug")

    monkeypatch.setattr(engine, "_admit_now", admit_now)  # escapes _schedule
    model.release()
    for job in [live, *queued]:
        with pytest.raises(EngineFailure, match=DEAD):
            job.future.result(TIMEOUT)
    assert wait_until(lambda: not engine._thread.is_alive(), TIMEOUT)
    assert engine.health() == "the scheduler thread failed: RuntimeError: injected scheduler bug"
    with pytest.raises(NotReady, match="the translation engine failed: the scheduler thread"):
        engine.submit(texts[:1], GREEDY, timeout=TIMEOUT)


def test_encoder_thread_crash_fails_requests(make_engine, tiny_bundle, monkeypatch):
    texts = innocent_texts(tiny_bundle)
    engine, model = make_engine(admit_wait_steps=0)
    assert engine._encoder_thread is not None
    # Rows decoding, so that the next batch goes to the encoder thread (with nothing
    # decoding the scheduler encodes a batch itself).
    model.hold_steps()
    jobs = [engine.submit([texts[0]], DecodeOptions(min_length=20, max_length=24), timeout=TIMEOUT)]
    assert model.entered.wait(TIMEOUT)
    entered, release = threading.Event(), threading.Event()

    def encode_batch(admitted):
        assert threading.current_thread() is engine._encoder_thread
        entered.set()
        assert release.wait(TIMEOUT)
        raise MemoryError("injected encoder thread bug")

    monkeypatch.setattr(engine, "_encode_batch", encode_batch)
    jobs.append(engine.submit([texts[1]], GREEDY, timeout=TIMEOUT))
    # One step more, then the first request's steps wait until the crash is in: let go,
    # its 20 steps were done, and its request answered, before a fast machine's encoder
    # thread had even started on the batch.
    model.step_once()
    assert entered.wait(TIMEOUT)
    jobs += [engine.submit([t], GREEDY, timeout=TIMEOUT) for t in texts[2:4]]  # queued
    release.set()
    assert wait_until(lambda: engine._fatal is not None, TIMEOUT)
    model.release()
    for job in jobs:
        with pytest.raises(EngineFailure, match=DEAD):
            job.future.result(TIMEOUT)
    assert wait_until(lambda: not engine._encoder_thread.is_alive(), TIMEOUT)
    assert wait_until(lambda: not engine._thread.is_alive(), TIMEOUT)
    assert engine.health() == "the encoder thread failed: MemoryError: injected encoder thread bug"
    with pytest.raises(NotReady, match="the translation engine failed: the encoder thread"):
        engine.submit(texts[:1], GREEDY, timeout=TIMEOUT)


@pytest.mark.parametrize("where", ["step", "encoder"])
def test_stall_is_reported_and_clears(make_engine, tiny_bundle, where):
    texts = innocent_texts(tiny_bundle)
    engine, model = make_engine(stall_timeout=1.0)
    model.hold_steps() if where == "step" else model.hold_encoder()
    job = engine.submit(texts[:2], GREEDY, timeout=TIMEOUT)
    assert model.entered.wait(TIMEOUT)
    assert wait_until(lambda: engine.health() is not None, TIMEOUT)
    assert engine.health().startswith("the scheduler has made no progress for ")
    assert "stall_timeout 1 s" in engine.health()
    model.release()
    assert len(job.future.result(TIMEOUT)) == 2
    assert wait_until(lambda: engine.health() is None, TIMEOUT)


def test_idle_engine_is_not_stalled(make_engine, tiny_bundle):
    """Nothing to do for longer than stall_timeout, then a request: no stall."""
    engine, _ = make_engine(stall_timeout=1.0)
    job = engine.submit(innocent_texts(tiny_bundle)[:1], GREEDY, timeout=TIMEOUT)
    job.future.result(TIMEOUT)
    assert wait_until(lambda: False, 1.1) is False  # idle past stall_timeout
    assert engine.health() is None


def test_a_stop_out_of_time_fails_what_is_left_once_the_step_ends(make_engine, tiny_bundle):
    """``stop(timeout)`` past its time: what still decodes or waits fails with NotReady,
    and stop returns only once the scheduler left the decoder call it was in (a process
    that exits with a thread inside ONNX Runtime aborts instead of exiting 0)."""
    engine, model = make_engine()
    texts = innocent_texts(tiny_bundle)
    model.hold_steps()
    live = engine.submit(texts, BEAM, timeout=TIMEOUT)
    assert model.entered.wait(TIMEOUT)  # a decoder step is under way, held
    waiting = engine.submit(texts, GREEDY, timeout=TIMEOUT)
    release = threading.Timer(0.3, model.release)  # the held step ends 0.3 s into stop
    release.start()
    started = time.monotonic()
    engine.stop(0.05)
    assert time.monotonic() - started >= 0.25
    assert not engine._thread.is_alive() and not engine._encoder_thread.is_alive()
    for job in (live, waiting):
        with pytest.raises(NotReady, match="shut down before this request finished"):
            job.future.result(TIMEOUT)
    assert engine._gauges == {"live_rows": 0, "queue_depth": 0}  # nothing left counted
    release.join()
