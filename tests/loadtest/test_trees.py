"""Labels of the source trees an A/B benchmark compares (``loadtest.trees.commit_of``)."""

from __future__ import annotations

import os
import subprocess

from loadtest.trees import commit_of, tree_env


def _git(repo, *args: str) -> str:
    command = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def test_a_checkout_is_labelled_by_its_commit_and_a_copy_inside_it_is_not(tmp_path):
    repo = tmp_path / "repo"
    (repo / "copy" / "service").mkdir(parents=True)
    (repo / "a.txt").write_text("a\n")
    _git(tmp_path, "init", "-q", str(repo))
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "--short", "HEAD")
    assert commit_of(repo) == head
    (repo / "a.txt").write_text("changed\n")
    assert commit_of(repo) == head + "+"
    # e.g. `git archive` of an older commit unpacked inside this checkout
    assert commit_of(repo / "copy") == "unknown"
    assert commit_of(tmp_path / "nowhere") == "unknown"


def test_a_tree_goes_before_the_python_path_not_in_its_place(monkeypatch, tmp_path):
    """A/B servers must still import what ``pip --target`` put on PYTHONPATH (a lent GPU
    machine's onnxruntime-gpu and protobuf): the tree comes first, the rest stays."""
    monkeypatch.setenv("PYTHONPATH", "/tmp/site")
    env = tree_env(tmp_path, OMP_NUM_THREADS="1")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path), "/tmp/site"]
    assert env["OMP_NUM_THREADS"] == "1" and env["PATH"] == os.environ["PATH"]
    monkeypatch.delenv("PYTHONPATH")
    assert tree_env(tmp_path)["PYTHONPATH"] == str(tmp_path)
