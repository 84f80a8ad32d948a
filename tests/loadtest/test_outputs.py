"""loadtest.outputs: a harness's JSON and markdown, written side by side."""

from __future__ import annotations

import json

from loadtest.outputs import write_result


def test_writes_both_files_making_folders(tmp_path):
    out = tmp_path / "deeper" / "bench-cpu"
    data = {"rows": [{"clients": 32, "sentences_per_s": 1103.4}], "ratio": float("inf")}
    json_path, md_path = write_result(out, data, "| a |\n|---|\n\n\n")
    assert (json_path, md_path) == (out.with_suffix(".json"), out.with_suffix(".md"))
    assert json.loads(json_path.read_text()) == data
    assert json_path.read_text().endswith("}\n")
    assert md_path.read_text() == "| a |\n|---|\n"  # one final newline, whatever was given


def test_an_empty_table_still_ends_in_a_newline(tmp_path):
    _, md_path = write_result(tmp_path / "x", [], "")
    assert md_path.read_text() == "\n"
