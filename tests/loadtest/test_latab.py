"""``python -m loadtest.latab``: servers side by side, one client moving between them a
block at a time. No timing thresholds: the harness prints latencies, never asserts them."""

from __future__ import annotations

import json
import math

import pytest

from loadtest import latab

SENTENCES = 6


def _argv(tiny_bundle, tmp_path, *flags: str) -> list[str]:
    source = tmp_path / "test.en"
    source.write_text("\n".join(tiny_bundle.sentences[:SENTENCES]) + "\n", encoding="utf-8")
    return [
        "--model-repository", str(tiny_bundle.repo), "--file", str(source),
        "--sentences", str(SENTENCES), "--block", "2", "--passes", "2", "--warmup", "1",
        *flags,
    ]  # fmt: skip


def test_two_servers_interleaved_on_the_tiny_model(tiny_bundle, tmp_path):
    """This tree, and this tree again with one greedy step a decoder call: both answer
    every sentence alike (several steps a call are bit for bit one step a call), and the
    JSON and markdown carry a row each."""
    out = tmp_path / "latab"
    argv = _argv(tiny_bundle, tmp_path, "--ab-flags", "--greedy-steps 1", "--out", str(out))
    assert latab.main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    plain, flagged = data["rows"]
    assert flagged["server"] == f"{plain['server']} --greedy-steps 1"
    assert flagged["flags"] == ["--greedy-steps", "1"]
    for row in (plain, flagged):
        assert row["requests"] == 2 * SENTENCES
        assert row["blocks"] == 2 * SENTENCES // 2
        assert 0 < row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"]
        assert row["mean_ms"] > 0
        assert row["same"] == SENTENCES
    assert plain["p50_this_over_it"] == 1.0 and plain["blocks_this_faster"] == 0
    assert 0 < flagged["sign_test_p"] <= 1 and "sign_test_p" not in plain
    assert data["settings"]["flags"] == ["--providers", "cpu"]
    markdown = out.with_suffix(".md").read_text()
    assert markdown.count(f"| {plain['server']}") == 2
    assert f"| {SENTENCES}/{SENTENCES} |" in markdown
    assert "| 0 of 6 | – |" in markdown  # the first server has no test against itself


def test_the_flags_reach_their_server(tiny_bundle, tmp_path):
    """A flag the server refuses stops the run in one line, naming that server's port."""
    argv = _argv(tiny_bundle, tmp_path, "--ab-flags", "--max-inflight 0")
    with pytest.raises(SystemExit, match=r"the server for port \d+ exited with 2 before serving"):
        latab.main(argv)


def test_same_counts_identical_translations_in_place():
    assert latab.same_as_first(["a", "b", "c"], ["a", "x", "c"]) == 2
    with pytest.raises(ValueError):  # a server that answered fewer: a bug, not a count
        latab.same_as_first(["a", "b"], ["a"])


def test_servers_take_turns_a_block_at_a_time():
    calls = []

    class Stub:
        def __init__(self, name):
            self.name = name

        def Translate(self, request, timeout):  # noqa: N802 - the gRPC method's name
            calls.append((self.name, request))

            class Reply:
                translations = [type("T", (), {"hypotheses": [type("H", (), {"text": request})]})]

            return Reply

    latencies, means, outputs = latab.interleave(
        [Stub("a"), Stub("b")], ["t0", "t1", "t2", "t3"], 2, 1, lambda text: text
    )
    assert calls == [
        ("a", "t0"), ("a", "t1"), ("b", "t0"), ("b", "t1"),  # then the other way round
        ("b", "t2"), ("b", "t3"), ("a", "t2"), ("a", "t3"),
    ]  # fmt: skip
    assert [len(v) for v in latencies] == [4, 4] and [len(m) for m in means] == [2, 2]
    assert outputs == [["t0", "t1", "t2", "t3"]] * 2


def test_summary_against_the_first_server():
    rows = latab.summarize(
        [[0.010, 0.010, 0.010], [0.020, 0.020, 0.020]],
        [[0.010, 0.012, 0.030], [0.020, 0.020, 0.020]],
    )
    assert rows[0]["p50_ms"] == 10.0 and rows[1]["p50_ms"] == 20.0
    assert rows[1]["p50_this_over_it"] == 0.5 and rows[1]["mean_this_over_it"] == 0.5
    assert rows[1]["blocks_this_faster"] == 2 and rows[1]["blocks"] == 3
    assert rows[0]["blocks_this_faster"] == 0  # never faster than itself
    assert "sign_test_p" not in rows[0] and rows[1]["sign_test_p"] == 1.0  # 2 of 3: a coin


@pytest.mark.parametrize(
    ("wins", "blocks", "p"),
    [(5, 5, 0.0625), (0, 5, 0.0625), (18, 36, 1.0), (25, 36, 0.0288), (3, 6, 1.0)],
)
def test_sign_test_against_the_binomial_by_hand(wins, blocks, p):
    assert latab.sign_test_p(wins, blocks) == pytest.approx(p, abs=5e-5)


@pytest.mark.parametrize(("wins", "blocks"), [(3, 2), (-1, 5), (0, 0)])
def test_sign_test_refuses_impossible_counts(wins, blocks):
    with pytest.raises(ValueError, match="wins of"):
        latab.sign_test_p(wins, blocks)


@pytest.mark.parametrize(
    ("latencies", "means", "message"),
    [
        ([], [], "no latencies"),
        ([[0.01], []], [[0.01], [0.01]], "no latencies"),
        ([[0.01], [math.nan]], [[0.01], [0.01]], "not a finite positive"),
        ([[0.01], [0.0]], [[0.01], [0.01]], "not a finite positive"),
        ([[0.01], [0.01]], [[0.01], [0.01, 0.01]], "every server needs a mean"),
    ],
)
def test_summary_refuses_empty_or_broken_input(latencies, means, message):
    with pytest.raises(ValueError, match=message):
        latab.summarize(latencies, means)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "nothing to compare: give --ab-tree DIR or --ab-flags FLAGS"),
        (["--ab-flags", " "], "--ab-flags: no flags given"),
        (["--ab-tree", "/nonexistent"], "--ab-tree /nonexistent: not a source tree"),
        (["--ab-flags=--x", "--block", "0"], "--block must be >= 1, got 0"),
        (["--ab-flags", "'--x"], "No closing quotation"),
        (["--ab-flags=--x", "--file", "/nonexistent"], "--file /nonexistent:"),
    ],
)
def test_bad_arguments_are_one_line_errors_before_any_server(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        latab.parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in err


def test_an_empty_file_and_unparsable_common_flags_are_one_line_errors(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    for argv, message in (
        (["--ab-flags=--x", "--file", str(empty)], "empty.txt has no sentences"),
        (["--ab-flags=--x", "--flags", "'--x"], "--flags: No closing quotation"),
    ):
        with pytest.raises(SystemExit):
            latab.parse_args(argv)
        assert message in capsys.readouterr().err.strip().splitlines()[-1]
