"""The CPU serving image, built from the repository's Dockerfile and run on a real Docker
engine: non-root, healthy once warmed up, translating and exporting metrics over its
published ports, clean start log, pinned runtime, and a clean exit on `docker stop`."""

from __future__ import annotations

import http.client
import subprocess
from collections.abc import Iterator

import pytest

from service.httpapi import OPENAPI, OPENAPI_FILE, PAGE
from tests.committed import EN_ES_INT8_VERSION
from tests.deploy.docker.client import SENTENCES, http_translate, list_models, translate
from tests.deploy.docker.conftest import dockerfile_arg
from tests.deploy.docker.engine import Docker
from tests.deploy.helpers import scrape

UID = "10001"
CALLS = 6
# The Kubernetes pod's restrictions: read-only root filesystem, a small /tmp, no capabilities.
POD_RESTRICTIONS = ("--read-only", "--tmpfs", "/tmp:size=64m", "--cap-drop", "ALL")
# Docker picks the host ports: gRPC, HTTP/JSON, metrics
PUBLISHED = ("-p", "127.0.0.1::50051", "-p", "127.0.0.1::8000", "-p", "127.0.0.1::9464")


@pytest.fixture(scope="module")
def container(docker: Docker, cpu_image: str) -> Iterator[str]:
    """The image run as its README says, ports published on 127.0.0.1 (Docker picks
    them), healthy; removed at the end."""
    with docker.healthy_container("cpu", *PUBLISHED, cpu_image) as name:
        yield name


def test_runs_as_uid_10001_not_root(docker, container):
    assert docker.inspect(container)["Config"]["User"] == f"{UID}:{UID}"
    # The server process itself (PID 1), not only a shell exec'ed into the container.
    status = docker.run("exec", container, "cat", "/proc/1/status")
    (uids,) = [line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")]
    assert set(uids) == {UID}, uids
    assert docker.run("exec", container, "id", "-un").strip() == "nmt"


def test_translates_over_the_published_port(docker, container):
    port = docker.host_port(container, 50051)
    assert list_models(port) == [
        ("en-es", "CPUExecutionProvider"),
        ("en-es-luong", "CPUExecutionProvider"),
    ]
    for i in range(CALLS - 1):
        (text,) = translate(port, SENTENCES[i % len(SENTENCES)])
        assert text.strip() and text != SENTENCES[i % len(SENTENCES)]
    n_best = translate(port, SENTENCES[0], beam=4)
    assert len(n_best) == 2 and all(t.strip() for t in n_best)


def test_serves_the_http_api_on_8000(docker, container):
    """The image's NMT_HTTP_PORT: the same translation over HTTP/JSON as over gRPC."""
    grpc_port, http_port = docker.host_port(container, 50051), docker.host_port(container, 8000)
    for sentence in SENTENCES[:2]:
        (want,) = translate(grpc_port, sentence)
        assert http_translate(http_port, sentence) == (want, "SERVING")
    # the installed package carries its static files: the demo page and the API's document
    for path, local in (("/", PAGE), (OPENAPI, OPENAPI_FILE)):
        conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=30)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            assert (response.status, response.read()) == (200, local.read_bytes()), path
        finally:
            conn.close()


def test_serves_metrics_counting_the_calls(docker, container):
    port = docker.host_port(container, 50051)
    before = scrape(docker.host_port(container, 9464))
    translate(port, SENTENCES[1])
    after = scrape(docker.host_port(container, 9464))
    ok = {"method": "Translate", "code": "OK"}
    assert after.value("nmt_requests_total", **ok) == before.value("nmt_requests_total", **ok) + 1
    cpu = {"provider": "CPUExecutionProvider"}
    assert after.value("nmt_model_info", model="en-es", version=EN_ES_INT8_VERSION, **cpu) == 1
    assert after.value("nmt_model_info", model="en-es-luong", version="2", **cpu) == 1


def test_start_log_has_no_warning_and_home_is_writable(docker, container):
    logs = docker.run("logs", container, stderr=subprocess.STDOUT)
    assert "serving on port 50051 (SERVING)" in logs
    # ONNX Runtime warned at every start when $HOME did not exist (it persists a
    # telemetry device id there): "[W:onnxruntime:Default, telemetry_1ds.cc ...]".
    warnings = [x for x in logs.splitlines() if "[W:onnxruntime" in x or " WARNING " in x]
    assert not warnings, warnings
    home = docker.run(
        "exec", container, "sh", "-c", 'test -d "$HOME" -a -w "$HOME" && echo "$HOME"'
    )
    assert home.strip() == "/home/nmt"


def test_image_ships_the_pinned_onnxruntime_and_no_torch(docker, container):
    pinned = dockerfile_arg("ORT_CPU_SPEC").removeprefix("onnxruntime==")
    code = (
        "import importlib.util as u, onnxruntime as o;"
        "print(o.__version__, bool(u.find_spec('torch')))"
    )
    assert docker.run("exec", container, "python", "-c", code).split() == [pinned, "False"]


def test_engine_processes_run_under_the_pods_security_context(docker, cpu_image):
    """The engine in child processes (``--engine-process auto`` does so on CUDA, in the
    gpu image) inside the restrictions of the Kubernetes pod: read-only root filesystem,
    a small tmpfs at /tmp, every capability dropped. Each model's engine process serves
    and reports its own metrics."""
    options = (*POD_RESTRICTIONS, "-e", "NMT_ENGINE_PROCESS=on", *PUBLISHED)
    with docker.healthy_container("engine-process", *options, cpu_image) as name:
        port = docker.host_port(name, 50051)
        (text,) = translate(port, SENTENCES[0])
        assert text.strip() and text != SENTENCES[0]
        metrics = scrape(docker.host_port(name, 9464))
        for model in ("en-es", "en-es-luong"):
            rss = metrics.value("nmt_engine_process_resident_memory_bytes", model=model)
            assert rss is not None and rss > 10e6, model
        logs = docker.run("logs", name, stderr=subprocess.STDOUT)
        assert "Traceback" not in logs and "Read-only file system" not in logs, logs


def test_frontends_share_the_engine_under_the_pods_security_context(docker, cpu_image):
    """``NMT_FRONTENDS=2`` in the pod's restrictions: the second gRPC process starts
    (spawned), binds the same port, reports its own metrics through the main process,
    and ``docker stop`` drains both and exits 0."""
    options = (*POD_RESTRICTIONS, "-e", "NMT_FRONTENDS=2", *PUBLISHED)
    with docker.healthy_container("frontends", *options, cpu_image) as name:
        port = docker.host_port(name, 50051)
        for sentence in SENTENCES[:CALLS]:
            (text,) = translate(port, sentence)
            assert text.strip() and text != sentence
            # every front end serves the HTTP port too (a connection each: spread)
            assert http_translate(docker.host_port(name, 8000), sentence) == (text, "SERVING")
        metrics = scrape(docker.host_port(name, 9464))
        rss = metrics.value("nmt_frontend_process_resident_memory_bytes", frontend="1")
        assert rss is not None and rss > 10e6
        docker.run("stop", "--time", "30", name, timeout=60)
        state = docker.inspect(name)["State"]
        assert (state["Status"], state["ExitCode"]) == ("exited", 0)
        logs = docker.run("logs", name, stderr=subprocess.STDOUT)
        assert "front end 1 serving (pid" in logs, logs
        assert "Traceback" not in logs and "Read-only file system" not in logs, logs


def test_docker_stop_drains_and_exits_0(docker, container):
    """Last in this module: it stops the container."""
    port = docker.host_port(container, 50051)
    translate(port)
    docker.run("stop", "--time", "30", container, timeout=60)
    state = docker.inspect(container)["State"]
    assert (state["Status"], state["ExitCode"], state["OOMKilled"]) == ("exited", 0, False)
    logs = docker.run("logs", "--tail", "5", container, stderr=subprocess.STDOUT)
    assert "shutting down: NOT_SERVING" in logs and "Traceback" not in logs, logs
