"""``python -m loadtest.optionscost``: runs on the committed bundle, writes what it
prints, and refuses arguments it cannot use before measuring."""

from __future__ import annotations

import json

import pytest

from loadtest import optionscost


def test_writes_every_mix_against_all_greedy(tmp_path, capsys):
    out = tmp_path / "cost"
    argv = ["--sentences", "16", "--rounds", "1", "--threads", "1", "--out", str(out)]
    assert optionscost.main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    rows = {r["mix"]: r for r in data["rows"]}
    assert rows["all greedy"]["vs_all_greedy"] == 1.0
    assert (
        len(rows) == 8
        and "attention kept" in rows
        and all(r["sentences_per_second"] > 0 for r in rows.values())
    )
    assert data["sentences"] == 16 and data["command"].startswith("python -m loadtest.")
    table = out.with_suffix(".md").read_text()
    assert table == capsys.readouterr().out and "| sampling top-100 |" in table


@pytest.mark.parametrize("argv", [["--sentences", "3"], ["--rounds", "0"], ["--threads", "0"]])
def test_unusable_arguments_are_refused(tmp_path, argv, capsys):
    with pytest.raises(SystemExit) as info:
        optionscost.main([*argv, "--out", str(tmp_path / "x")])
    assert info.value.code == 2 and "must be >=" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_a_missing_bundle_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        optionscost.main(["--bundle", str(tmp_path / "none"), "--out", str(tmp_path / "x")])
    assert info.value.code == 2 and "bundle directory not found" in capsys.readouterr().err
