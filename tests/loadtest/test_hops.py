"""``python -m loadtest.hops``: one request's hops through an engine in this process and
through an engine process, side by side (no timing thresholds: it prints, never asserts)."""

from __future__ import annotations

import json

import pytest

from loadtest import hops


def test_every_hop_is_measured_and_the_engines_agree(tiny_bundle, tmp_path, capsys):
    src = tmp_path / "src.txt"
    src.write_text("\n".join(tiny_bundle.sentences[:4]) + "\n")
    out = tmp_path / "hops.json"
    argv = ["--model-repository", str(tiny_bundle.repo), "--model", "tiny", "--file", str(src)]
    assert hops.main([*argv, "--passes", "2", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert list(rows) == ["in this process", "engine process"]
    for row in rows.values():
        assert row["requests"] == 8 and row["same"] == 8
        for part in hops.PARTS:
            assert row[part] >= 0
        assert row["round trip"] > 0 and row["in the engine"] > 0
        # each part lies within its request's round trip, so its median within theirs
        assert all(row[p] <= row["round trip"] for p in hops.PARTS[1:])
    table = capsys.readouterr().out
    assert "| engine | requests | round trip ms | to the scheduler ms |" in table
    assert "| engine process | 8 |" in table


def test_different_translations_fail_the_run():
    class Fixed:
        """An engine answering every sentence with ``tokens`` at once."""

        def __init__(self, tokens):
            self.tokens = tokens

        def enqueue(self, sources, options, timeout=None):
            from models.options import Hypothesis
            from service.jobs import Job

            job = Job(sources, options, None, None)
            job.timing.admitted = job.timing.finished = job.timing.submitted
            job.future.set_result([[Hypothesis(tokens=self.tokens, score=0.0, log_prob=0.0)]])
            return job

    rows = hops.measure({"a": Fixed((5,)), "b": Fixed((6,))}, [[4, 5]], None, passes=3)
    assert rows["a"]["same"] == 3 and rows["b"]["same"] == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sentences", "0"], "must be >= 1"),
        (["--model", "nope"], "no model 'nope' in"),
        (["--file", "/nonexistent/src.txt"], "No such file"),
    ],
)
def test_bad_arguments_are_one_line_errors(tiny_bundle, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        hops.main(["--model-repository", str(tiny_bundle.repo), "--model", "tiny", *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_an_empty_file_is_a_one_line_error(tiny_bundle, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(SystemExit) as exc:
        argv = ["--model-repository", str(tiny_bundle.repo), "--model", "tiny"]
        hops.main([*argv, "--file", str(empty)])
    assert exc.value.code == 2
    assert f"{empty}: no sentences" in capsys.readouterr().err
