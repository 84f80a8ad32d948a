"""What every command line of the project shares: entry points that need an optional
extra say which one in one line instead of a traceback, and help texts show defaults.

``nmt-serve`` needs only the base install; training, export and the benchmark need the
``train`` extra (torch, onnx, sacrebleu). A serving install (``make serve``, the
Docker image) has the console scripts of both, so ``nmt-export --help`` there used to be
an ``ImportError`` traceback from deep inside torch's import.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence

PACKAGE = "rnn-nmt-serving"


def missing_modules(modules: Sequence[str]) -> list[str]:
    """Those of ``modules`` that cannot be imported here (not installed, or blocked)."""
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a parent package missing, or a broken one
            found = False
        if not found:
            missing.append(name)
    return missing


def _entry(prog: str, module: str, needs: tuple[str, ...], extra: str) -> Callable[[], int]:
    def main() -> int:
        missing = missing_modules(needs)
        if missing:
            print(
                f"{prog}: needs {', '.join(missing)}, which this install lacks: "
                f"pip install '{PACKAGE}[{extra}]'",
                file=sys.stderr,
            )
            return 2
        return importlib.import_module(module).main()

    main.__name__ = prog.replace("-", "_")
    main.__doc__ = f"``{prog}``: {module}.main() once {', '.join(needs)} import."
    return main


TRAIN = ("torch", "onnx")
nmt_train = _entry("nmt-train", "models.train", ("torch", "tqdm"), "train")
nmt_export = _entry("nmt-export", "export.cli", TRAIN, "train")
nmt_convert = _entry("nmt-convert", "export.convert", TRAIN, "train")
nmt_bench = _entry("nmt-bench", "loadtest.bench", ("torch", "sacrebleu"), "train")


def _plain(text: str | None) -> str | None:
    """Docstring markup is not for a terminal: ``code`` -> code."""
    return None if text is None else text.replace("``", "")


def parse_strictly(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> argparse.Namespace:
    """``parser.parse_args(argv)``, with no option abbreviated (``--from-module`` is not
    taken for ``--from-modules``) and an unknown option refused by the subcommand it was
    given to, with the nearest option it has (``nmt-convert eole: error: unrecognized
    arguments: --lowercse (did you mean --lowercase?)``): argparse names the top-level
    command and its usage, and suggests nothing."""
    parsers = [parser]
    for each in parsers:  # grows as subcommands are found
        each.allow_abbrev = False
        for action in each._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers += action.choices.values()
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    chosen = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None), parser)
    options = [o for action in chosen._actions for o in action.option_strings]
    shown = []
    for arg in extra:
        near = difflib.get_close_matches(arg.split("=", 1)[0], options, n=1, cutoff=0.75)
        shown.append(f"{arg} (did you mean {near[0]}?)" if near and arg.startswith("-") else arg)
    chosen.error("unrecognized arguments: " + " ".join(shown))
    raise AssertionError("unreachable: ArgumentParser.error exits")


def show_defaults(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Append ``(default: X)`` to the help of every option that has a default worth
    showing (not None, not off), subcommands included, and drop docstring markup.
    Returns ``parser``."""
    parser.description = _plain(parser.description)
    parser.epilog = _plain(parser.epilog)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                show_defaults(sub)
            for choice in action._choices_actions:
                choice.help = _plain(choice.help)
            continue
        action.help = _plain(action.help)
        default = action.default
        if (
            not action.option_strings
            or action.help == argparse.SUPPRESS
            or default in (None, False, argparse.SUPPRESS)
            or isinstance(action, argparse._HelpAction)
            or "default" in (action.help or "")
        ):
            continue
        shown = ",".join(map(str, default)) if isinstance(default, (list, tuple)) else default
        text = (action.help or "").rstrip()
        # argparse %-formats help: a literal % in the default must be doubled.
        action.help = (text + " " if text else "") + f"(default: {str(shown).replace('%', '%%')})"
    return parser
