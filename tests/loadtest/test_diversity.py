"""``python -m loadtest.diversity`` measures every setting, writes its files and picture."""

from __future__ import annotations

import json
import math

import pytest

from loadtest import diversity
from tests.committed import EN_ES_FP32


def test_distinct_counts_ngrams_over_a_list():
    assert diversity.distinct(["a b c", "a b c"], 1) == 0.5
    assert diversity.distinct(["a b", "c d"], 2) == 1.0
    assert diversity.distinct(["a", ""], 2) == 0.0  # no pairs at all


def test_plain_beam_comes_first_once():
    assert diversity.settings([0.0, 1.0], [0.5]) == [
        ("siblings", 0.0), ("siblings", 1.0), ("groups", 0.5)
    ]  # fmt: skip


def test_a_small_run_writes_every_setting(tmp_path, capsys):
    stem, svg = tmp_path / "div", tmp_path / "div.svg"
    argv = ["--bundle", str(EN_ES_FP32), "--sentences", "8", "--rates", "3",
            "--strengths", "2", "--beam", "4", "--groups", "2", "--rounds", "1"]  # fmt: skip
    assert diversity.main([*argv, "--out", str(stem), "--svg", str(svg)]) == 0
    result = json.loads(stem.with_suffix(".json").read_text())
    runs = [(r["search"], r["setting"]) for r in result["runs"]]
    assert runs == [("siblings", 0.0), ("siblings", 3.0), ("groups", 2.0)]
    assert result["groups"] == 2 and result["beam"] == 4
    for r in result["runs"]:
        assert len(r["example"]) == 4
        for key in ("bleu", "oracle_bleu", "distinct_1", "distinct_2", "sentences_per_second"):
            assert math.isfinite(r[key]) and r[key] > 0, key
        assert r["oracle_bleu"] >= r["bleu"]  # the best of a list holding the best
        assert 0.2 <= r["distinct_2"] <= 1.0
    assert len({tuple(r["example"]) for r in result["runs"]}) == 3
    table = stem.with_suffix(".md").read_text()
    assert "| plain beam |" in table and "| diversity_rate 3 |" in table
    assert "| 2 groups, strength 2 |" in table
    assert svg.read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rates", "0,x"], "give numbers"),
        (["--rates", "0,nan"], "each must be a finite number >= 0"),
        (["--strengths", "-1"], "each must be a finite number >= 0"),
        (["--beam", "1"], "--beam >= 2"),
        (["--rounds", "0"], "--rounds must be >= 1"),
        (["--beam", "4", "--groups", "3"], "--groups 3 must be >= 2 and divide --beam 4"),
    ],
)
def test_bad_arguments_are_refused(argv, message, capsys):
    assert diversity.main(argv) == 2
    assert message in capsys.readouterr().err
