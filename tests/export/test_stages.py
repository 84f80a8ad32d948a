"""``nmt-export`` shows what it is doing on a terminal, and nothing elsewhere."""

from __future__ import annotations

import contextlib
import io
import logging

from export.cli import main, run_export
from export.stages import LOGGER, StageLine, shown_stages
from export.writer import ExportError
from tests.export.helpers import cli_args


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def finished(text: str) -> list[str]:
    """The lines a terminal keeps: each finished stage, ``\\r``-rewrites resolved."""
    lines = text.split("\n")[:-1]  # not splitlines(): it splits at "\r" too
    return [line.split("\r")[-1].replace("\x1b[K", "") for line in lines]


def test_stage_lines_carry_each_stages_time():
    times = iter([0.0, 0.0, 2.5, 2.5, 2.5, 10.0])  # start, show, finish, ...
    out = Terminal()
    line = StageLine("nmt-export", out, tick=0, clock=lambda: next(times))
    logger = logging.getLogger(f"{LOGGER}.test")
    logger.addHandler(line)
    logger.setLevel(logging.INFO)
    try:
        logger.info("tracing")
        logger.info("parity gate: greedy on %s sentences", "2,000")
    finally:
        logger.removeHandler(line)
        logger.setLevel(logging.NOTSET)
    line.close()
    assert finished(out.getvalue()) == [
        "nmt-export: tracing: 2.5 s",
        "nmt-export: parity gate: greedy on 2,000 sentences: 7.5 s",
    ]
    assert "parity gate: greedy on 2,000 sentences ... 0 s" in out.getvalue()  # while running


def test_nothing_is_shown_when_stderr_is_not_a_terminal():
    with shown_stages("nmt-export", io.StringIO()):
        assert not logging.getLogger(LOGGER).handlers


def test_an_export_on_a_terminal_names_every_stage(checkpoint, tmp_path):
    level = logging.getLogger(LOGGER).level
    term = Terminal()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(term):
        assert main(cli_args(checkpoint, tmp_path / "m" / "1")) == 0
    stages = [line.split(": ", 1)[1].rsplit(": ", 1)[0] for line in finished(term.getvalue())]
    assert stages[0] == "tracing the encoder and one decoder step to ONNX"
    assert [s.split(" on ")[0] for s in stages[1:]] == [
        "parity gate: decoder steps, PyTorch vs ONNX Runtime, random and real batches",
        "parity gate: greedy",
        "parity gate: beam 5 n-best",
        "loading the bundle as nmt-serve will",
    ]
    assert not logging.getLogger(LOGGER).handlers and logging.getLogger(LOGGER).level == level


def test_a_failed_export_ends_the_stage_line_before_its_error(tmp_path):
    def export() -> dict:
        logging.getLogger(f"{LOGGER}.writer").info("parity gate: greedy on 3 sentences")
        raise ExportError("no sentence to check")

    term = Terminal()
    with contextlib.redirect_stderr(term):
        assert run_export("nmt-export", export, tmp_path) == 2
    lines = finished(term.getvalue())
    assert lines[0].startswith("nmt-export: parity gate: greedy on 3 sentences: ")
    assert lines[1:] == ["nmt-export: error: no sentence to check"]
    assert not logging.getLogger(LOGGER).handlers
