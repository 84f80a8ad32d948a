"""Moses punctuation normalisation, as Eole's and OpenNMT-py's ``normalize`` transform
applies it to the source before tokenising (torch-free).

The tables are those of the transform's ``MosesPunctNormalizer`` (Eole 0.6.4
``eole/transforms/normalize.py`` = OpenNMT-py 3.5.1's, "most code taken from sacremoses",
a port of Moses' ``normalize-punctuation.perl``; MIT), applied in the same order with the
same options. The one difference in means: ``post_remove_control_chars`` removes the
characters of Unicode categories Cc, Cf, Cs and Co (``unicodedata``) where the transform
uses the ``regex`` module's ``p{C}``, which also has Cn, the unassigned code points.
Python 3.11's Unicode tables (14.0) are older than ``regex``'s: a character assigned
since (emoji such as U+1FAE8) would be unassigned here and removed, so Cn is kept;
code points unassigned in both are the one difference.
``tests/models/test_normalize.py`` compares with the transform's own outputs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain

# fmt: off
EXTRA_WHITESPACE = [
    (r"\r", r""),
    (r"\(", r" ("),
    (r"\)", r") "),
    (r" +", r" "),
    (r"\) ([.!:?;,])", r")\g<1>"),
    (r"\( ", r"("),
    (r" \)", r")"),
    (r"(\d) %", r"\g<1>%"),
    (r" :", r":"),
    (r" ;", r";"),
]

NORMALIZE_UNICODE_IF_NOT_PENN = [(r"`", r"'"), (r"''", r' " ')]

NORMALIZE_UNICODE = [
    ("„", r'"'),
    ("“", r'"'),
    ("”", r'"'),
    ("–", r"-"),
    ("—", r" - "),
    (r" +", r" "),
    ("´", r"'"),
    ("([a-zA-Z])‘([a-zA-Z])", r"\g<1>'\g<2>"),
    ("([a-zA-Z])’([a-zA-Z])", r"\g<1>'\g<2>"),
    ("‘", r"'"),
    ("‚", r"'"),
    ("’", r"'"),
    (r"''", r'"'),
    ("´´", r'"'),
    ("…", r"..."),
]

FRENCH_QUOTES = [
    ("\u00A0«\u00A0", r'"'),
    ("«\u00A0", r'"'),
    ("«", r'"'),
    ("\u00A0»\u00A0", r'"'),
    ("\u00A0»", r'"'),
    ("»", r'"'),
]

HANDLE_PSEUDO_SPACES = [
    ("\u00A0%", r"%"),
    ("nº\u00A0", "nº "),
    ("\u00A0:", r":"),
    ("\u00A0ºC", " ºC"),
    ("\u00A0cm", r" cm"),
    ("\u00A0\\?", "?"),
    ("\u00A0\\!", "!"),
    ("\u00A0;", r";"),
    (",\u00A0", r", "),
    (r" +", r" "),
]

EN_QUOTATION_FOLLOWED_BY_COMMA = [(r'"([,.]+)', r'\g<1>"')]

DE_ES_FR_QUOTATION_FOLLOWED_BY_COMMA = [
    (r',"', r'",'),
    (r'(\.+)"(\s*[^<])', r'"\g<1>\g<2>'),
    # don't fix period at end of sentence
]

DE_ES_CZ_CS_FR = [
    ("(\\d)\u00A0(\\d)", r"\g<1>,\g<2>"),
]

OTHER = [
    ("(\\d)\u00A0(\\d)", r"\g<1>.\g<2>"),
]

# Regex substitutions from replace-unicode-punctuation.perl
# https://github.com/moses-smt/mosesdecoder/blob/master/
# scripts/tokenizer/replace-unicode-punctuation.perl
REPLACE_UNICODE_PUNCTUATION = [
    ("，", ","),
    (r"。\s*", ". "),
    ("、", ","),
    ("”", '"'),
    ("“", '"'),
    ("∶", ":"),
    ("：", ":"),
    ("？", "?"),
    ("《", '"'),
    ("》", '"'),
    ("）", ")"),
    ("！", "!"),
    ("（", "("),
    ("；", ";"),
    ("」", '"'),
    ("「", '"'),
    ("０", "0"),
    ("１", "1"),
    ("２", "2"),
    ("３", "3"),
    ("４", "4"),
    ("５", "5"),
    ("６", "6"),
    ("７", "7"),
    ("８", "8"),
    ("９", "9"),
    (r"．\s*", ". "),
    ("～", "~"),
    ("’", "'"),
    ("…", "..."),
    ("━", "-"),
    ("〈", "<"),
    ("〉", ">"),
    ("【", "["),
    ("】", "]"),
    ("％", "%"),
]
# fmt: on


@dataclass(frozen=True)
class Normalization:
    """The transform's options (``transforms_configs.normalize``) for the source side."""

    lang: str = ""
    penn: bool = True
    norm_quote_commas: bool = True
    norm_numbers: bool = True
    pre_replace_unicode_punct: bool = False
    post_remove_control_chars: bool = False
    _rules: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tables = [EXTRA_WHITESPACE, NORMALIZE_UNICODE, FRENCH_QUOTES, HANDLE_PSEUDO_SPACES]
        if self.penn:  # (sic: the transform adds these when penn is set)
            tables.insert(1, NORMALIZE_UNICODE_IF_NOT_PENN)
        if self.norm_quote_commas:
            if self.lang == "en":
                tables.append(EN_QUOTATION_FOLLOWED_BY_COMMA)
            elif self.lang in ("de", "es", "fr"):
                tables.append(DE_ES_FR_QUOTATION_FOLLOWED_BY_COMMA)
        if self.norm_numbers:
            tables.append(DE_ES_CZ_CS_FR if self.lang in ("de", "es", "cz", "cs", "fr") else OTHER)
        rules = tuple((re.compile(p), s) for p, s in chain(*tables))
        object.__setattr__(self, "_rules", rules)

    def __call__(self, text: str) -> str:
        if self.pre_replace_unicode_punct:
            for pattern, replacement in _UNICODE_PUNCT:
                text = pattern.sub(replacement, text)
        for pattern, replacement in self._rules:
            text = pattern.sub(replacement, text)
        if self.post_remove_control_chars:
            text = "".join(c for c in text if unicodedata.category(c) not in _CONTROL)
        return text.strip()

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if not k.startswith("_")}


_CONTROL = frozenset({"Cc", "Cf", "Cs", "Co"})  # p{C} but Cn (see the module docstring)
_UNICODE_PUNCT = tuple((re.compile(p), s) for p, s in REPLACE_UNICODE_PUNCTUATION)


class NormalizingTokenizer:
    """A source tokenizer whose text is normalised first; everything else is the inner
    tokenizer's (same interface as :class:`models.tokenizer.Tokenizer`)."""

    def __init__(self, inner, normalization: Normalization) -> None:
        self.inner = inner
        self.normalization = normalization

    def __getattr__(self, name: str):
        # Only called for what this class lacks: ids, pieces, decode, vocab_size, ...
        if name in ("inner", "normalization"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(self.normalization(text))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def surface(self, text: str) -> list[str]:
        return self.inner.surface(self.normalization(text))

    def options(self) -> dict:
        return self.inner.options() | {"normalize": self.normalization.to_dict()}
