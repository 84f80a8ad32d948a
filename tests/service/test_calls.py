"""How a handler waits for its job (``service.calls.job_result``): the engine's future
is resolved on another thread, read once on the loop, never cancelled from here, and a
call that gives up leaves nothing behind for the loop to complain about."""

import asyncio
import gc
import threading
from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from service.calls import job_result
from service.errors import DeadlineExpired, EngineFailure


def later(fn, *args, delay: float = 0.02) -> threading.Thread:
    """``fn(*args)`` on another thread after ``delay`` seconds, as the scheduler does."""
    thread = threading.Timer(delay, fn, args)
    thread.start()
    return thread


async def complaints_after(coro) -> list[dict]:
    """What the running loop's exception handler saw while ``coro`` ran and a moment
    after (a future whose exception nobody retrieved, a callback that raised)."""
    seen: list[dict] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    await coro
    await asyncio.sleep(0.1)
    return seen


def test_the_result_set_on_another_thread_is_returned():
    job = SimpleNamespace(future=Future())
    later(job.future.set_result, [["hola"]])
    assert asyncio.run(job_result(job, 5.0)) == [["hola"]]


def test_a_job_already_done_is_returned():
    job = SimpleNamespace(future=Future())
    job.future.set_result([["ya"]])
    assert asyncio.run(job_result(job, 5.0)) == [["ya"]]


def test_the_jobs_error_is_raised_as_it_is():
    job = SimpleNamespace(future=Future())
    error = EngineFailure("the decoder failed")
    later(job.future.set_exception, error)

    async def main():
        with pytest.raises(EngineFailure, match="the decoder failed") as caught:
            await job_result(job, 5.0)
        assert caught.value is error

    asyncio.run(main())


def test_a_timeout_is_deadline_expired_and_leaves_the_job_alone():
    job = SimpleNamespace(future=Future())

    async def main():
        with pytest.raises(DeadlineExpired):
            await job_result(job, 0.05)
        # the engine's answer after the handler gave up: no error on the loop
        later(job.future.set_exception, EngineFailure("too late"), delay=0.0).join()

    assert asyncio.run(complaints_after(main())) == []
    assert not job.future.cancelled()  # only job.cancel() stops a job


def test_a_cancelled_call_leaves_the_job_to_finish():
    job = SimpleNamespace(future=Future())

    async def main():
        task = asyncio.create_task(job_result(job, 5.0))
        await asyncio.sleep(0.02)
        task.cancel()  # the client went away
        with pytest.raises(asyncio.CancelledError):
            await task
        later(job.future.set_result, [["tarde"]], delay=0.0).join()

    assert asyncio.run(complaints_after(main())) == []
    assert not job.future.cancelled()
    assert job.future.result() == [["tarde"]]


def test_an_error_landing_as_the_call_is_cancelled_is_not_left_unretrieved():
    """The engine's error reaches the waiter, and the call is cancelled before its task
    wakes: the task never reads the waiter, and the loop must not complain about it."""
    job = SimpleNamespace(future=Future())

    async def main():
        loop = asyncio.get_running_loop()
        task = asyncio.create_task(job_result(job, 5.0))
        await asyncio.sleep(0)  # the task now awaits its waiter

        def land():
            job.future.set_exception(EngineFailure("late"))  # queues the waiter's outcome
            loop.call_soon(task.cancel)  # runs after it, before the task wakes

        loop.call_soon(land)
        with pytest.raises(asyncio.CancelledError):
            await task
        task = None  # the last reference: the waiter goes with it
        gc.collect()

    assert asyncio.run(complaints_after(main())) == []


def test_the_drain_deadline_fails_waiting_calls_but_not_finished_ones():
    """``fail_in_flight`` (shortly before a shutdown's grace runs out) answers a call still
    decoding UNAVAILABLE, in the server's words; one whose job just finished, its answer
    queued on the loop, keeps its answer (helper-82's review)."""
    import asyncio

    from prometheus_client import CollectorRegistry

    from models.options import DecodeOptions
    from service.calls import job_result
    from service.errors import DRAINED, NotReady
    from service.jobs import Job
    from service.metrics import create_metrics
    from service.servicer import TranslatorServicer

    servicer = TranslatorServicer({}, "m", create_metrics(CollectorRegistry()))

    async def main():
        finishing = Job([[5]], DecodeOptions(), deadline=None)
        decoding = Job([[6]], DecodeOptions(), deadline=None)
        done = asyncio.create_task(job_result(finishing, 30, servicer._waiting))
        late = asyncio.create_task(job_result(decoding, 30, servicer._waiting))
        await asyncio.sleep(0)  # both waiting
        assert len(servicer._waiting) == 2
        finishing.future.set_result([["answer"]])  # its outcome is queued on the loop
        servicer.fail_in_flight()
        assert await done == [["answer"]]
        with pytest.raises(NotReady, match=DRAINED):
            await late
        assert servicer._waiting == {}

    asyncio.run(main())
