"""A glossary: source terms and the target terms their translations must use.

A tab-separated file, one entry a line (``source term<TAB>target term``; blank lines and
lines starting with ``#`` skipped). For each sentence, every entry whose source term
occurs in it as whole words (case-insensitive) asks its translation to hold the target
term: a lexical constraint (``TranslateRequest.constraints``), the way terminology is
enforced in production MT and in the WMT 2021 terminology task (Dinu et al. 2019,
"Training Neural Machine Translation To Apply Terminology Constraints", use the same
source-match rule). ``nmt-translate --glossary FILE``, ``nmt-eval --glossary FILE``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path


class GlossaryError(ValueError):
    """The glossary file cannot be used (the message names the file and line)."""


@dataclass(frozen=True)
class Glossary:
    """``entries``: (source term, target term) pairs, in file order."""

    entries: tuple[tuple[str, str], ...]

    @classmethod
    def from_file(cls, path: Path | str) -> Glossary:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise GlossaryError(f"cannot read the glossary {path}: {exc}") from None
        entries = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
                raise GlossaryError(
                    f"{path}:{number}: expected 'source term<TAB>target term', got {line!r}"
                )
            entries.append((fields[0].strip(), fields[1].strip()))
        if not entries:
            raise GlossaryError(f"the glossary {path} has no entries")
        return cls(tuple(entries))

    @classmethod
    def for_cli(cls, path: Path | None) -> tuple[Glossary | None, str | None]:
        """``(glossary, None)``, ``(None, None)`` without ``path``, or ``(None, why)``
        when it cannot be used: what a command line reports in one line."""
        if path is None:
            return None, None
        try:
            return cls.from_file(path), None
        except GlossaryError as exc:
            return None, str(exc)

    def __post_init__(self) -> None:
        # one pattern per entry: the source term's words, whole, any case
        patterns = [_whole_words(src) for src, _ in self.entries]
        object.__setattr__(self, "_patterns", patterns)

    def usage(self, sources: list[str], translations: list[str]) -> tuple[int, int]:
        """Term usage (Dinu et al. 2019): of the target terms the ``sources`` call for
        (:meth:`terms_for`), how many their ``translations`` hold, as whole words in any
        case; returns ``(held, called for)``."""
        held = total = 0
        for source, translation in zip(sources, translations, strict=True):
            for term in self.terms_for(source):
                total += 1
                held += _whole_words(term).search(translation) is not None
        return held, total

    def terms_for(self, text: str) -> list[str]:
        """The target terms ``text``'s translation must hold: those of the entries whose
        source term it contains, in the order the source terms first occur, each once."""
        found: list[tuple[int, int, str]] = []
        for k, (pattern, (_, target)) in enumerate(zip(self._patterns, self.entries, strict=True)):
            match = pattern.search(text)
            if match is not None:
                found.append((match.start(), k, target))
        out: list[str] = []
        for _, _, target in sorted(found):
            if target not in out:
                out.append(target)
        return out


@functools.lru_cache(maxsize=4096)
def _whole_words(term: str) -> re.Pattern:
    """``term``'s words, whole, any case, any run of spaces between them."""
    return re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, term.split())) + r"(?!\w)", re.I)
