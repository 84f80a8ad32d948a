"""``loadtest.loophost``: the decode loop's host time per step, apart from ORT."""

from __future__ import annotations

import json

import pytest

from loadtest import loophost


def _tiny_run(tiny_bundle, tmp_path, sentences: int, out) -> list[str]:
    """loophost's arguments for the tiny model over its first ``sentences``, one round,
    results to ``out``."""
    source = tmp_path / "test.en"
    source.write_text("\n".join(tiny_bundle.sentences[:sentences]) + "\n", encoding="utf-8")
    return [
        "--model-repository", str(tiny_bundle.repo), "--model", "tiny", "--file", str(source),
        "--rounds", "1", "--json", str(out),
    ]  # fmt: skip


def test_rows_split_wall_time_into_ort_and_host(tiny_bundle, tmp_path, capsys):
    out = tmp_path / "loophost.json"
    argv = _tiny_run(tiny_bundle, tmp_path, 12, out)
    argv += ["--strategies", "greedy,beam2", "--batch", "1,8"]
    assert loophost.main(argv) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["strategy"], r["batch"]) for r in rows] == [
        ("greedy", 1), ("greedy", 8), ("beam2", 1), ("beam2", 8),
    ]  # fmt: skip
    for r in rows:
        assert r["steps"] > 0 and r["host_us_per_step"] > 0 and r["decoder_ort_ms"] > 0
        assert r["wall_ms"] == pytest.approx(
            r["decoder_ort_ms"] + r["encoder_ort_ms"] + r["host_ms"], abs=0.2
        )
    # one sentence at a time: a row per step (greedy); batched: more rows, fewer steps
    assert rows[0]["rows_per_step"] == 1.0
    # greedy rows run several steps a call (--greedy-steps, default 4): steps still count
    assert rows[0]["decoder_calls"] < rows[0]["steps"]
    assert rows[1]["rows_per_step"] > 1 and rows[1]["steps"] < rows[0]["steps"]
    assert "| greedy | 8 |" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["--batch", "0"],
        ["--greedy-steps", "-1"],
        ["--strategies", "beamx"],
        ["--rounds", "0"],
        ["--model", "nope"],
        ["--model-repository", "/nonexistent"],
        ["--ab-tree", "/nonexistent"],
    ],
)
def test_bad_arguments_are_one_line_errors(argv, capsys):
    with pytest.raises(SystemExit):
        loophost.main(argv)
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_a_file_without_sentences_is_refused(tiny_bundle, tmp_path, capsys):
    empty = tmp_path / "blank.en"
    empty.write_text("\n  \n", encoding="utf-8")
    argv = ["--model-repository", str(tiny_bundle.repo), "--model", "tiny", "--file", str(empty)]
    with pytest.raises(SystemExit):
        loophost.main(argv)
    assert "has no sentences" in capsys.readouterr().err


def test_ab_tree_rows_pair_with_this_trees(tiny_bundle, tmp_path, capsys):
    """``--ab-tree``: the other tree's own loophost runs with the same settings; its rows
    follow this tree's, labelled, and this tree's carry the ratios."""
    out = tmp_path / "ab.json"
    argv = _tiny_run(tiny_bundle, tmp_path, 6, out)
    argv += ["--strategies", "greedy", "--batch", "2", "--ab-tree", str(loophost.ROOT)]
    assert loophost.main(argv) == 0
    report = json.loads(out.read_text())
    ours, theirs = report["rows"]
    assert ours["tree"] == "this" and theirs["tree"] == str(loophost.ROOT)
    assert (ours["strategy"], ours["batch"], ours["steps"]) == (
        theirs["strategy"], theirs["batch"], theirs["steps"],
    )  # fmt: skip
    assert ours["host_ratio_vs_ab"] == round(theirs["host_us_per_row"] / ours["host_us_per_row"], 2)
    assert report["settings"]["ab_tree"]["commit"] not in ("", "unknown")
    assert f"| {loophost.ROOT} | greedy | 2 |" in capsys.readouterr().out


def test_cuda_graphs_on_decodes_through_the_fixed_buffers(tiny_bundle, tmp_path):
    """``--cuda-graphs on``: every step runs on the GPU path's fixed, bucketed buffers (on
    the CPU provider), in this tree and in the ``--ab-tree`` one; off, none does."""
    rows = {}
    for mode in ("on", "off"):
        out = tmp_path / f"{mode}.json"
        argv = _tiny_run(tiny_bundle, tmp_path, 8, out)
        argv += ["--strategies", "greedy", "--batch", "4", "--cuda-graphs", mode]
        argv += ["--ab-tree", str(loophost.ROOT)] if mode == "on" else []
        assert loophost.main(argv) == 0
        report = json.loads(out.read_text())
        assert report["settings"]["cuda_graphs"] == mode
        rows[mode] = report["rows"]
    for r in rows["on"]:
        assert r["graph_steps"] == r["steps"] > 0
    assert [r["graph_steps"] for r in rows["off"]] == [0]
