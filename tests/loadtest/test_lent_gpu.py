"""``loadtest/lent_gpu.sh``: the payload for a lent GPU machine holds what the GPU checks
read and not what they never do, every call it needs fits the device tool's 64 MiB cap,
the device refuses parts that do not make that payload, and the tree comes back whole
(run on a clone of this repository, never on the working tree itself; no wheels are
downloaded: ``LENT_GPU_WHEELS=0``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "loadtest/lent_gpu.sh"
CAP = 64 * 1024 * 1024
# What the device checks read: the fp32 bundle CUDA serves, the PyTorch baseline, the tests.
READ_ON_THE_GPU = (
    "model_repository/en-es/7/decoder.onnx",
    "models/pretrained/en-es/model.pt",
    "models/pretrained/en-es/test.en",
    "tests/service/test_gpu.py",
    "loadtest/bench.py",
)
NEVER_READ = ("model_repository/en-es-luong", "model_repository/en-es/8", "tests/fixtures/eole")

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout"
)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A clone of HEAD with this working tree's script committed over it."""
    repo = tmp_path_factory.mktemp("lent") / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    shutil.copy(ROOT / SCRIPT, repo / SCRIPT)
    if _git(repo, "status", "--porcelain"):
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "script")
    return repo


def _run(repo: Path, *verb: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", SCRIPT, *verb],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, LENT_GPU_WHEELS="0", **env),
    )


@pytest.fixture(scope="module")
def packed(clone) -> Path:
    done = _run(clone, "pack")
    assert done.returncode == 0, done.stderr
    assert "device-checks" in done.stdout  # the last call's command is printed
    return clone


def _restored(repo: Path) -> None:
    done = _run(repo, "restore")
    assert done.returncode == 0, done.stderr
    assert _git(repo, "status", "--porcelain") == ""


def test_the_payload_holds_what_the_gpu_checks_read(packed, tmp_path):
    parts = sorted((packed / ".whl").glob("payload.part-*"))
    assert parts and all(p.stat().st_size <= 60_000_000 for p in parts)
    whole = tmp_path / "payload.tar"
    with whole.open("wb") as out:
        for part in parts:
            out.write(part.read_bytes())
    with (
        tarfile.open(whole) as payload,
        payload.extractfile("./tree.tar.gz") as inner,
        tarfile.open(fileobj=inner, mode="r:gz") as tree,
    ):
        names = set(tree.getnames())
    for name in READ_ON_THE_GPU:
        assert f"tree/{name}" in names, name
    for prefix in NEVER_READ:
        assert not any(n.startswith(f"tree/{prefix}") for n in names), prefix


def test_every_call_fits_the_cap_once_the_tree_is_emptied(packed):
    done = _run(packed, "empty")
    try:
        assert done.returncode == 0, done.stderr
        left = sorted(
            n for n in _git(packed, "ls-files", "-z").split("\0") if n and (packed / n).is_file()
        )
        assert left == [".gitignore", SCRIPT]
        tree = sum((packed / n).stat().st_size for n in left)
        biggest = max(p.stat().st_size for p in (packed / ".whl").glob("payload.part-*"))
        sha = (packed / ".whl" / "payload.sha256").stat().st_size
        assert tree + biggest + sha <= CAP
        # The cap is enforced: 70 MB more (a sparse file: its size is what counts) fails.
        subprocess.run(["truncate", "-s", "70M", str(packed / "big.bin")], check=True)
        over = _run(packed, "size")
        assert over.returncode == 2
        assert "over the device tool's 64 MiB" in over.stderr
    finally:
        (packed / "big.bin").unlink(missing_ok=True)
        _restored(packed)
    assert (packed / "models/pretrained/en-es/model.pt").is_file()


def test_the_device_refuses_parts_that_do_not_make_the_payload(packed, tmp_path):
    whl = packed / ".whl"
    first = sorted(whl.glob("payload.part-*"))[0]
    kept = first.read_bytes()
    first.write_bytes(kept[:-1] + bytes([kept[-1] ^ 1]))
    try:
        done = _run(packed, "device-checks", OUT=str(tmp_path / "out"))
        assert done.returncode == 2
        assert "the parts do not make the payload packed here" in done.stderr
    finally:
        first.write_bytes(kept)
    sha = (whl / "payload.sha256").read_bytes()
    (whl / "payload.sha256").unlink()
    try:
        done = _run(packed, "device-checks", OUT=str(tmp_path / "out"))
        assert done.returncode == 2 and "carry it with the first part" in done.stderr
    finally:
        (whl / "payload.sha256").write_bytes(sha)


@pytest.mark.parametrize("verb", ["empty", "pack"])
def test_refuses_a_tree_with_uncommitted_work(clone, verb):
    (clone / "README.md").write_text("edited\n")
    try:
        done = _run(clone, verb)
        assert done.returncode == 2
        assert "commit or stash first" in done.stderr
        assert (clone / "models/pretrained/en-es/model.pt").is_file()  # nothing deleted
    finally:
        _restored(clone)


def test_an_unknown_verb_prints_the_usage(clone):
    done = _run(clone, "nonsense")
    assert done.returncode == 2
    assert "onnxruntime-gpu" in done.stdout and "device-checks" in done.stdout
