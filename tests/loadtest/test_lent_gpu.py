"""``loadtest/lent_gpu.sh``: the tree that travels to a lent GPU machine fits its 64 MiB cap
once slimmed, still holds what the GPU checks read, and comes back whole (run on a clone of
this repository, never on the working tree itself)."""

from __future__ import annotations

import shutil
import subprocess
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


def _run(repo: Path, verb: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", SCRIPT, verb], cwd=repo, capture_output=True, text=True, timeout=120
    )


def _travelling(repo: Path) -> int:
    names = _git(repo, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    return sum((repo / n).stat().st_size for n in names if n and (repo / n).is_file())


def _restored(repo: Path) -> None:
    done = _run(repo, "restore")
    assert done.returncode == 0, done.stderr
    assert _git(repo, "status", "--porcelain") == ""


def test_slim_fits_the_cap_and_keeps_what_the_gpu_checks_read(clone):
    done = _run(clone, "slim")
    try:
        assert done.returncode == 0, done.stderr
        assert "travels:" in done.stdout
        assert 0 < _travelling(clone) <= CAP
        for name in READ_ON_THE_GPU:
            assert (clone / name).is_file(), name
        assert not (clone / "model_repository/en-es-luong").exists()
        # The cap is enforced: 70 MB more (a sparse file: its size is what counts) fails.
        (clone / "big.bin").write_bytes(b"")
        subprocess.run(["truncate", "-s", "70M", str(clone / "big.bin")], check=True)
        over = _run(clone, "size")
        assert over.returncode == 2
        assert "over the device tool's 64 MiB" in over.stderr
    finally:
        (clone / "big.bin").unlink(missing_ok=True)
        _restored(clone)


def test_empty_leaves_only_the_script_and_its_ignore_rules(clone):
    done = _run(clone, "empty")
    try:
        assert done.returncode == 0, done.stderr
        left = sorted(
            n for n in _git(clone, "ls-files", "-z").split("\0") if n and (clone / n).is_file()
        )
        assert left == [".gitignore", SCRIPT]
        assert "/.whl/" in (clone / ".gitignore").read_text().split()
    finally:
        _restored(clone)
    assert (clone / "models/pretrained/en-es/model.pt").is_file()


@pytest.mark.parametrize("verb", ["empty", "slim"])
def test_refuses_to_delete_from_a_tree_with_uncommitted_work(clone, verb):
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
