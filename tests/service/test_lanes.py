"""``--decode-lanes``: several engines over one model's sessions (service/lanes.py).

Lanes answer exactly as one engine does, a light load fills one lane before the next
opens, every lane gets work under load, the shared gauges add up, one lane's failure is
the server's, a stop drains every lane, and the sessions' threads are split between the
lanes.
"""

from __future__ import annotations

import os
import re
import threading

import pytest

from models.options import DecodeOptions
from service import lanes as lanes_module
from service.engine import Engine
from service.lanes import FILL_ROWS, GREEDY_FILL_ROWS, EngineLanes, lanes_for, pick_lane
from service.limits import EngineConfig
from tests.service.server_fixtures import TINY_MODEL
from tests.service.server_helpers import TIMEOUT, wait_until

OPTIONS = [
    DecodeOptions(beam_size=1),
    DecodeOptions(beam_size=1, return_attention=True),
    DecodeOptions(beam_size=4, n_best=2, return_attention=True),
]


@pytest.mark.parametrize(
    ("lanes", "gpu", "cores", "want"),
    [(0, False, 2, 2), (0, False, 16, 2), (0, False, 1, 1), (0, True, 16, 1), (3, True, 1, 3)],
)
def test_lanes_for_the_machine(lanes, gpu, cores, want):
    assert lanes_for(EngineConfig(decode_lanes=lanes), gpu, cores) == want


@pytest.mark.parametrize(
    ("loads", "want"),
    [
        ([0, 0], 0),  # idle: the first lane
        ([5, 0], 0),  # the fullest under FILL_ROWS, not the emptiest
        ([0, 5], 1),
        ([FILL_ROWS - 1, 3], 0),
        ([FILL_ROWS, 3], 1),  # the first is full: the next one fills
        ([FILL_ROWS, FILL_ROWS - 1], 1),
        ([FILL_ROWS, FILL_ROWS], 0),  # all full: the emptiest, ties to the first
        ([FILL_ROWS + 9, FILL_ROWS + 2], 1),
        ([40, 30, 35], 1),
        ([40, 2, 7], 2),
        ([7], 0),
    ],
)
def test_a_request_fills_a_lane_before_opening_the_next(loads, want):
    assert pick_lane(loads, FILL_ROWS) == want


def test_fill_zero_spreads_to_the_emptiest_lane():
    assert [pick_lane(loads, 0) for loads in ([5, 0], [0, 5], [3, 3])] == [1, 0, 0]


def test_negative_lanes_are_refused():
    with pytest.raises(ValueError, match=r"decode_lanes must be >= 0 \(0: auto\), got -1"):
        EngineConfig(decode_lanes=-1)


@pytest.fixture(scope="module")
def pair(server_factory):
    one = server_factory(decode_lanes=1)
    two = server_factory(decode_lanes=2, max_queue=64)
    return one.engines[TINY_MODEL], two


def _translate(engine, texts, options):
    job = engine.submit(texts, options, timeout=TIMEOUT)
    return engine.wait(job, TIMEOUT)


@pytest.mark.parametrize("options", OPTIONS, ids=["greedy", "greedy-attention", "beam4"])
def test_lanes_answer_like_one_engine(pair, tiny_bundle, options):
    one, server = pair
    lanes = server.engines[TINY_MODEL]
    assert isinstance(lanes, EngineLanes) and len(lanes.lanes) == 2
    assert isinstance(one, Engine)
    texts = list(tiny_bundle.sentences[:12])
    # one request per sentence, all at once: both lanes decode
    jobs = [lanes.submit([t], options, timeout=TIMEOUT) for t in texts]
    got = [lanes.wait(job, TIMEOUT)[0] for job in jobs]
    want = _translate(one, texts, options)
    # tokens exactly; scores and attention to float32 noise (other batch mates, other
    # padding: the bundles are batch invariant in their tokens)
    for g, w in zip(got, want, strict=True):
        assert [h.tokens for h in g] == [h.tokens for h in w]
        for gh, wh in zip(g, w, strict=True):
            assert gh.score == pytest.approx(wh.score, abs=1e-5)
            if wh.attention is not None:
                assert abs(gh.attention - wh.attention).max() < 1e-5


def _finished_per_lane(lanes: EngineLanes, texts, options) -> list[int]:
    """Each lane's finished sentences when ``texts`` are sent one per request, all at once."""
    finished = [0] * len(lanes.lanes)
    for i, lane in enumerate(lanes.lanes):
        real = lane._finish_sentence

        def counted(*args, i=i, real=real):
            finished[i] += 1
            return real(*args)

        lane._finish_sentence = counted
    try:
        jobs = [lanes.submit([t], options, timeout=TIMEOUT) for t in texts]
        for job in jobs:
            lanes.wait(job, TIMEOUT)
    finally:
        for lane in lanes.lanes:
            vars(lane).pop("_finish_sentence", None)
    return finished


@pytest.mark.parametrize("which", ["engine", "lanes"])
def test_idle_only_when_nothing_is_reserved_or_queued(pair, tiny_bundle, which):
    """The hint the engine process uses to answer at once (service/enginechild.py): as
    the scheduler finishes the last request it is idle; while another request still
    decodes or waits, it is not."""
    one, server = pair
    engine = one if which == "engine" else server.engines[TINY_MODEL]
    assert engine.idle
    seen: list[tuple[int, bool]] = []
    both_submitted = threading.Event()
    lanes = [engine] if which == "engine" else engine.lanes
    for lane in lanes:
        real = lane._finish_sentence

        def noted(job, *args, real=real):
            real(job, *args)  # the sentence's rows are released before this call
            # (outside the engine's lock) a first request that ends before the second is
            # even submitted, on a busy machine, must still see it in flight
            both_submitted.wait(TIMEOUT)
            seen.append((job.options.min_length, engine.idle))

        lane._finish_sentence = noted
    text = tiny_bundle.sentences[0]
    try:
        long = engine.submit([text], DecodeOptions(beam_size=1, min_length=40), timeout=TIMEOUT)
        short = engine.submit(
            [text], DecodeOptions(beam_size=1, max_length=1, min_length=0), timeout=TIMEOUT
        )
        both_submitted.set()
        for job in (short, long):
            engine.wait(job, TIMEOUT)
    finally:
        both_submitted.set()
        for lane in lanes:
            vars(lane).pop("_finish_sentence", None)
    # whichever ends first sees the other in flight; the last one sees nothing
    assert sorted(length for length, _ in seen) == [0, 40]
    assert [idle for _, idle in seen] == [False, True]
    assert engine.idle


def test_every_lane_decodes_under_load(pair, tiny_bundle):
    _, server = pair
    lanes = server.engines[TINY_MODEL]
    # 16 requests of 2 rows each: more than one lane's FILL_ROWS
    texts = tiny_bundle.sentences[:16]
    finished = _finished_per_lane(lanes, texts, DecodeOptions(beam_size=2))
    assert 2 * len(texts) > FILL_ROWS
    assert sum(finished) == 16 and min(finished) > 0, finished


def test_a_light_load_stays_in_one_lane(pair, tiny_bundle):
    """Fewer rows than FILL_ROWS in flight: every request goes to the first lane (spread
    to the emptiest lane, the second request would open the second)."""
    _, server = pair
    lanes = server.engines[TINY_MODEL]
    texts = tiny_bundle.sentences[:6]
    assert len(texts) < FILL_ROWS
    assert _finished_per_lane(lanes, texts, DecodeOptions(beam_size=1)) == [6, 0]


def test_greedy_requests_fill_a_lane_further(pair, tiny_bundle):
    """More greedy rows than FILL_ROWS (fewer than GREEDY_FILL_ROWS) in flight stay in
    the first lane; as many rows of sampling requests (not greedy) open the second."""
    _, server = pair
    lanes = server.engines[TINY_MODEL]
    texts = (tiny_bundle.sentences * 3)[:24]
    assert FILL_ROWS < len(texts) < GREEDY_FILL_ROWS
    assert _finished_per_lane(lanes, texts, DecodeOptions(beam_size=1)) == [24, 0]
    sampled = _finished_per_lane(lanes, texts, DecodeOptions(sampling_topk=5, seed=1))
    assert sum(sampled) == 24 and min(sampled) > 0, sampled


def test_the_shared_gauges_are_the_sum_of_the_lanes(pair, tiny_bundle, monkeypatch):
    """Each lane moves live_rows by its own change: with both lanes decoding, the gauge
    is their sum (a lane that set it would leave only its own), and 0 once idle."""
    monkeypatch.setattr(lanes_module, "FILL_ROWS", 0)  # two requests, one in each lane
    _, server = pair
    lanes = server.engines[TINY_MODEL]
    model = lanes.bundle.model
    gate, real = threading.Event(), type(model).step

    stepped: set[int] = set()

    def held(*args, **kwargs):  # each lane's first step runs, its next ones wait
        me = threading.get_ident()
        if me in stepped:
            assert gate.wait(TIMEOUT)
        stepped.add(me)
        return real(model, *args, **kwargs)

    model.step = held
    try:
        options = DecodeOptions(beam_size=3)
        jobs = [lanes.submit([t], options, timeout=TIMEOUT) for t in tiny_bundle.sentences[:2]]
        value = server.registry.get_sample_value
        # both lanes took one step (3 live rows each) and wait in their second
        assert wait_until(lambda: value("nmt_live_rows") == 6), value("nmt_live_rows")
        assert [lane._loop.live_rows for lane in lanes.lanes] == [3, 3]
    finally:
        gate.set()
        del model.step
    for job in jobs:
        lanes.wait(job, TIMEOUT)
    assert wait_until(lambda: value("nmt_live_rows") == 0 and value("nmt_queue_depth") == 0)


def test_each_lane_queues_its_share(pair):
    _, server = pair
    assert [lane.config.max_queue for lane in server.engines[TINY_MODEL].lanes] == [32, 32]


def test_the_sessions_threads_are_split_between_the_lanes(pair):
    _, server = pair
    assert server._runtime.intra_op_threads == 1  # the fixture asks for 1 thread itself
    # with --intra-op-threads 0 the server gives each lane cores/lanes threads
    from service.server import ServerConfig, create_server
    from service.sessions import RuntimeConfig

    config = ServerConfig(
        model_repository=server.config.model_repository,
        host="127.0.0.1",
        port=0,
        metrics_port=-1,
        runtime=RuntimeConfig(providers=("cpu",)),
        engine=EngineConfig(decode_lanes=2),
    )
    from prometheus_client import CollectorRegistry

    other, _ = create_server(config, registry=CollectorRegistry())
    try:
        assert other._runtime.intra_op_threads == max(1, (os.cpu_count() or 1) // 2)
    finally:
        other.stop(0)


def test_a_dead_lane_fails_the_server(server_factory):
    server = server_factory(decode_lanes=2)
    lanes = server.engines[TINY_MODEL]

    def broken() -> bool:
        raise RuntimeError("injected scheduler bug")

    lanes.lanes[1]._admit_now = broken
    lanes.lanes[1].enqueue([[5, 6]], DecodeOptions(), timeout=TIMEOUT)
    assert wait_until(server.failed.is_set, timeout=10)
    assert server.failure.startswith(f"model {TINY_MODEL}: decode lane 1: ")
    assert "injected scheduler bug" in server.failure


def test_stop_drains_every_lane(server_factory, tiny_bundle):
    server = server_factory(decode_lanes=2)
    lanes = server.engines[TINY_MODEL]
    options = DecodeOptions(beam_size=5, max_length_ratio=10.0)
    jobs = [lanes.submit([t], options, timeout=TIMEOUT) for t in tiny_bundle.sentences[:8]]
    server.stop(20.0)
    for job in jobs:
        assert job.future.result(0)  # finished, not failed
    assert not lanes.accepting


def test_the_engine_process_runs_lanes(server_factory, tiny_bundle):
    server = server_factory(server={"engine_process": "on"}, decode_lanes=2)
    engine = server.engines[TINY_MODEL]
    assert engine.call(_lane_count) == 2
    (nbest,) = _translate(engine, tiny_bundle.sentences[:1], DecodeOptions())
    assert nbest[0].tokens


def _lane_count(engine) -> int:
    """Run in the engine process."""
    return len(engine.lanes)


def test_a_full_lane_says_its_queue_is_a_share(tiny_bundle):
    """With lanes, each queues its share of --max-queue: a refusal said "(3 waiting)"
    to an operator who set 6 (helper-80, helper-81); one lane still says it plainly."""
    from prometheus_client import CollectorRegistry

    from service.errors import Overloaded
    from service.metrics import create_metrics
    from tests.service.test_fault_isolation import load_tiny_bundle

    bundle = load_tiny_bundle(tiny_bundle)
    for n, said in (
        (2, "(3 waiting in this decode lane; --max-queue 6 over 2)"),
        (1, "(6 waiting)"),
    ):
        engine = EngineLanes(
            bundle, EngineConfig(decode_lanes=n, max_queue=6), create_metrics(CollectorRegistry())
        )
        lane = engine.lanes[0]
        lane._accepting = True  # never started: nothing takes from the queue
        lane._queue.extend([None] * lane.config.max_queue)
        with pytest.raises(Overloaded, match=re.escape(f"request queue is full {said}")):
            lane.submit(["Hello."], DecodeOptions())


@pytest.mark.parametrize(
    ("files", "quota"),
    [
        ({"cpu.max": "200000 100000\n"}, 2.0),
        ({"cpu.max": "150000 100000\n"}, 1.5),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 0.5),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({"cpu.max": "garbage"}, None),
        ({}, None),
    ],
)
def test_the_cgroup_quota_is_read_as_cores(tmp_path, files, quota):
    from service.sessions import cgroup_quota

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_quota(tmp_path) == quota


def test_usable_cpus_take_the_quota_and_the_affinity(tmp_path, monkeypatch):
    """A 2-CPU pod on a 64-core node: ONNX Runtime and the decode lanes counted 64 (helper-81's
    audit); a 1.5-CPU quota rounds up to 2; an affinity mask of 3 cores caps it at 3."""
    from service import sessions

    monkeypatch.setattr(sessions.os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(sessions.os, "cpu_count", lambda: 64)
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert sessions.usable_cpus(tmp_path) == 2
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert sessions.usable_cpus(tmp_path) == 64
    monkeypatch.setattr(sessions.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert sessions.usable_cpus(tmp_path) == 3
    monkeypatch.setattr(sessions, "CGROUP", tmp_path)
    monkeypatch.setattr(sessions, "usable_cpus", lambda cgroup=tmp_path: 2)
    assert sessions.restricted_cpus() == 2  # fewer than the machine's: set
    assert sessions.RuntimeConfig().session_options().intra_op_num_threads == 2
    monkeypatch.setattr(sessions, "usable_cpus", lambda cgroup=tmp_path: 64)
    assert sessions.restricted_cpus() == 0  # all of them: ONNX Runtime's own choice
    assert sessions.RuntimeConfig(intra_op_threads=3).session_options().intra_op_num_threads == 3
    monkeypatch.setattr(lanes_module, "usable_cpus", lambda: 2)
    assert lanes_module.lanes_for(EngineConfig(), gpu=False) == 2
    assert lanes_module.runtime_for(sessions.RuntimeConfig(), 2).intra_op_threads == 1
