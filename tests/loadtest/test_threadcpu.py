"""CPU time of other processes (``threadcpu.process_seconds``, the front ends' column of
nmt-bench): read from the scheduler's nanosecond counters, not 10 ms clock ticks."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from loadtest import threadcpu

# Burns about 30 ms of CPU, says so, then waits to be killed.
BURN = """
import time
end = time.process_time() + 0.03
while time.process_time() < end:
    pass
print("done", flush=True)
time.sleep(60)
"""


@pytest.fixture
def burnt():
    child = subprocess.Popen([sys.executable, "-c", BURN], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "done\n"
        yield child.pid
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not threadcpu.SCHEDSTAT, reason="no /proc/<pid>/schedstat here")
def test_a_short_burst_of_another_process_is_counted(burnt):
    used = threadcpu.process_seconds([burnt])
    # the 30 ms burnt and the interpreter's start-up; never rounded down to whole ticks
    assert 0.03 <= used < 5
    assert abs(used * 100 - round(used * 100)) > 1e-9  # nanoseconds, not whole 10 ms ticks
    # the ticks agree, within a few ticks and the reading's own moment
    assert abs(threadcpu._stat_seconds(burnt) - used) < 0.05
    time.sleep(0.05)  # asleep: no more CPU
    assert threadcpu.process_seconds([burnt]) - used < 0.005


def test_a_process_that_is_gone_counts_nothing():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert threadcpu.process_seconds([child.pid]) == 0.0
    assert threadcpu._stat_seconds(child.pid) == 0.0
    assert threadcpu.process_seconds([]) == 0.0
