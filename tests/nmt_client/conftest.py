"""The client tests run against real in-process servers over the tiny model of the
server tests (``tests/service/server_fixtures.py``), and fake ones (``fakes.py``)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.service.server_fixtures import (  # noqa: E402, F401 - shared fixtures
    server_factory,
    tiny_bundle,
    tiny_checkpoint,
)
from tests.service.tls_fixtures import pki  # noqa: E402, F401 - certificates of the TLS tests
