"""The committed gRPC stubs in ``nmt_api/`` are exactly what grpc_tools generates from
``protos/``, and they import package-absolutely (``nmt_api.nmt.v1``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STUBS = Path("nmt_api/nmt/v1")
GENERATED = ("translator_pb2.py", "translator_pb2_grpc.py", "translator_pb2.pyi")


def test_stubs_match_proto(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-Inmt_api=protos",
            "--python_out=.",
            "--pyi_out=.",
            "--grpc_python_out=.",
            "protos/nmt/v1/translator.proto",
        ],
        cwd=tmp_path,
        check=True,
    )
    assert sorted(p.name for p in (tmp_path / STUBS).iterdir()) == sorted(GENERATED)
    for name in GENERATED:
        fresh = (tmp_path / STUBS / name).read_text()
        committed = (ROOT / STUBS / name).read_text()
        assert fresh == committed, f"{name} is stale: regenerate it (see nmt_api/README.md)"


def test_stub_imports_are_package_absolute() -> None:
    text = (ROOT / STUBS / "translator_pb2_grpc.py").read_text()
    assert "from nmt_api.nmt.v1 import translator_pb2" in text


def test_no_stubs_left_in_the_server_package() -> None:
    assert not (ROOT / "service" / "proto").exists()
    committed = {p.name for p in (ROOT / STUBS).iterdir() if p.suffix in (".py", ".pyi")}
    assert committed == {"__init__.py", *GENERATED}
