"""Fixtures of the docker tests: a Docker engine (dockerd started when none runs), the
local stand-in base images, the CPU serving image built on them, and Compose v2.

Docker Hub cannot be reached from CI, so the images the deployment pulls are replaced by
stand-ins built from the Debian mirror (deploy/docker/standins.py), and the serving image
is built FROM the Python stand-in. A missing prerequisite fails every test with one line
saying what to install: these tests are how CI knows the deployment works, so they never
skip. First run on 2 cores: about 3.5 minutes (stand-ins 1-1.5 min, the image 25 s,
the tests); later runs reuse both: 1.5 minutes, 2 when the sources changed."""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator

import pytest

from tests.deploy.docker.engine import (
    Compose,
    Docker,
    Missing,
    compose_command,
    ensure_dockerd,
    load_standins,
)
from tests.deploy.helpers import DOCKERFILE, ROOT, free_port

log = logging.getLogger(__name__)

# Never the tag a real build makes (rnn-nmt-serving:cpu): this one is FROM a stand-in.
CPU_IMAGE = "rnn-nmt-serving:cpu-standin"


@pytest.fixture(scope="session")
def docker() -> Docker:
    try:
        return Docker(ensure_dockerd())
    except Missing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def standins(docker: Docker) -> dict[str, str]:
    """``{"python": image, "prometheus": image, "nginx": image}``, built when missing."""
    standins = load_standins()
    if os.geteuid() != 0:
        pytest.fail("building the stand-in images needs root (debootstrap)", pytrace=False)
    start = time.monotonic()
    try:
        images = standins.build_all(docker.cli)
    except standins.StandinError as exc:
        pytest.fail(str(exc), pytrace=False)
    log.info("stand-in images ready in %.0f s: %s", time.monotonic() - start, images)
    return images


@pytest.fixture(scope="session")
def cpu_image(docker: Docker, standins: dict[str, str], tmp_path_factory) -> str:
    """`docker build --target cpu` of the repository's Dockerfile on the Python stand-in
    (Docker's build cache makes it seconds when nothing changed)."""
    log_path = tmp_path_factory.mktemp("build") / "cpu.log"
    previous = docker.run("image", "inspect", "--format", "{{.Id}}", CPU_IMAGE, check=False)
    seconds = docker.build(
        "--target", "cpu", "--build-arg", f"PYTHON_IMAGE={standins['python']}",
        "-t", CPU_IMAGE, str(ROOT), log_path=log_path,
    )  # fmt: skip
    log.info("%s built in %.0f s (log: %s)", CPU_IMAGE, seconds, log_path)
    # A changed source tree makes a new image; the one it replaces would stay on disk
    # untagged (several copies of 380 MB on vfs) after every edit-and-test round.
    current = docker.run("image", "inspect", "--format", "{{.Id}}", CPU_IMAGE)
    if previous.strip() and previous != current:
        docker.run("image", "rm", previous.strip(), check=False)
    return CPU_IMAGE


@pytest.fixture(scope="session")
def compose_cmd(docker: Docker) -> list[str]:
    try:
        return compose_command(docker.cli)
    except Missing as exc:
        pytest.fail(str(exc), pytrace=False)


def _project(name: str) -> str:
    """A project name of its own per run: two runs on one machine never share containers."""
    return re.sub(r"[^a-z0-9_-]", "", f"nmt-test-{os.getpid()}-{name}")


@pytest.fixture(scope="module")
def compose_env(standins: dict[str, str], cpu_image: str) -> dict[str, str]:
    """docker-compose.yml's variables: the stand-ins and the image built from one, and free
    host ports (the defaults may be taken by a developer's own deployment)."""
    return {
        "NMT_CPU_IMAGE": cpu_image,
        "PYTHON_IMAGE": standins["python"],
        "PROMETHEUS_IMAGE": standins["prometheus"],
        "NGINX_IMAGE": standins["nginx"],
        "NMT_GRPC_PORT": str(free_port()),
        "NMT_HTTP_HOST_PORT": str(free_port()),
        "NMT_METRICS_HOST_PORT": str(free_port()),
        "PROMETHEUS_PORT": str(free_port()),
        "GRAFANA_PORT": str(free_port()),
    }


@pytest.fixture(scope="module")
def compose_factory(compose_cmd: list[str], compose_env: dict[str, str]) -> Iterator:
    """``make(name)`` -> a Compose project; every project made is taken down at the end."""
    projects: list[Compose] = []

    def make(name: str) -> Compose:
        project = Compose(compose_cmd, _project(name), compose_env)
        projects.append(project)
        return project

    yield make
    for project in projects:
        project.down()


def dockerfile_arg(name: str) -> str:
    """Default of a global ARG of the Dockerfile, quotes removed."""
    m = re.search(rf"^ARG {name}=(\S+)", DOCKERFILE.read_text(), re.M)
    assert m, f"Dockerfile has no ARG {name}"
    return m.group(1).strip('"')
