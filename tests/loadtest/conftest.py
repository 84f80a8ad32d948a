"""Put the repository root on ``sys.path`` and reuse the tiny exported model of the server
tests (``tests/service/server_fixtures.py``)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.service.server_fixtures import (  # noqa: E402, F401 - fixtures of the bench tests
    server_factory,
    tiny_bundle,
    tiny_checkpoint,
)
