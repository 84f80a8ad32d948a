"""The committed gRPC stubs are exactly what grpc_tools generates from protos/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ("translator_pb2.py", "translator_pb2_grpc.py", "translator_pb2.pyi")


def test_stubs_match_proto(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-Iservice/proto=protos",
            "--python_out=.",
            "--pyi_out=.",
            "--grpc_python_out=.",
            "protos/nmt/v1/translator.proto",
        ],
        cwd=tmp_path,
        check=True,
    )
    for name in GENERATED:
        fresh = (tmp_path / "service/proto/nmt/v1" / name).read_text()
        committed = (ROOT / "service/proto/nmt/v1" / name).read_text()
        assert fresh == committed, f"{name} is stale: regenerate it (see service/proto/README.md)"


def test_stub_imports_are_package_absolute() -> None:
    text = (ROOT / "service/proto/nmt/v1/translator_pb2_grpc.py").read_text()
    assert "from service.proto.nmt.v1 import translator_pb2" in text
