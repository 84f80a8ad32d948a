"""loadtest.ensemblebench on the committed int8 bundle, small: it writes its report, and an
ensemble of copies of one model (weights 1/n) translates as that model does."""

from __future__ import annotations

import json

import pytest

from loadtest import ensemblebench


def test_copies_of_one_model_translate_as_it_does(tmp_path):
    out = tmp_path / "ens"
    argv = ["--out", str(out), "--sentences", "6", "--rounds", "1", "--members", "2"]
    assert ensemblebench.main(argv) == 0
    rows = json.loads(out.with_suffix(".json").read_text())["rows"]
    assert {(r["members"], r["beam"]) for r in rows} == {(1, 1), (2, 1), (1, 5), (2, 5)}
    for r in rows:
        assert r["same_translations"] == 6 and r["max_score_diff"] < 1e-4
        assert r["sentences_per_s"] > 0 and r["relative_to_one"] > 0
    assert "| 2 | 5 |" in out.with_suffix(".md").read_text()


def test_an_ensemble_has_two_members_or_more(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        ensemblebench.main(["--out", str(tmp_path / "r"), "--members", "1"])
    assert exit_.value.code == 2 and "--members >= 2" in capsys.readouterr().err
