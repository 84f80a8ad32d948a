"""loadtest.marianbench's parts that run without Marian: the vocabulary it writes is one
Marian's reader (and the converter's) reads back, and it refuses to run without pymarian."""

from __future__ import annotations

from pathlib import Path

from export.marian import read_vocabulary
from loadtest import marianbench


def test_the_vocabulary_it_writes_reads_back_whole(tmp_path):
    path = tmp_path / "vocab.yml"
    words = {"yes", "010", "it's", '"quoted"', "a:b", "no"}
    marianbench._vocabulary(path, words)
    tokens, proto = read_vocabulary(path, marianbench.VOCAB)
    assert proto is None and len(tokens) == marianbench.VOCAB
    assert tokens[:2] == ["</s>", "<unk>"] and set(tokens[2:8]) == words
    assert tokens[-1] == f"w{marianbench.VOCAB - 9}"


def test_without_pymarian_it_says_so_in_one_line(tmp_path, capsys):
    assert marianbench.main(["--out", str(tmp_path / "r"), "--marian-venv", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no pymarian venv at" in err
    assert not Path(tmp_path / "r.md").exists()


def test_an_ensemble_needs_a_member(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as exit_:
        marianbench.main(["--out", str(tmp_path / "r"), "--members", "0"])
    assert exit_.value.code == 2
    assert "--members must be >= 1, got 0" in capsys.readouterr().err
