"""A real Prometheus, configured from deploy/prometheus/prometheus.yml, scrapes a real
server and counts exactly the requests it served."""

from __future__ import annotations

import json
import shutil

import yaml

from nmt_api.nmt.v1 import translator_pb2 as pb
from tests.deploy.helpers import (
    DASHBOARD,
    PROMETHEUS_YML,
    dashboard_exprs,
    free_port,
    http_get,
    local_prometheus_config,
    prometheus_query,
    wait_until,
)
from tests.service.server_helpers import TIMEOUT, stub_for

REQUESTS = 12


def scalar(port: int, query: str) -> float | None:
    result = prometheus_query(port, query)
    return float(result[0]["value"][1]) if result else None


def test_prometheus_counts_every_request(server_factory, tiny_bundle, processes, tmp_path):
    assert shutil.which("prometheus"), "prometheus is not on PATH (make apt)"
    server = server_factory()
    config = local_prometheus_config(
        yaml.safe_load(PROMETHEUS_YML.read_text()), f"127.0.0.1:{server.metrics_port}"
    )
    config_path = tmp_path / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    port = free_port()
    prom = processes.start(
        "prometheus",
        [
            "prometheus",
            f"--config.file={config_path}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
    )
    ready = wait_until(
        lambda: not prom.alive() or http_get(f"http://127.0.0.1:{port}/-/ready")[0] == 200, 60
    )
    assert ready and prom.alive(), prom.log()

    channel, stub = stub_for(server.port)
    beam = pb.DecodeOptions(strategy=pb.STRATEGY_BEAM, beam_size=3)
    with channel:
        for i in range(REQUESTS - 2):
            text = tiny_bundle.sentences[1 + i % 5]
            options = beam if i % 2 else pb.DecodeOptions()
            stub.Translate(pb.TranslateRequest(texts=[text], options=options), timeout=TIMEOUT)
        for text in tiny_bundle.sentences[1:3]:
            list(stub.TranslateStream(pb.TranslateStreamRequest(text=text), timeout=TIMEOUT))

    query = "sum(nmt_request_duration_seconds_count)"
    counted = wait_until(lambda: scalar(port, query) == REQUESTS, timeout=30, every=0.5)
    assert counted, (scalar(port, query), prom.log())
    assert scalar(port, 'up{job="nmt"}') == 1.0
    by_code = prometheus_query(port, "sum by (method, code) (nmt_requests_total) > 0")
    assert {(r["metric"]["method"], r["metric"]["code"]) for r in by_code} == {
        ("Translate", "OK"),
        ("TranslateStream", "OK"),
    }
    # the server-error series exist at 0 before any error (rate() then sees the first)
    internal = prometheus_query(port, 'nmt_requests_total{code="INTERNAL"}')
    assert {r["metric"]["method"] for r in internal} == {"Translate", "TranslateStream", "Score"}
    assert all(float(r["value"][1]) == 0.0 for r in internal)
    (info,) = prometheus_query(port, "nmt_model_info")
    assert info["metric"]["provider"] == "CPUExecutionProvider"
    # Every call succeeded, so no series of a failure code exists: the dashboard's error
    # ratio must still say 0 (a plain failures/total ratio is empty, "No data").
    ratios = [e for t, e in dashboard_exprs(json.loads(DASHBOARD.read_text())) if "Error" in t]
    assert len(ratios) == 2  # the server's errors, and any code but OK
    for ratio in ratios:
        assert wait_until(lambda r=ratio: scalar(port, r) is not None, timeout=30, every=0.5)
        assert scalar(port, ratio) == 0.0, ratio
    # the alerting rules loaded, each evaluated without error, none firing
    status, body = http_get(f"http://127.0.0.1:{port}/api/v1/rules")
    rules = [r for g in json.loads(body)["data"]["groups"] for r in g["rules"]]
    assert status == 200 and len(rules) == 5, body
    assert wait_until(
        lambda: all(r.get("lastEvaluation", "").startswith("20") for r in _rules(port)), 30, 0.5
    ), _rules(port)
    assert all(r["health"] == "ok" and r["state"] == "inactive" for r in _rules(port))
    assert processes.stop(prom) == 0


def _rules(port: int) -> list[dict]:
    _, body = http_get(f"http://127.0.0.1:{port}/api/v1/rules")
    return [r for g in json.loads(body)["data"]["groups"] for r in g["rules"]]
