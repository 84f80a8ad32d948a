"""``python -m loadtest.soak``: a short real soak of ``nmt-serve`` started by the script,
the refusal to run against nothing, and gates that fail on no data."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from loadtest import soak, soakprobe, soakreport


def test_short_soak_of_a_started_server(tmp_path, capsys):
    """The committed en-es model, not the tiny one: a client can cancel a stream after its
    first message and be sure the server is still decoding only when the translation is
    long, and the tiny model's greedy translations end after a few tokens."""
    out = tmp_path / "soak"
    argv = [
        "--start",
        "--minutes", "0.4",
        "--clients", "4",
        "--warmup", "6",
        "--sample-every", "2",
        "--progress-every", "10",
        "--overload", "2",
        "--overload-first", "4",
        "--overload-period", "9",
        "--overload-burst", "3",
        "--half-open", "2",
        "--max-slope", "1000",
        "--out", str(out),
        "--",
        "--max-inflight", "4",
        "--receive-timeout", "2",
        "--intra-op-threads", "1",
        "--drain-announce", "0.5",
        "--shutdown-grace", "5",
    ]  # fmt: skip
    rc = soak.main(argv)
    printed = capsys.readouterr().out
    result = json.loads(out.with_name("soak.json").read_text())
    assert out.with_name("soak.md").read_text() == printed.removesuffix("\n")
    assert rc == 0, result["verdict"]

    assert result["passed"] and result["verdicts"] == {
        "health_never_failed": True,
        "counts_match": True,
        "server_exit_0": True,
        "slope_within_limit": True,
    }
    verdict = "\n".join(result["verdict"])
    assert "health never failed" in verdict and "counts match" in verdict
    assert "memory slope last half" in verdict and "nmt-serve exited 0" in verdict

    # Every (method, code) the clients saw, the server counted as often.
    counts = {(c["method"], c["code"]): (c["client"], c["server"]) for c in result["counts"]}
    # Every call the clients made, the server counted once (codes may differ only for
    # calls a client gave up on as the server answered).
    for method in {m for m, _ in counts}:
        rows = [v for (m, _), v in counts.items() if m == method]
        assert sum(c for c, _ in rows) == sum(s for _, s in rows), counts
    for key in [
        ("Translate", "OK"),
        ("TranslateStream", "OK"),
        ("ListModels", "OK"),
        ("Translate", "INVALID_ARGUMENT"),  # bad body, unknown model, beam over the limit
        ("Translate", "RESOURCE_EXHAUSTED"),  # the overload bursts
        ("Translate", "DEADLINE_EXCEEDED"),  # half-open calls and short deadlines
    ]:
        assert counts.get(key, (0, 0))[0] > 0, (key, counts)
    assert result["kinds"]["half_open"]["codes"] == {
        "DEADLINE_EXCEEDED": result["kinds"]["half_open"]["codes"].get("DEADLINE_EXCEEDED", -1)
    }
    # requests that answer OK or are turned away while overloaded, never an error
    for kind in ("greedy", "beam5_nbest3", "beam5_constraints", "beam5_diverse"):
        codes = set(result["kinds"].get(kind, {"codes": {}})["codes"])
        assert codes <= {"OK", "RESOURCE_EXHAUSTED"}, (kind, codes)
    assert result["rejected"]["too_many_inflight"] > 0
    assert result["settings"]["overload_bursts_s"], "no overload burst ran"

    health = result["health"]
    assert health["checks"] > 50 and health["failures"] == 0
    assert 0 < health["p50_ms"] <= health["p99_ms"] <= health["max_ms"]

    memory = result["memory"]
    assert memory["source"] == "/proc/<pid>/status VmRSS"
    assert memory["samples"] >= 10 and memory["samples_last_half"] >= 4
    assert 0 < memory["rss_start_mb"] <= memory["rss_max_mb"]
    assert 0 < memory["rss_end_mb"] <= memory["rss_max_mb"]
    assert math.isfinite(memory["slope_after_warmup_mb_per_min"])
    assert math.isfinite(memory["slope_last_half_mb_per_min"])
    assert "quiet_slope_last_half_mb_per_min" in memory  # between bursts: few samples here

    settings = result["settings"]
    assert settings["started_server"] and settings["server_pid"] > 0
    assert isinstance(settings["server_allocator_env"], dict)
    assert {"python", "grpcio", "onnxruntime"} <= set(settings["versions"])
    assert settings["nproc"] >= 1 and settings["date"] and "--start" in settings["command"]
    assert result["throughput"]["ok_sentences_per_s"] > 0
    assert result["server_log"]["errors"] == 0, result["server_log"]["error_lines"]
    for s in result["samples"]:
        assert {"t_s", "rss_mb", "client_calls", "server_calls", "health_p99_ms"} <= set(s)
    # The server's collector passes over the load, from its /metrics.
    pauses = {(g["process"], g["generation"]): g for g in result["gc_pauses"]}
    young = pauses[("nmt-serve", 0)]
    assert young["passes"] > 10 and young["seconds"] > 0 and 0 < young["wall_pct"] < 50
    assert 0 < young["p99_under_ms"] <= young["max_under_ms"]
    assert "## Collector pauses" in printed and "| nmt-serve | 0 |" in printed


def test_unreachable_server_is_a_one_line_error():
    ports = [str(soakprobe.free_port()), str(soakprobe.free_port())]
    argv = ["--port", ports[0], "--metrics-port", ports[1], "--connect-timeout", "1"]
    proc = subprocess.run(
        [sys.executable, "-m", "loadtest.soak", *argv],
        cwd=soakprobe.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nmt-soak: error: no SERVING server"), lines


@pytest.mark.parametrize(
    "points",
    [[], [(10.0, 100.0)], [(10.0, 100.0), (10.0, 101.0)], [(0.0, 1.0), (10.0, float("nan"))]],
)
def test_slope_is_nan_without_two_finite_points_and_the_gate_fails(points):
    slope = soakreport.slope_per_minute(points)
    assert math.isnan(slope)
    assert not soakreport.slope_ok(slope, 1000.0)


def test_gates_fail_on_empty_input_and_nan():
    assert soakreport.slope_per_minute(
        [(0.0, 100.0), (60.0, 101.0), (120.0, 102.0)]
    ) == pytest.approx(1)
    assert soakreport.slope_ok(0.5, 1.0) and soakreport.slope_ok(-3.0, 1.0)
    assert not soakreport.slope_ok(1.5, 1.0)
    assert not soakreport.slope_ok(float("inf"), 1.0) and not soakreport.slope_ok(0.0, float("nan"))
    assert not soakreport.health_ok({}) and not soakreport.health_ok({"checks": 0, "failures": 0})
    assert not soakreport.health_ok({"checks": 10, "failures": 1}) and soakreport.health_ok(
        {"checks": 10, "failures": 0}
    )
    assert not soakreport.counts_match({}, {})
    assert not soakreport.counts_match(
        {"Translate OK": 3}, {"Translate OK": 3, "Translate CANCELLED": 1}
    )
    assert soakreport.counts_match({"Translate OK": 3}, {"Translate OK": 3})
    # A call the client cancelled as the server answered: counted once, with its status.
    raced = {"Translate OK": 3, "Translate CANCELLED": 1}
    assert soakreport.counts_match(raced, {"Translate OK": 4})
    wrong = {"Translate OK": 3, "Translate INVALID_ARGUMENT": 1}  # not a call given up on
    assert not soakreport.counts_match(wrong, {"Translate OK": 4})
    assert not soakreport.counts_match(
        {"Translate OK": 4}, {"Translate OK": 3, "Translate CANCELLED": 1}
    )
    memory = soakreport.memory([], warmup=60, wall=0.0)
    assert memory["slope_last_half_mb_per_min"] is None and memory["rss_start_mb"] is None
    assert math.isnan(soakprobe.quantile([], 0.99))


def test_memory_between_bursts_leaves_the_bursts_out():
    # Flat at 200 MB, 300 MB during a burst at 100-130 s: every-sample slopes see the
    # burst, the between-bursts slope and the baseline do not.
    samples = [
        {"t_s": float(t), "rss_mb": 300.0 if 100 <= t <= 130 else 200.0, "rss_source": "x"}
        for t in range(0, 301, 10)
    ]
    memory = soakreport.memory(
        samples, warmup=100.0, wall=300.0, bursts=[(100.0, 130.0)], tail=10.0
    )
    assert memory["rss_start_mb"] == 200.0 and memory["rss_start_t_s"] == 150.0
    assert memory["rss_max_mb"] == 300.0 and memory["rss_end_mb"] == 200.0
    assert memory["quiet_slope_after_warmup_mb_per_min"] == 0.0
    assert memory["slope_after_warmup_mb_per_min"] < 0


def test_max_slope_must_be_a_number():
    with pytest.raises(SystemExit) as exc:
        soak.parse_args(["--max-slope", "nan"])
    assert exc.value.code == 2


def _histogram(counts: dict[float, float], total: float) -> dict:
    """A scraped ``nmt_gc_pause_seconds`` child: cumulative buckets (seconds)."""
    buckets, running = {}, 0.0
    for le, n in sorted(counts.items()):
        running += n
        buckets[le] = running
    return {"count": running, "sum": total, "buckets": buckets}


def test_gc_pauses_are_the_passes_between_two_scrapes():
    key = ("nmt-serve", "0")
    before = {key: _histogram({0.0001: 5, 0.001: 0, 0.01: 0, math.inf: 0}, 0.0004)}
    # 200 passes more: 197 under 0.1 ms, 2 under 1 ms, 1 under 10 ms
    after = {
        key: _histogram({0.0001: 202, 0.001: 2, 0.01: 1, math.inf: 0}, 0.0504),
        ("nmt-serve", "2"): _histogram({0.0001: 0, 0.001: 0, 0.01: 0, math.inf: 0}, 0.0),
        ("nmt-engine-en-es", "2"): _histogram({0.0001: 0, 0.001: 0, 0.01: 0, math.inf: 1}, 0.3),
    }
    rows = soakprobe.gc_pauses(before, after, wall=10.0)
    assert rows == [
        {
            "process": "nmt-engine-en-es",
            "generation": 2,
            "passes": 1,
            "per_s": 0.1,
            "seconds": 0.3,
            "wall_pct": 3.0,
            "p99_under_ms": None,  # over the largest bound
            "max_under_ms": None,
        },
        {
            "process": "nmt-serve",
            "generation": 0,
            "passes": 200,
            "per_s": 20.0,
            "seconds": 0.05,
            "wall_pct": 0.5,
            "p99_under_ms": 1.0,  # the 198th pass ended under 1 ms
            "max_under_ms": 10.0,
        },
    ]  # a generation without passes is left out
    assert soakprobe.gc_pauses({}, {}, wall=10.0) == []
    assert soakprobe.gc_pauses(after, after, wall=10.0) == []
    nan = {key: _histogram({0.0001: math.nan, math.inf: 0}, math.nan)}
    assert soakprobe.gc_pauses(before, nan, wall=10.0) == []
