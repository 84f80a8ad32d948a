"""Headless runs of loadtest/locustfile.py against a real server: a clean run passes its
SLO, overload is reported under its own name, and a missed p95 target fails the run."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.helpers import LOCUSTFILE, ROOT

OVERLOAD_SUFFIX = " [RESOURCE_EXHAUSTED]"


def python(*args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    """``python ARGS`` from the repository root (importable), output captured."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def locust(
    tmp_path: Path, host: str, seconds: int, users: int = 4, **env: str
) -> tuple[subprocess.CompletedProcess, list[dict[str, str]], list[dict[str, str]]]:
    """Run Locust headless: ``(process, stats rows, failure rows)`` from its CSV files."""
    prefix = tmp_path / "nmt"
    cmd = [
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "-u",
        str(users),
        "-r",
        str(users),
        "-t",
        f"{seconds}s",
        "--host",
        host,
        "--csv",
        str(prefix),
        "--only-summary",
        "--stop-timeout",
        "10",
    ]
    result = python(*cmd, timeout=seconds + 90, **env)

    def rows(suffix: str) -> list[dict[str, str]]:
        path = Path(f"{prefix}_{suffix}.csv")
        assert path.is_file(), result.stdout[-3000:] + result.stderr[-3000:]
        with path.open(newline="") as f:
            return list(csv.DictReader(f))

    return result, rows("stats"), rows("failures")


def aggregated(stats: list[dict[str, str]]) -> dict[str, str]:
    (row,) = [r for r in stats if r["Name"] == "Aggregated"]
    return row


def host(server, transport: str) -> str:
    """Locust's ``--host`` for the server's gRPC port or its HTTP/JSON API."""
    if transport == "http":
        return f"http://127.0.0.1:{server.http_port}"
    return f"127.0.0.1:{server.port}"


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_locust_smoke_run_passes_its_slo(server_factory, tmp_path, transport):
    # The tiny test model's 120-piece vocabulary turns long sample sentences into more
    # than the default 128 source pieces; a real model does not.
    server = server_factory(max_source_tokens=1024, server={"http_port": 0})
    before = requests_counted(server)
    result, stats, failures = locust(
        tmp_path, host(server, transport), seconds=15, NMT_SLO_P95_MS="20000"
    )
    log = result.stderr[-4000:]
    assert result.returncode == 0, log
    total = aggregated(stats)
    assert int(total["Request Count"]) > 0, log
    assert int(total["Failure Count"]) == 0, failures
    assert failures == []
    names = {r["Name"] for r in stats} - {"Aggregated"}
    assert names == {
        "Translate greedy short",
        "Translate beam5 long",
        "Translate beam5 attention",
    }, names
    assert "SLO met" in result.stderr
    # through the transport asked for (Locust's HTTP client reports POST), to the server
    assert {r["Type"] for r in stats if r["Name"] != "Aggregated"} == {
        "http": {"POST"},
        "grpc": {"grpc"},
    }[transport]
    assert requests_counted(server) - before >= int(total["Request Count"])


def requests_counted(server) -> float:
    return (
        server.registry.get_sample_value(
            "nmt_requests_total", {"method": "Translate", "code": "OK"}
        )
        or 0.0
    )


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_locust_reports_overload_under_its_own_name(server_factory, tmp_path, transport):
    server = server_factory(server={"http_port": 0})
    server.servicer._inflight = 1 << 30  # every translation is refused: RESOURCE_EXHAUSTED
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("A small house.\nThe dog barked at the man in the garden.\n")
    result, stats, failures = locust(
        tmp_path, host(server, transport), seconds=4, NMT_SENTENCES=str(sentences)
    )
    assert result.returncode == 1, result.stderr[-4000:]
    assert "SLO violated" in result.stderr and str(sentences) in result.stderr
    rows = [r for r in stats if r["Name"] != "Aggregated"]
    assert rows and all(r["Name"].endswith(OVERLOAD_SUFFIX) for r in rows), rows
    for row in rows:
        assert int(row["Request Count"]) == int(row["Failure Count"]) > 0
    assert failures and all(
        r["Error"].startswith("RpcFailure('RESOURCE_EXHAUSTED") for r in failures
    )


def test_locust_fails_the_run_when_p95_misses_the_target(server_factory, tmp_path):
    server = server_factory(max_source_tokens=1024)
    result, stats, failures = locust(
        tmp_path, f"grpc://127.0.0.1:{server.port}", seconds=4, users=2, NMT_SLO_P95_MS="0.001"
    )
    assert result.returncode == 1, result.stderr[-4000:]
    assert "SLO violated: p95" in result.stderr
    assert int(aggregated(stats)["Request Count"]) > 0 and failures == []


@pytest.mark.parametrize(
    "given, match",
    [
        ("ftp://127.0.0.1:50051", "unknown scheme 'ftp'"),
        ("http://127.0.0.1", "must be HOST:PORT"),
        ("127.0.0.1:port", "must be HOST:PORT"),
    ],
)
def test_a_bad_host_is_one_clear_error(given, match):
    result = python(
        "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-t", "1s", "--host", given
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert match in result.stderr and "Traceback" not in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize(
    "env, match",
    [
        ({"NMT_SLO_MAX_FAIL_RATIO": "nan"}, "NMT_SLO_MAX_FAIL_RATIO is nan: give a ratio"),
        ({"NMT_SLO_MAX_FAIL_RATIO": "5"}, "NMT_SLO_MAX_FAIL_RATIO is 5.0: give a ratio in [0, 1]"),
        ({"NMT_SLO_P95_MS": "nan"}, "NMT_SLO_P95_MS is nan: give milliseconds > 0"),
        ({"NMT_RPC_TIMEOUT": "-1"}, "NMT_RPC_TIMEOUT is -1.0: give seconds > 0"),
        ({"NMT_THINK_TIME": "inf"}, "NMT_THINK_TIME is inf: give seconds >= 0"),
    ],
)
def test_options_the_slo_gate_could_not_judge_by_are_one_clear_error(env, match):
    """A NaN or a ratio meant as a percentage (5 for 5 %) made the gate pass a run whose
    every request failed (helper-89)."""
    result = python(
        "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-t", "1s",
        "--host", "127.0.0.1:1", **env,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    assert match in result.stderr and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "SLO met" not in result.stderr


def test_http_failures_read_as_grpc_statuses():
    """What the HTTP user reports for an answer: the server's error object by its status;
    a proxy's page or no answer by the HTTP status, in words (numbers are masked)."""
    script = """
import json
from locust.contrib.fasthttp import LocustBadStatusCode
from loadtest.locustfile import http_failure
error = LocustBadStatusCode("/v1/translate", code=502)
server = json.dumps({"code": 8, "status": "RESOURCE_EXHAUSTED", "message": "3 in flight"})
for status, body, exc in [
    (429, server.encode(), error),
    (502, b"<html>\\n<h1>502 Bad Gateway</h1></html>", error),
    (429, b"Too Many Requests", error),
    (0, b"", ConnectionRefusedError()),
    (418, b"", error),
]:
    failure = http_failure(status, body, exc)
    print(failure.code.name, "|", failure)
"""
    result = python("-c", script)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [
        "RESOURCE_EXHAUSTED | RESOURCE_EXHAUSTED: N in flight",
        "UNAVAILABLE | UNAVAILABLE: HTTP Bad Gateway: <html> <hN>N Bad Gateway</hN></html>",
        "RESOURCE_EXHAUSTED | RESOURCE_EXHAUSTED: HTTP Too Many Requests: Too Many Requests",
        "UNAVAILABLE | UNAVAILABLE: HTTP no answer: ConnectionRefusedError",
        "UNKNOWN | UNKNOWN: HTTP I'm a Teapot: LocustBadStatusCode",
    ]
