"""English sentence sources of ``nmt-data build``: Debian packages read offline.

Each :class:`Source` names the Debian package that ships its text, that package's
licence and a reader that yields candidate English sentences. WordNet glosses and
examples are taken as they are (the demo model's original data); the other sources
pass through :func:`plain_sentence`, which keeps only short, clean, ordinary sentences.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

WORDNET_DIR = Path("/usr/share/wordnet")
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
FORTUNES_DIR = Path("/usr/share/games/fortunes")
FORTUNES_MIN_FILES = ("fortunes", "literature", "riddles")
# Files of Debian's `fortunes` kept for everyday English. Left out: computing and Debian
# jargon (computers, linux, linuxcookie, perl, debian, knghtbrd), nonsense or fiction
# vocabulary (zippy, startrek, pratchett, magic, tao), odd formats (ascii-art,
# definitions, disclaimer, goedel, news, translate-me) and sensitive topics (ethnic,
# men-women, politics, drugs).
FORTUNES_FILES = (
    "art", "cookie", "education", "food", "humorists", "kids", "law", "love", "medicine",
    "miscellaneous", "paradoxum", "people", "pets", "platitudes", "science", "songs-poems",
    "sports", "wisdom", "work",
)  # fmt: skip
DING_FILE = Path("/usr/share/trans/de-en")
DOC_DIR = Path("/usr/share/doc")
DOC_NAMES = re.compile(r"(README|readme)[^/]*|[^/]+\.(txt|md)(\.gz)?")
DOC_MAX_BYTES = 200_000
MAX_WORDS = 12

# One sentence of ordinary prose: a capital first, letters, digits and light punctuation
# inside, a letter or digit before the final . ! or ?. Anything else (quotes, brackets,
# slashes, colons, inner full stops as in "e.g." or "1.2", URLs, code) is rejected.
PLAIN = re.compile(r"[A-Z][A-Za-z0-9 ,;'\-]*[A-Za-z0-9][.!?]")
SHOUTING = re.compile(r"\b[A-Z]{2,}\b")  # acronyms, program names, all-caps words
INNER_CAPITAL = re.compile(r"[A-Za-z]*[a-z][A-Z]")  # iPhone, McDonald, camelCase
LOOSE_DASH = re.compile(r"(^|\s)-|-($|\s)|--|''")
MIXED_TOKEN = re.compile(r"\b(\d+[A-Za-z]|[A-Za-z]+\d)")
LONG_WORD = re.compile(r"[A-Za-z]{20}")
FIRST_PERSON = re.compile(r"I('m|'ll|'ve|'d)?")
# A sentence ends at . ! or ? (and closing quotes) before a space and a capital.
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]*[A-Z])")
OUTER_MARKS = re.compile(r"^[\"'(\[]+|(?<=[.!?])[\"')\]]+$")
ATTRIBUTION = re.compile(r"(^|\s)--?\s?[A-Z][^.!?]*$")
LABELS = re.compile(r"\s*(\{[^}]*\}|\[[^\]]*\]|\([^)]*\))")
ALTERNATIVES = re.compile(r"\b([\w']+)(?: ?/ ?[\w']+)+")


def normalize(text: str) -> str:
    return " ".join(text.split())


def plain_sentence(
    text: str, *, max_words: int = MAX_WORDS, min_words: int = 2, proper_nouns: bool = True
) -> bool:
    """Whether ``text`` is one short, clean, ordinary English sentence.

    ``proper_nouns=False`` also rejects capitalised words after the first one (but "I"),
    which in package documentation are mostly names of programs and projects.
    """
    words = text.split()
    if not min_words <= len(words) <= max_words or not PLAIN.fullmatch(text):
        return False
    if any(p.search(text) for p in (SHOUTING, INNER_CAPITAL, LOOSE_DASH, MIXED_TOKEN, LONG_WORD)):
        return False
    if not proper_nouns:
        inner = (w.strip(",;.!?") for w in words[1:])
        return all(not w[:1].isupper() or FIRST_PERSON.fullmatch(w) for w in inner)
    return True


def split_sentences(paragraph: str) -> Iterator[str]:
    """Sentences of a paragraph, outer quotes and brackets removed."""
    for part in SENTENCE_END.split(normalize(paragraph)):
        part = OUTER_MARKS.sub("", part.strip())
        if part:
            yield part


def plain_sentences(paragraphs: Iterable[str], **filters) -> Iterator[str]:
    for paragraph in paragraphs:
        for sentence in split_sentences(paragraph.replace("\u2019", "'")):
            if plain_sentence(sentence, **filters):
                yield sentence


def split_gloss(gloss: str) -> Iterator[str]:
    """Definitions and quoted examples of one WordNet gloss, cleaned."""
    for part in re.split(r';(?=(?:[^"]*"[^"]*")*[^"]*$)', gloss):
        part = normalize(part.strip().strip('"').strip())
        if part:
            yield part


def sentence_case(text: str) -> str:
    """Capitalise the first letter: Apertium capitalises every output line it sees as a
    sentence start, so doing the same on the source keeps the mapping consistent."""
    return text[:1].upper() + text[1:]


def wordnet_sentences(
    wordnet_dir: Path = WORDNET_DIR, *, min_words: int = 3, max_words: int = 40
) -> list[str]:
    """Unique English sentences from WordNet glosses, in file order."""
    seen: dict[str, None] = {}
    for name in WORDNET_FILES:
        with open(wordnet_dir / name, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("  ") or " | " not in line:
                    continue  # licence header
                for part in split_gloss(line.split(" | ", 1)[1]):
                    if min_words <= len(part.split()) <= max_words:
                        seen.setdefault(sentence_case(part), None)
    return list(seen)


def fortune_paragraphs(path: Path) -> Iterator[str]:
    """The text of each fortune cookie of a fortune file, without attributions."""
    text = path.read_text(encoding="utf-8", errors="replace")
    for cookie in re.split(r"^%\s*$", text, flags=re.M):
        lines = []
        for line in cookie.splitlines():
            if line.strip().startswith("--"):
                break  # "-- Author" and anything after it
            lines.append(ATTRIBUTION.sub("", line.strip()))
        yield " ".join(lines)


def fortune_sentences(directory: Path, files: Iterable[str]) -> Iterator[str]:
    for name in files:
        yield from plain_sentences(fortune_paragraphs(directory / name))


def ding_sentences(path: Path) -> Iterator[str]:
    """English example sentences of the Ding German-English dictionary.

    A line is ``German :: English``; ``|`` separates related entries and ``;`` synonyms;
    ``{...}`` and ``[...]`` are grammar and subject labels, ``(...)`` optional words and
    ``a/b`` alternatives (the first is kept).
    """
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("#") or " :: " not in line:
                continue
            english = line.split(" :: ", 1)[1].replace("\u2019", "'")
            english = LABELS.sub("", english)  # grammar, subject and optional words
            english = ALTERNATIVES.sub(r"\1", english)  # "an/the" -> "an"
            yield from plain_sentences(re.split(r"\s\|\s|;\s", english), min_words=2)


def _doc_text(path: Path) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        return fh.read(DOC_MAX_BYTES)


def doc_paragraphs(text: str) -> Iterator[str]:
    """Prose paragraphs of a README or text file: code blocks, indented lines and
    markup lines (headings, tables, lists of options) left out."""
    text = re.sub(r"```.*?```", "\n\n", text, flags=re.S)
    lines: list[str] = []
    for line in [*text.splitlines(), ""]:
        stripped = line.strip()
        if not stripped or line.startswith(("    ", "\t")) or stripped[0] in "#|=+*-<>$`[":
            if lines:
                yield " ".join(lines)
            lines = []
        else:
            lines.append(stripped)


def doc_sentences(directory: Path) -> Iterator[str]:
    for path in sorted(directory.glob("*/*")):
        if path.is_file() and DOC_NAMES.fullmatch(path.name):
            text = _doc_text(path)
            yield from plain_sentences(doc_paragraphs(text), proper_nouns=False)


@dataclass(frozen=True)
class Source:
    """Where a source's text lies, which Debian package ships it and under what licence."""

    name: str
    package: str
    licence: str
    path: Path
    files: tuple[str, ...]  # files required under ``path`` (a directory); () if a file
    read: Callable[[Path], Iterable[str]]
    description: str
    copyright: str = ""  # the Debian copyright file, if not /usr/share/doc/PACKAGE/copyright

    def __post_init__(self) -> None:
        if not self.copyright:
            object.__setattr__(self, "copyright", f"/usr/share/doc/{self.package}/copyright")

    def missing(self, path: Path | None = None) -> list[str]:
        root = path or self.path
        if not self.files:
            return [] if root.exists() else [str(root)]
        return [f for f in self.files if not (root / f).is_file()]


SOURCES = {
    s.name: s
    for s in (
        Source(
            "wordnet",
            "wordnet-base",
            "WordNet 3.0 licence (Princeton University; permissive, BSD-style)",
            WORDNET_DIR,
            WORDNET_FILES,
            wordnet_sentences,
            "WordNet 3.0 glosses and example sentences (3-40 words)",
        ),
        Source(
            "fortunes-min",
            "fortunes-min",
            "BSD-3-Clause (fortune-mod, Regents of the University of California); "
            "quotations from many authors",
            FORTUNES_DIR,
            FORTUNES_MIN_FILES,
            lambda p: fortune_sentences(p, FORTUNES_MIN_FILES),
            "fortune cookies: fortunes, literature, riddles; plain sentences only",
        ),
        Source(
            "fortunes",
            "fortunes",
            "BSD-3-Clause (fortune-mod, Regents of the University of California); "
            "quotations from many authors",
            FORTUNES_DIR,
            FORTUNES_FILES,
            lambda p: fortune_sentences(p, FORTUNES_FILES),
            f"fortune cookies: {', '.join(FORTUNES_FILES)}; plain sentences only",
        ),
        Source(
            "ding",
            "trans-de-en",
            "GPL-2+ (Ding German-English dictionary, Frank Richter, TU Chemnitz)",
            DING_FILE,
            (),
            ding_sentences,
            "English example sentences of the Ding dictionary (the German side is unused)",
        ),
        Source(
            "docs",
            "(the packages installed on the building machine)",
            "each package's own licence, see /usr/share/doc/PACKAGE/copyright",
            DOC_DIR,
            (),
            doc_sentences,
            "README, *.txt and *.md files under /usr/share/doc; plain sentences without "
            "names; depends on what is installed, so not reproducible across machines",
            "/usr/share/doc/*/copyright",
        ),
    )
}
DEFAULT_SOURCES = ("wordnet", "fortunes-min", "fortunes", "ding")
