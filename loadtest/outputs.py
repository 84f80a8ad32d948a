"""Where a harness's result goes: ``OUT.json`` (its numbers, for plots, reports and later
comparisons) beside ``OUT.md`` (the table the docs quote), both written at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_result(out: Path, data: Any, markdown: str) -> tuple[Path, Path]:
    """Write ``data`` to ``out.json`` and ``markdown`` to ``out.md`` (folders made as
    needed); returns the two paths."""
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out.with_suffix(".json"), out.with_suffix(".md")
    json_path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    md_path.write_text(markdown.rstrip("\n") + "\n", encoding="utf-8")
    return json_path, md_path
