"""The client tests run against real in-process servers over the tiny model of the
server tests (``tests/service/server_fixtures.py``), and fake ones (``fakes.py``)."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.service.server_fixtures import (  # noqa: E402, F401 - shared fixtures
    server_factory,
    tiny_bundle,
    tiny_checkpoint,
)
from tests.service.tls_fixtures import pki  # noqa: E402, F401 - certificates of the TLS tests


@pytest.fixture(scope="module")
def server(server_factory):  # noqa: F811 - the fixture imported above
    """A warmed-up server of the tiny model, one per test module."""
    return server_factory()


@pytest.fixture(scope="module")
def address(server) -> str:
    return f"127.0.0.1:{server.port}"
