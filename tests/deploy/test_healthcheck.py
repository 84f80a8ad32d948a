"""deploy/healthcheck.py, the image's HEALTHCHECK: exit 0 only for a warmed-up server."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.deploy.helpers import HEALTHCHECK, free_port


def healthcheck(*args: str, env: dict[str, str] | None = None) -> int:
    cmd = [sys.executable, str(HEALTHCHECK), "--timeout", "3", *args]
    return subprocess.run(cmd, timeout=60, env=env, capture_output=True).returncode


def test_healthcheck_script_is_healthy_only_once_warmed_up(server_factory):
    cold = server_factory(warm=False)
    assert healthcheck("--port", str(cold.port)) == 1  # started, NOT_SERVING until warm-up
    cold.warm_up()
    assert healthcheck("--port", str(cold.port)) == 0
    assert healthcheck(env={**os.environ, "NMT_PORT": str(cold.port)}) == 0
    cold.stop(0)
    assert healthcheck("--port", str(cold.port)) == 1
    assert healthcheck("--port", str(free_port())) == 1
