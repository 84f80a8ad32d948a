"""Fixtures of the deployment tests: the tiny model bundle and in-process servers of the
service tests, and child processes (nmt-serve, prometheus, nginx) that are always ended."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.deploy.helpers import Processes  # noqa: E402
from tests.service.server_fixtures import (  # noqa: E402, F401 - fixtures of the server tests
    server_factory,
    tiny_bundle,
)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    """Starts child processes (logs under tmp_path) and terminates all of them at teardown."""
    group = Processes(tmp_path / "logs")
    yield group
    group.close()
