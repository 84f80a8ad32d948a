"""`--build-arg EXTRAS=onmt`: the serving image with pyonmttok, serving a bundle converted
from an Eole model trained with the onmt_tokenize transform (raw text in, Eole's own
translations out); the image without it refuses that bundle in one line."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.docker.client import translate
from tests.deploy.docker.engine import Docker
from tests.deploy.helpers import ROOT

ONMT_IMAGE = "rnn-nmt-serving:cpu-standin-onmt"
FIXTURE = ROOT / "tests" / "fixtures" / "eole" / "rnn_gru1_onmt_bpe"


@pytest.fixture(scope="module")
def onmt_image(docker: Docker, standins: dict[str, str], tmp_path_factory) -> str:
    log_path = tmp_path_factory.mktemp("build") / "cpu-onmt.log"
    docker.build(
        "--target", "cpu", "--build-arg", f"PYTHON_IMAGE={standins['python']}",
        "--build-arg", "EXTRAS=onmt", "-t", ONMT_IMAGE, str(ROOT), log_path=log_path,
    )  # fmt: skip
    return ONMT_IMAGE


@pytest.fixture(scope="module")
def onmt_repo(tmp_path_factory) -> Path:
    """A model repository holding the converted Eole onmt_tokenize model, readable by the
    image's user (uid 10001)."""
    from export.convert import main

    repo = tmp_path_factory.mktemp("onmt-repo")
    out = repo / "eole-onmt" / "1"
    assert main(["eole", str(FIXTURE), "--out", str(out), "--parity-limit", "20"]) == 0
    for path in [repo, *repo.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return repo


@pytest.fixture(scope="module")
def container(docker: Docker, onmt_image: str, onmt_repo: Path) -> Iterator[str]:
    mount = ("-v", f"{onmt_repo}:/models:ro", "-p", "127.0.0.1::50051")
    with docker.healthy_container("onmt", *mount, onmt_image) as name:
        yield name


def test_the_onmt_image_serves_an_onmt_tokenize_model_as_eole_does(docker, container):
    port = docker.host_port(container, 50051)
    sources = (FIXTURE / "src.txt").read_text(encoding="utf-8").splitlines()[:6]
    want = json.loads((FIXTURE / "greedy.json").read_text(encoding="utf-8"))[:6]
    assert [translate(port, text)[0] for text in sources] == [w["tokens"] for w in want]


def test_the_image_without_it_refuses_that_bundle_in_one_line(docker, cpu_image, onmt_repo):
    run = subprocess.run(
        [docker.cli, "run", "--rm", "-v", f"{onmt_repo}:/models:ro", cpu_image],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode != 0
    errors = [line for line in run.stderr.splitlines() if "pyonmttok" in line]
    assert errors and "pip install pyonmttok" in errors[0], run.stderr[-2000:]
    assert "Traceback" not in run.stderr
