"""Console scripts that need an extra say which in one line; help texts show defaults."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from models import commands
from models.commands import missing_modules, show_defaults

ENTRIES = {
    "nmt_train": ("torch", "train"),
    "nmt_export": ("torch", "train"),
    "nmt_convert": ("onnx", "train"),
    "nmt_bench": ("sacrebleu", "train"),
}


def _run_blocked(entry: str, blocked: str) -> subprocess.CompletedProcess:
    code = (
        "import sys\n"
        f"sys.modules[{blocked!r}] = None  # as if not installed\n"
        "from models import commands\n"
        "sys.argv = ['x', '--help']\n"
        f"sys.exit(commands.{entry}())\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_missing_extra_is_one_line_naming_it(entry):
    blocked, extra = ENTRIES[entry]
    proc = _run_blocked(entry, blocked)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert f"needs {blocked}" in line and f"'rnn-nmt-serving[{extra}]'" in line
    assert "Traceback" not in proc.stderr


def test_with_the_extra_the_real_command_runs():
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from models import commands; "
            "sys.argv=['nmt-export', '--help']; sys.exit(commands.nmt_export())",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "usage: nmt-export" in proc.stdout


def test_missing_modules_names_only_the_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "no_such_module_here", None)
    assert missing_modules(["json", "no_such_module_here", "nope.sub"]) == [
        "no_such_module_here",
        "nope.sub",
    ]


def test_show_defaults_appends_defaults_and_drops_markup():
    p = argparse.ArgumentParser(description="uses ``code`` markup")
    p.add_argument("--beam", type=int, default=5, help="beam size")
    p.add_argument("--ratio", type=float, default=1.5)
    p.add_argument("--pct", default="90%", help="a percentage")
    p.add_argument("--off", action="store_true", help="a switch")
    p.add_argument("--none", default=None, help="nothing to show")
    p.add_argument("--said", default=3, help="already says (default: 3)")
    p.add_argument("--langs", nargs="+", default=["en", "es"])
    sub = p.add_subparsers(dest="cmd")
    s = sub.add_parser("run", help="runs ``it``")
    s.add_argument("--n", type=int, default=7)
    text = " ".join(show_defaults(p).format_help().split())
    assert "beam size (default: 5)" in text and "(default: 1.5)" in text
    assert "a percentage (default: 90%)" in text
    assert "a switch (default" not in text and "nothing to show (default" not in text
    assert text.count("(default: 3)") == 1 and "(default: en,es)" in text
    assert "``" not in text and "uses code markup" in text and "runs it" in text
    assert "(default: 7)" in " ".join(s.format_help().split())


def test_entry_points_are_the_console_scripts():
    from importlib.metadata import entry_points

    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    for entry in ENTRIES:
        name = entry.replace("_", "-")
        assert scripts.get(name) == f"models.commands:{entry}", name
    assert callable(commands.nmt_export)
