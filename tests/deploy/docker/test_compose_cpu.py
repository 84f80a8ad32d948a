"""docker-compose.yml's `cpu` profile under Compose v2 on a real engine: the translator
serves on the published port and Prometheus, in its own container, discovers and scrapes
it. Grafana has no stand-in (it is not packaged in Debian), so only the two services are
started, by name, as the compose file's header says."""

from __future__ import annotations

import json

import pytest

from tests.deploy.docker.client import SENTENCES, http_translate, translate
from tests.deploy.helpers import (
    DASHBOARD,
    dashboard_exprs,
    http_get,
    prometheus_query,
    wait_until,
)

CALLS = 5


@pytest.fixture(scope="module")
def cpu_profile(compose_factory):
    project = compose_factory("cpu")
    project.run("--profile", "cpu", "up", "-d", "--no-build", "translator-cpu", "prometheus")
    return project


@pytest.fixture(scope="module")
def translator(docker, cpu_profile) -> str:
    (name,) = cpu_profile.containers("translator-cpu")
    docker.wait_healthy(name)
    return name


def scalar(port: int, query: str) -> float | None:
    result = prometheus_query(port, query)
    return float(result[0]["value"][1]) if len(result) == 1 else None


def test_translator_serves_on_the_published_ports(docker, translator, compose_env):
    port = int(compose_env["NMT_GRPC_PORT"])
    for i in range(CALLS):
        text = SENTENCES[i % len(SENTENCES)]
        (out,) = translate(port, text)
        assert out.strip() and out != text
    (want,) = translate(port, SENTENCES[0])
    assert http_translate(int(compose_env["NMT_HTTP_HOST_PORT"]), SENTENCES[0]) == (
        want,
        "SERVING",
    )
    host = docker.inspect(translator)["HostConfig"]
    # the pod's restrictions, as deploy/k8s sets them: the translator serves under them
    assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"]
    assert "no-new-privileges:true" in host["SecurityOpt"] and "/tmp" in host["Tmpfs"]
    ports = docker.inspect(translator)["NetworkSettings"]["Ports"]
    # Metrics on the loopback only, on the port the variable chose.
    assert {(b["HostIp"], b["HostPort"]) for b in ports["9464/tcp"]} == {
        ("127.0.0.1", compose_env["NMT_METRICS_HOST_PORT"])
    }


def test_prometheus_discovers_and_scrapes_the_translator(docker, cpu_profile, translator):
    (prometheus,) = cpu_profile.containers("prometheus")
    port = docker.host_port(prometheus, 9090)
    network = f"{cpu_profile.project}_default"
    address = docker.inspect(translator)["NetworkSettings"]["Networks"][network]["IPAddress"]

    def targets() -> dict[str, float]:
        return {
            r["metric"]["instance"]: float(r["value"][1])
            for r in prometheus_query(port, 'up{job="nmt"}')
        }

    # DNS service discovery refreshes every 15 s, the scrape runs every 5 s.
    wait_until(lambda: targets().get(f"{address}:9464") == 1.0, timeout=90, every=1.0)
    assert targets() == {f"{address}:9464": 1.0}, cpu_profile.logs()


def test_prometheus_counts_the_calls_and_the_error_ratio_is_0(docker, cpu_profile, translator):
    (prometheus,) = cpu_profile.containers("prometheus")
    port = docker.host_port(prometheus, 9090)
    query = 'sum(nmt_requests_total{method="Translate",code="OK"})'
    counted = wait_until(lambda: (scalar(port, query) or 0) >= CALLS, timeout=60, every=1.0)
    assert counted, (scalar(port, query), cpu_profile.logs())
    # The dashboard's error-ratio panel (the server's errors, any code but OK), in the
    # Prometheus the deployment runs.
    ratios = [e for t, e in dashboard_exprs(json.loads(DASHBOARD.read_text())) if "Error" in t]
    assert len(ratios) == 2
    for ratio in ratios:
        assert wait_until(lambda r=ratio: scalar(port, r) is not None, 30, 1.0), ratio
        assert scalar(port, ratio) == 0.0
    # the alerting rules the compose file mounts: loaded, none firing
    _, body = http_get(f"http://127.0.0.1:{port}/api/v1/rules")
    rules = [r for g in json.loads(body)["data"]["groups"] for r in g["rules"]]
    assert len(rules) == 5 and all(r["health"] in ("ok", "unknown") for r in rules), body
