"""The reliability tests run real servers over the tiny model of the server tests."""

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
