"""The client library stands alone: it imports and works with numpy, ONNX Runtime and
SentencePiece unimportable, loads nothing of the server, and no package depends on a
package it must not (nmt_api <- service, nmt_api <- nmt_client; no cycles)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Run in a fresh interpreter: a meta-path finder refuses the heavy modules, then the
# library and both CLIs are imported and used against the server at argv[1].
BLOCKED_RUN = r"""
import sys

BLOCKED = ("numpy", "onnxruntime", "sentencepiece", "torch", "service", "models", "export")


class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"blocked for this test: {name}")
        return None


sys.meta_path.insert(0, Blocker())
import nmt_client
import nmt_client.cli
import nmt_client.evaluate
import nmt_client.heatmap

target = sys.argv[1]
with nmt_client.Translator(target, timeout=60) as t:
    assert t.health() == "SERVING"
    (model,) = t.list_models()
    results = t.translate(["A small house.", "The dog."], beam_size=2, return_attention=True)
    assert [r.source for r in results] == ["A small house.", "The dog."]
    assert all(r.text and r.best.attention.rows > 0 for r in results)
    words = nmt_client.heatmap.merge_words(results[0].best.attention)
    assert words.cols <= results[0].best.attention.cols
    final = list(t.stream("A small house."))[-1]
    assert final.final and final.result.text == t.translate_one("A small house.").text
assert nmt_client.cli.main(["--server", target, "--list-models"]) == 0
assert nmt_client.cli.main(["--server", target, "A small house."]) == 0
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
assert not loaded, loaded
print("CLIENT-OK", model.name)
"""


def test_client_imports_and_works_without_the_heavy_modules(server_factory):
    server = server_factory()
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, f"127.0.0.1:{server.port}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "CLIENT-OK tiny"


def _imports(package: str) -> dict[str, set[str]]:
    """Top-level packages each module of ``package`` imports (statically)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("nmt_client", {"service", "models", "export", "loadtest"}),
        ("nmt_api", {"service", "models", "export", "loadtest", "nmt_client"}),
        ("service", {"nmt_client", "loadtest"}),
    ],
)
def test_package_layering(package, forbidden):
    wrong = {m: sorted(names & forbidden) for m, names in _imports(package).items()}
    assert not {m: n for m, n in wrong.items() if n}


def test_wire_conventions_match_the_server():
    """The client's copy of the protocol's conventions is the server's."""
    import nmt_api
    from models import options
    from service import errors, logs, servicer

    assert nmt_api.MAX_BLOCK_NGRAM == options.MAX_BLOCK_NGRAM
    assert nmt_api.RETRY_HINT == errors.RETRY_HINT
    assert nmt_api.REQUEST_ID_HEADER == logs.REQUEST_ID_HEADER
    assert nmt_api.SERVICE_NAME == servicer.SERVICE_NAME
