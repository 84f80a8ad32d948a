"""loadtest/plot.py: throughput figures drawn from nmt-bench result files; a file it
cannot draw (empty, NaN, not a result file) is a one-line error."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from loadtest import plot

RESULTS = Path(__file__).resolve().parents[2] / "loadtest" / "results"


def result_file(tmp_path: Path, rows, name: str = "bench.json", settings=None) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"settings": settings or {"device": "cpu"}, "rows": rows}))
    return path


def row(system: str, strategy: str, clients, rate: float) -> dict:
    return {"system": system, "strategy": strategy, "clients": clients, "sentences_per_s": rate}


def test_draws_every_strategy_of_every_file_with_its_values(tmp_path):
    rows = [
        row("pytorch-eager", "greedy", None, 23.0),
        row("grpc-service", "greedy", 1, 71.5),
        row("grpc-service", "greedy", 8, 181.0),
        row("grpc-service", "beam5", 1, 38.0),
        row("grpc-service@abc1234", "beam5", 1, 33.0),
    ]
    settings = {"device": "cpu", "ab_trees": [{"commit": "x"}, {"commit": "abc1234", "tree": "/t"}]}
    one = result_file(tmp_path, rows, settings=settings)
    out = tmp_path / "fig.svg"
    said = plot.draw([one], out)
    assert said == [
        "bench.json greedy: 1 curves, 1 levels",
        "bench.json beam5: 2 curves, 0 levels",
    ]
    # A second file without beam rows gets an empty beam panel saying so.
    other = result_file(tmp_path, [row("grpc-service", "greedy", 4, 9.0)], "other.json")
    assert plot.draw([one, other], out)[2:] == [
        "other.json greedy: 1 curves, 0 levels",
        "other.json beam5: no rows",
    ]
    assert "no beam5 rows in this file" in out.read_text()
    plot.draw([one], out)
    text = out.read_text()
    ET.fromstring(text)  # a well-formed SVG
    legends = (
        "PyTorch eager, one sentence at a time: 23",
        "service @ x, in-process",
        "service @ abc1234, nmt-serve subprocess (A/B tree /t)",
    )
    for shown in ("181", "72", *legends):  # the SVG keeps its text as text
        assert shown in text, shown
    # The same files give the same bytes (no date in it): a committed figure stays put.
    first = out.read_bytes()
    plot.draw([one], out)
    assert out.read_bytes() == first


def test_hidden_systems_are_left_out(tmp_path):
    rows = [row("grpc-service", "greedy", 1, 71.0), row("grpc-noop", "greedy", 1, 1103.0)]
    out = tmp_path / "fig.svg"
    assert plot.draw([result_file(tmp_path, rows)], out, hide=["grpc-noop"]) == [
        "bench.json greedy: 1 curves, 0 levels"
    ]
    assert "1,103" not in out.read_text() and "with no model" not in out.read_text()


@pytest.mark.parametrize(
    "rows, message",
    [
        ([], "no result rows"),
        ([row("grpc-service", "greedy", 1, math.nan)], "row 0 has no finite positive"),
        ([row("grpc-service", "greedy", 1, math.inf)], "row 0 has no finite positive"),
        ([row("grpc-service", "greedy", 1, 0.0)], "row 0 has no finite positive"),
        ([row("grpc-service", "greedy", 0, 5.0)], "row 0 has clients 0"),
        ([row("", "greedy", 1, 5.0)], "row 0 names no system"),
        ([row("grpc-service", "greedy", True, 5.0)], "row 0 has clients True"),
        ([row("grpc-service", "greedy", 1, True)], "row 0 has no finite positive"),
    ],
    ids=["empty", "nan", "inf", "zero", "zero-clients", "no-system", "bool-clients", "bool-rate"],
)
def test_files_it_cannot_draw_are_refused(tmp_path, rows, message):
    with pytest.raises(plot.PlotError, match=message):
        plot.draw([result_file(tmp_path, rows)], tmp_path / "fig.svg")
    assert not (tmp_path / "fig.svg").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{missing}", "--out", "{tmp}/f.svg"], "not a readable JSON file"),
        (["{bad}", "--out", "{tmp}/f.svg"], "not a readable JSON file"),
        (["{good}", "--out", "{tmp}/f.txt"], "give a .svg, .png or .pdf file"),
        (["{good}", "--hide", "grpc-service", "--out", "{tmp}/f.svg"], "every row is of a hidden"),
        (["{good}", "--hide", "grpc-nop", "--out", "{tmp}/f.svg"], "no such system"),
        (["{good}", "--out", "{good}/f.svg"], "cannot write the figure"),
    ],
    ids=["missing", "not-json", "suffix", "all-hidden", "hide-typo", "unwritable"],
)
def test_cli_errors_are_one_line(tmp_path, capsys, argv, message):
    (tmp_path / "bad.json").write_text("{not json")
    good = result_file(tmp_path, [row("grpc-service", "greedy", 1, 5.0)], "good.json")
    paths = {"missing": tmp_path / "none.json", "bad": tmp_path / "bad.json", "good": good}
    argv = [a.format(tmp=tmp_path, **paths) for a in argv]
    with pytest.raises(SystemExit) as exc:
        plot.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 2  # argparse's usage line, then the error


def texts_of(svg: Path) -> list[str]:
    """Every text of an SVG figure (its titles, legends, tick labels and values)."""
    return sorted(
        "".join(e.itertext()) for e in ET.parse(svg).iter("{http://www.w3.org/2000/svg}text")
    )


def test_the_readme_figure_is_what_its_files_draw(tmp_path):
    """docs/throughput.svg is drawn from the committed result files the README cites
    (regenerate with the command in the README when they change). Its texts are compared,
    not its bytes: another matplotlib places them a little differently."""
    out = tmp_path / "throughput.svg"
    plot.draw(
        [RESULTS / "bench-cpu.json", RESULTS / "bench-gpu-h100-beamrows.json"],
        out,
        hide=["grpc-noop"],
    )
    committed = RESULTS.parents[1] / "docs" / "throughput.svg"
    drawn = texts_of(out)
    assert "4,363" in drawn and "250" in drawn  # values of both files are there
    assert texts_of(committed) == drawn
