"""Decode lanes: several engines (scheduler thread, decode loop, encoder thread each) over
one model's ONNX Runtime sessions (``--decode-lanes``).

One scheduler alternates between the decoder call and the Python step around it (the
candidates, each sentence's selection, finished sentences, admissions): while it runs
Python the CPU cores (or the GPU) that run the decoder wait, and while the decoder runs
its Python waits. With two lanes, each decoding its own sentences, one lane's Python runs
while the other's decoder call (which releases the GIL) runs, and on the CPU each lane's
decoder call takes a core of its own instead of splitting one small batch over two
threads (ORT's intra-op parallelism pays off little at a few dozen rows). ONNX Runtime
sessions take concurrent ``run`` calls; each lane has its own memory pool and decoder
states.

A request goes whole to one lane (:func:`pick_lane`): the fullest lane still under
:data:`FILL_ROWS` rows admitted or waiting (:attr:`service.engine.Engine.load`), or under
:data:`GREEDY_FILL_ROWS` for a greedy request, else the one with the fewest. A
sentence's translation does not depend on its lane (nor on its batch mates: the bundles
are batch invariant). Each lane admits up to ``max_live_rows`` rows (a request's limit is
unchanged) and queues its share of ``max_queue``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

from models.options import DecodeOptions
from service.bundle import Bundle
from service.constraints import Constraints
from service.engine import Engine
from service.front import EngineFront
from service.jobs import Job, PrefixCallback
from service.limits import EngineConfig
from service.metrics import Metrics
from service.sessions import RuntimeConfig, usable_cpus
from service.strategies import GREEDY, strategy_for

# --decode-lanes 0 (auto): on the CPU two lanes where there are two cores or more (on 2
# cores, against one engine: greedy 1.12-1.13x at 32-64 clients, 0.97x at 8; beam 5
# 1.17-1.24x at 8-64; loadtest/results/bench-cpu-lanes.md); on CUDA one (two were slower on
# an H100: 2,405 against 3,028 greedy sentences/s, loadtest/results/bench-gpu-h100-lanes2.md).
AUTO_CPU_LANES = 2

# A lane's rows before the next request opens another lane. Every decoder step costs a
# fixed share (the ORT call, the scheduler's Python around it) whatever its rows, so a
# light load spread over every lane pays it once per lane and step for half the rows.
# On 2 cores (Xeon, 2026-11-27), against spreading every request to the emptiest lane
# (32aee0c): greedy 1.24x sentences/s at 8 clients (8 interleaved rounds, every round
# ahead; 1.53x in loadtest/results/bench-cpu-fill.md) and even at 32 (0.99x and 0.94x in
# two 8-round runs, 1.11x in the bench), beam 5 even (1.03x at 8 clients over 8 rounds).
# One lane alone gave greedy as much but beam 5 0.83-0.89x. Beam rows pass 16 within a
# few requests, so beam load still spreads over the lanes.
FILL_ROWS = 16

# The same for a greedy request (one strategy_for decodes with Greedy). Greedy rows cost
# little Python a step (arrays for the whole batch, --greedy-steps decoder steps a call),
# so a second lane buys little overlap, while halving the batch makes each row's share of
# a decoder call dearer and puts a second decoder call on the cores that gRPC and the
# encoder need.
# On 2 cores (Xeon, 2026-11-27), against greedy requests filling to FILL_ROWS like the
# others (loadtest/results/bench-cpu-greedyfill.md, A/B rows, 5 interleaved rounds):
# greedy 1.11x sentences/s at 32 clients and 1.10x at 64 (every round ahead at 64), even
# at 1 and 8; beam 5 0.95-0.99x, the run's spread (its path is unchanged). A second run
# (bench-cpu-greedyfill-repeat.md): greedy 1.08x at 32, 1.03x at 64. Scratch runs
# put 32 and "never a second lane" within that spread of 64. One lane for every request
# gave greedy as much but beam 5 0.79-0.89x (scratch runs, in the note).
GREEDY_FILL_ROWS = 64


def pick_lane(loads: Sequence[int], fill: int) -> int:
    """The lane for the next request, given each lane's rows admitted or waiting: the
    fullest under ``fill`` rows (ties: the first), else the emptiest (ties: the first)."""
    filling = [i for i, rows in enumerate(loads) if rows < fill]
    if filling:
        return max(filling, key=loads.__getitem__)
    return min(range(len(loads)), key=loads.__getitem__)


def lanes_for(config: EngineConfig, gpu: bool, cores: int | None = None) -> int:
    """The lanes ``config.decode_lanes`` means on this machine (0: auto)."""
    if config.decode_lanes:
        return config.decode_lanes
    cores = usable_cpus() if cores is None else cores
    return 1 if gpu or cores < 2 else AUTO_CPU_LANES


def runtime_for(runtime: RuntimeConfig, lanes: int) -> RuntimeConfig:
    """``runtime`` for ``lanes`` lanes sharing its sessions: with ``--intra-op-threads 0``
    (all cores) each lane's decoder call gets its share of the cores instead."""
    if lanes <= 1 or runtime.intra_op_threads:
        return runtime
    threads = max(1, usable_cpus() // lanes)
    return dataclasses.replace(runtime, intra_op_threads=threads)


def for_machine(
    engine: EngineConfig, runtime: RuntimeConfig, gpu: bool
) -> tuple[EngineConfig, RuntimeConfig]:
    """``engine`` with its decode lanes resolved (0: auto) and ``runtime`` with the
    sessions' threads that lane count sets, as the server runs them on this machine."""
    lanes = lanes_for(engine, gpu)
    return dataclasses.replace(engine, decode_lanes=lanes), runtime_for(runtime, lanes)


def make_engine(bundle: Bundle, config: EngineConfig, metrics: Metrics) -> Engine | EngineLanes:
    """``config.decode_lanes`` (resolved: > 0) engines over ``bundle``: one
    :class:`Engine`, or :class:`EngineLanes`."""
    if config.decode_lanes <= 1:
        return Engine(bundle, config, metrics)
    return EngineLanes(bundle, config, metrics)


class EngineLanes(EngineFront):
    """Several :class:`Engine` s of one model behind the interface of one."""

    def __init__(self, bundle: Bundle, config: EngineConfig, metrics: Metrics) -> None:
        n = config.decode_lanes
        share = dataclasses.replace(config, max_queue=max(1, -(-config.max_queue // n)))
        self.lanes = [Engine(bundle, share, metrics) for _ in range(n)]
        for lane in self.lanes if n > 1 else ():  # a refusal says whose queue was full
            lane.queue_owner = f" in this decode lane; --max-queue {config.max_queue} over {n}"
        self.bundle = bundle
        self.metrics = metrics
        self.config = self.lanes[0].config
        self.max_source_tokens = self.lanes[0].max_source_tokens

    def start(self) -> None:
        for lane in self.lanes:
            lane.start()

    def stop(self, timeout: float | None = None) -> None:
        """Every lane drains at once, within ``timeout`` seconds."""
        threads = [
            threading.Thread(target=lane.stop, args=(timeout,), name="nmt-stop-lane")
            for lane in self.lanes
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    @property
    def accepting(self) -> bool:
        return all(lane.accepting for lane in self.lanes)

    def health(self) -> str | None:
        for i, lane in enumerate(self.lanes):
            reason = lane.health()
            if reason is not None:
                return f"decode lane {i}: {reason}"
        return None

    @property
    def idle(self) -> bool:
        return all(lane.idle for lane in self.lanes)

    def warmup(self) -> None:
        for lane in self.lanes:
            lane.warmup()

    def enqueue(
        self,
        sources: list[list[int]],
        options: DecodeOptions,
        timeout: float | None = None,
        on_prefix: PrefixCallback | None = None,
        prefixes: Sequence[tuple[int, ...]] = (),
        constraints: Sequence[Constraints | None] = (),
        draw_keys: Sequence[tuple[int, ...]] = (),
    ) -> Job:
        fill = GREEDY_FILL_ROWS if strategy_for(options) is GREEDY else FILL_ROWS
        lane = self.lanes[pick_lane([lane.load for lane in self.lanes], fill)]
        return lane.enqueue(sources, options, timeout, on_prefix, prefixes, constraints, draw_keys)
