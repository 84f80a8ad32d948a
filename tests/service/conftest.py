"""Put the repository root on ``sys.path`` so ``service``/``models`` import from a checkout."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.service.server_fixtures import (  # noqa: E402, F401 - fixtures of the server tests
    server_factory,
    stub,
    tiny_bundle,
    tiny_checkpoint,
)
from tests.service.tls_fixtures import pki  # noqa: E402, F401 - certificates of the TLS tests
