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


def test_an_empty_nmt_port_is_unset_and_a_bad_one_a_usage_error():
    """``NMT_PORT=`` (compose's ``${NMT_PORT:-}``) raised ValueError at start, so the
    container stayed unhealthy for ever (helper-89); now it is the default port."""
    env = {**os.environ, "NMT_PORT": ""}
    cmd = [sys.executable, str(HEALTHCHECK), "--timeout", "0.5", "--host", "127.0.0.1"]
    empty = subprocess.run(cmd, timeout=60, env=env, capture_output=True, text=True)
    assert empty.returncode == 1 and "Traceback" not in empty.stderr
    assert "127.0.0.1:50051" in empty.stderr  # the default port, asked and not answered
    bad = subprocess.run(
        cmd, timeout=60, env={**env, "NMT_PORT": "x"}, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "invalid int value: 'x'" in bad.stderr
