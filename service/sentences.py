"""A text of several sentences, translated sentence by sentence (``split_sentences``).

The models this server runs were trained on single sentences: given a paragraph, an
attention RNN drifts after the first sentence (the demo model rendered four everyday
sentences as "Necesito comprar zapatos nuevos. está buscando un trabajo nuevo es bueno
bueno no te han ayudarme ayuda, complacer?"), and the length limit, set by the whole
text, cuts nothing useful. :func:`split` cuts a text into sentences; the request decodes
them as sentences of its own; :func:`join` puts their translations back together, with
the whitespace the source had between them.

The rule: a sentence ends at ``.``, ``!``, ``?`` or ``…``, possibly followed by closing
quotes and brackets, where whitespace follows and the next word does not start with a
lower-case letter; not after an abbreviation of :data:`ABBREVIATIONS` or a single letter
(an initial, "J. Smith"). The CJK full stops ``。！？`` end one whatever follows. A line
break always ends one (a text's own lines stay lines). A piece without a letter is no
sentence of its own: a list's number ("1.") stays with the sentence after it, a citation
mark, an emoji or a zero-width space with the one before it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from models.options import Hypothesis
from service.jobs import TranslationResult

# Common abbreviations ending in a full stop (English, German, French, Spanish), lower case,
# without their last full stop: "Mr. Smith" is one sentence. None that is also a word a
# sentence may end with ("no", "sun", Spanish "mar").
_ABBREVIATED = """mr mrs ms dr prof st jr sr vs etc e.g i.e cf approx inc ltd co corp dept
    vol pp ca mt ft sgt lt capt rev hon jan feb apr jun jul aug sep sept oct nov dec bzw
    evtl ggf usw z.b d.h u.a s.o mme mlle sra srta dña dra pág núm"""
ABBREVIATIONS = frozenset(_ABBREVIATED.split())

_CLOSERS = "\"'”’»)]」』"
_CJK_STOPS = "。！？"
_END = re.compile(r"[.!?…。！？]+[\"'”’»)\]」』]*")
_LINE_BREAK = re.compile(r"(\r\n|\r|\n|\u2028|\u2029)")
_WORD_BEFORE = re.compile(r"([\w.]+)$")


@dataclass(frozen=True)
class Split:
    """One text cut into ``sentences``; ``separators[i]`` is the whitespace after
    sentence ``i`` (the last one's is ``""``)."""

    sentences: tuple[str, ...]
    separators: tuple[str, ...]


def split(text: str) -> Split:
    """``text``'s sentences, without the whitespace around them (a text of one sentence,
    or of none: one sentence, ``text`` stripped)."""
    sentences: list[str] = []
    separators: list[str] = []
    for breaks, line in _lines(text):
        if separators:
            separators[-1] = breaks  # between lines: the line breaks
        pieces = _line_pieces(line)
        sentences += [piece for piece, _ in pieces]
        separators += [sep for _, sep in pieces]
    if not sentences:
        return Split((text.strip(),), ("",))
    return Split(tuple(sentences), tuple(separators))


def _line_pieces(line: str) -> list[tuple[str, str]]:
    """One line's sentences, each with the whitespace after it ("" for the last). A
    piece without a letter is no sentence: a list's number ("1.") joins the sentence
    after it, anything else ("[1]", an emoji, a zero-width space) the one before it."""
    pieces: list[tuple[str, str]] = []
    start = 0
    for match in _END.finditer(line):
        end = match.end()
        rest = line[end:].lstrip()
        cjk = match.group().rstrip(_CLOSERS)[-1:] in _CJK_STOPS
        if not rest:
            continue  # the line's end: its last sentence, below
        if not cjk:  # a CJK full stop ends a sentence whatever follows it
            if not line[end].isspace():
                continue  # "3.5", "U.S.A": no space after it
            if rest[0].islower():
                continue  # "e.g. this"
            if match.group() == "." and _abbreviation(line[start : match.start()]):
                continue
        next_start = len(line) - len(rest)
        # no whitespace between (CJK): a space between their translations
        pieces.append((line[start:end].strip(), line[end:next_start] or " "))
        start = next_start
    pieces.append((line[start:].strip(), ""))
    merged: list[tuple[str, str]] = []
    number = ""  # a leading piece without a letter, waiting for the sentence after it
    for piece, sep in pieces:
        if any(ch.isalpha() for ch in piece):
            merged.append((number + piece, sep))
            number = ""
        elif merged:
            before, gap = merged[-1]
            merged[-1] = (before + gap + piece, sep)
        else:
            number += piece + sep
    if number:  # no letter in the whole line: it stays as it is
        merged.append((number.rstrip(), ""))
    return merged


def _lines(text: str) -> list[tuple[str, str]]:
    """``(line breaks before it, line)`` for each non-blank line of ``text``."""
    out: list[tuple[str, str]] = []
    pending = ""
    for part in _LINE_BREAK.split(text.strip()):
        if _LINE_BREAK.fullmatch(part):
            pending += part
        elif part.strip():
            out.append((pending, part))
            pending = ""
        else:
            pending += part
    return out


def _abbreviation(before: str) -> bool:
    """Whether a full stop after ``before`` ends an abbreviation or an initial rather
    than a sentence."""
    word = _WORD_BEFORE.search(before)
    if word is None:
        return False
    token = word.group(1).lower()
    return token in ABBREVIATIONS or (len(token) == 1 and token.isalpha())


def sentences_of(splits: Sequence[Split]) -> list[str]:
    """The sentences of every text, in order: what the request decodes."""
    return [s for one in splits for s in one.sentences]


def draw_keys(splits: Sequence[Split]) -> list[tuple[int, ...]]:
    """Each sentence's key among the request's random draws: ``(i,)`` for the first
    sentence of text i (what the text unsplit draws), ``(i, j)`` for its j-th after it."""
    return [
        (i, *([j] if j else [])) for i, one in enumerate(splits) for j in range(len(one.sentences))
    ]


def where(index: int, splits: Sequence[Split]) -> str:
    """The sentence ``index`` of :func:`sentences_of` named for the client: which of its
    texts, which sentence of it."""
    for i, one in enumerate(splits):
        if index < len(one.sentences):
            if len(one.sentences) == 1:
                return f"texts[{i}]"
            return f"texts[{i}] (its sentence {index + 1} of {len(one.sentences)})"
        index -= len(one.sentences)
    raise IndexError(f"no sentence {index} past the texts' sentences")


def renamed(message: str, splits: Sequence[Split]) -> str:
    """An error about ``texts[k]`` of the sentences, about the text it came from."""
    return re.sub(r"texts\[(\d+)\]", lambda m: where(int(m.group(1)), splits), message)


def join(results: Sequence[TranslationResult], splits: Sequence[Split]) -> list[TranslationResult]:
    """Each text's result from its sentences' (``results``, aligned with
    :func:`sentences_of`): the best translations joined with the whitespace the source
    had between the sentences, tokens one after another, ``log_prob`` and ``score`` the
    sums of theirs, at the length limit if any one was. One hypothesis each (n-best
    lists are not combined: the request is refused first)."""
    out: list[TranslationResult] = []
    at = 0
    for one in splits:
        parts = results[at : at + len(one.sentences)]
        at += len(one.sentences)
        if len(parts) == 1:
            out.append(parts[0])
            continue
        best = [part.hypotheses[0] for part in parts]
        text = "".join(t + sep for (t, _, _), sep in zip(best, one.separators, strict=True))
        hypothesis = Hypothesis(
            tokens=tuple(tok for _, _, h in best for tok in h.tokens),
            score=sum(h.score for _, _, h in best),
            log_prob=sum(h.log_prob for _, _, h in best),
        )
        out.append(
            TranslationResult(
                source_pieces=[p for part in parts for p in part.source_pieces],
                hypotheses=[(text, [p for _, pieces, _ in best for p in pieces], hypothesis)],
                source_ids=tuple(i for part in parts for i in part.source_ids),
                at_limit=(any(part.at_limit[0] for part in parts),),
            )
        )
    return out
