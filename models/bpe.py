"""subword-nmt BPE (Sennrich et al. 2016) over a vocabulary of the model's own (torch-free).

Eole's and OpenNMT-py's ``bpe`` transform splits a line on single spaces (the text is
already word-tokenised, e.g. by Moses), segments every word with ``subword_nmt.apply_bpe
.BPE`` (a codes file of merges; optionally a vocabulary with a frequency threshold that
splits rare pieces back), marks every piece but a word's last with ``@@`` and, on the way
back, deletes ``"@@ "``. This module applies the same merges by the same rules without the
library, so a bundle of this kind needs no extra package:

* subword-nmt merges in rounds: the adjacent pair whose merge comes first in the codes,
  then every non-overlapping occurrence of it, left to right. Each round rescans the whole
  word, so a word of n characters costs O(n^2): 0.45 s for 8,000 random letters, time the
  event loop would owe every request in flight. Here a heap of pair ranks over a linked list
  does the same rounds in O(n log n) (``tests/models/test_bpe.py`` checks the results
  against the library's on random words and codes).
* the vocabulary split (``check_vocab_and_split``) runs with an explicit stack where
  subword-nmt recurses (a long piece cannot exceed Python's recursion limit here).
"""

from __future__ import annotations

import heapq
import itertools
import json
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from models.tokenizer import SegmentingTokenizer, TokenizerError, bundle_file, mark_ids

SEPARATOR = "@@"  # the transform's (subword-nmt's default); Eole has no option for it
END = "</w>"
_REVERSE = re.compile(r"(@@ )|(@@ ?$)")  # the transform's detokenisation
# Segmented words kept (at most this many characters of words, each of at most
# _CACHE_LONGEST): a full cache starts again. Bounded by characters, not words: a word of
# 8,000 characters in an unmerged script holds ~700 KB of pieces.
_CACHE_CHARS = 1 << 18
_CACHE_LONGEST = 48
# What eole predict strips from a line (bytes.strip(): ASCII whitespace) before the split.
_LINE_ENDS = " \t\n\r\x0b\x0c"


class BpeCodes:
    """The merges of a subword-nmt codes file and how they segment one word."""

    def __init__(self, text: str, vocabulary: Iterable[str] | None = None) -> None:
        """``text``: the codes file; ``vocabulary``: pieces allowed (subword-nmt's ``vocab``
        after its threshold; None or empty: no restriction, as in subword-nmt)."""
        lines = text.split("\n")
        self.version = (0, 1)
        if lines[0].startswith("#version:"):
            number = re.sub(r"(\.0+)*$", "", lines[0].split()[-1])
            try:
                self.version = tuple(int(x) for x in number.split("."))
            except ValueError:
                raise TokenizerError(f"BPE codes: bad version line {lines[0]!r}") from None
            lines = lines[1:]
        if self.version not in ((0, 1), (0, 2)):
            raise TokenizerError(f"BPE codes version {self.version}; known: 0.1, 0.2")
        codes = []
        for i, line in enumerate("\n".join(lines).rstrip("\n").split("\n")):
            pair = tuple(line.strip("\r\n ").split(" "))
            if len(pair) != 2:
                raise TokenizerError(
                    f"BPE codes line {i + 1 + (self.version != (0, 1))} is {line!r}: each line "
                    "is two subword units separated by one space"
                )
            codes.append(pair)
        # as subword-nmt builds them: the first of duplicate merges wins, and the reverse
        # map (vocabulary splits) keeps the pair its iteration order leaves last
        self.ranks = dict((code, i) for i, code in reversed(list(enumerate(codes))))
        self.reverse = dict((a + b, (a, b)) for (a, b), _ in self.ranks.items())
        self.pairs = {rank: pair for pair, rank in self.ranks.items()}
        self.vocabulary = frozenset(vocabulary or ())

    def segment(self, word: str) -> tuple[str, ...]:
        """``word`` (non-empty, no spaces) as pieces, without separators."""
        if len(word) == 1:  # subword-nmt returns one character as it is, unchecked
            return (word,)
        if self.version == (0, 1):
            symbols = list(word) + [END]
        else:
            symbols = list(word[:-1]) + [word[-1] + END]
        symbols = self._merge(symbols)
        if symbols[-1] == END:
            symbols = symbols[:-1]
        elif symbols[-1].endswith(END):
            symbols[-1] = symbols[-1][: -len(END)]
        if self.vocabulary:
            return tuple(self._check_vocabulary(symbols))
        return tuple(symbols)

    def _merge(self, symbols: list[str]) -> list[str]:
        """subword-nmt's rounds of merges over ``symbols``. Nodes keep their first index
        (a merge keeps its left node), so ordering by index is ordering left to right."""
        n = len(symbols)
        nxt, prv, alive = list(range(1, n + 1)), list(range(-1, n - 1)), [True] * n
        ranks = self.ranks
        heap = [(ranks[p], i) for i, p in enumerate(itertools.pairwise(symbols)) if p in ranks]
        heapq.heapify(heap)
        while heap:
            rank = heap[0][0]
            starts = set()
            while heap and heap[0][0] == rank:  # every occurrence this round sees
                starts.add(heapq.heappop(heap)[1])
            left, right = self.pairs[rank]
            merged = []
            for i in sorted(starts):
                j = nxt[i]
                # stale: merged away, or the pair changed since it was pushed
                if not alive[i] or j >= n or symbols[i] != left or symbols[j] != right:
                    continue
                symbols[i] += symbols[j]
                alive[j] = False
                nxt[i] = nxt[j]
                if nxt[j] < n:
                    prv[nxt[j]] = i
                merged.append(i)
            for i in merged:  # pairs the merges made; none of them is this round's pair
                if not alive[i]:
                    continue
                p = prv[i]
                if p >= 0 and (symbols[p], symbols[i]) in ranks:
                    heapq.heappush(heap, (ranks[symbols[p], symbols[i]], p))
                j = nxt[i]
                if j < n and (symbols[i], symbols[j]) in ranks:
                    heapq.heappush(heap, (ranks[symbols[i], symbols[j]], i))
        return [s for s, keep in zip(symbols, alive, strict=True) if keep]

    def _check_vocabulary(self, pieces: list[str]) -> list[str]:
        """subword-nmt's ``check_vocab_and_split``: a piece the vocabulary lacks (with
        ``@@`` unless it ends the word) is split by undoing merges until its parts are in
        it or cannot be split."""
        vocab, sep, reverse = self.vocabulary, SEPARATOR, self.reverse
        out: list[str] = []
        last = len(pieces) - 1
        for k, piece in enumerate(pieces):
            final = k == last
            if (piece in vocab) if final else (piece + sep in vocab):
                out.append(piece)
                continue
            # (segment, final, emit as is); popped in output order
            stack = [(piece, final, False)]
            while stack:
                segment, fin, emit = stack.pop()
                pair = None if emit else reverse.get(segment + END if fin else segment)
                if pair is None:
                    out.append(segment)
                    continue
                left, right = pair
                if fin:
                    right = right[:-4]
                right_ok = (right in vocab) if fin else (right + sep in vocab)
                stack.append((right, fin, right_ok))
                stack.append((left, False, left + sep in vocab))
        return out


def read_vocabulary(text: str, threshold: int | None) -> list[str]:
    """subword-nmt's ``read_vocabulary``: the pieces of ``piece count`` lines counted at
    least ``threshold`` times (all with None)."""
    pieces = []
    lines = text.split("\n")  # (read_text made \r\n and \r newlines; no other breaks)
    if lines and lines[-1] == "":
        lines.pop()
    for i, line in enumerate(lines):
        parts = line.strip("\r\n ").split(" ")
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise TokenizerError(f"BPE vocabulary line {i + 1} is {line!r}: expected 'piece count'")
        if threshold is None or int(parts[1]) >= threshold:
            pieces.append(parts[0])
    return pieces


class BpeTokenizer(SegmentingTokenizer):
    """Text <-> ids through subword-nmt BPE and a token vocabulary; same interface as
    :class:`models.tokenizer.Tokenizer`."""

    kind = "bpe"

    def __init__(
        self,
        tokens: Sequence[str],
        *,
        unk_id: int,
        codes_file: Path | str,
        vocabulary: Sequence[str] | None = None,
        end_tokens: Sequence[str] = (),
    ) -> None:
        """``tokens``: the model's vocabulary, token by id; ``codes_file``: the BPE codes;
        ``vocabulary``: the pieces BPE may output (the transform's subword vocabulary
        after its threshold), None for any; ``end_tokens``: appended to every sentence
        (Joey NMT appends ``</s>`` to its sources)."""
        self.codes_file = Path(codes_file)
        try:
            text = self.codes_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenizerError(f"BPE codes {self.codes_file}: {exc}") from None
        self.vocabulary = sorted(set(vocabulary)) if vocabulary else None
        self._codes = BpeCodes(text, self.vocabulary)
        self._cache: dict[str, tuple[str, ...]] = {}
        self._cached_chars = 0
        self._set_vocabulary(tokens, unk_id)
        mark_ids(self.ids, end_tokens, "end")
        self.end_tokens = tuple(end_tokens)

    def surface(self, text: str) -> list[str]:
        """``text``'s pieces as the transform writes them (``@@`` on all but a word's last),
        one per id of :meth:`encode`. The line's ends are stripped of ASCII whitespace
        first, as ``eole predict`` strips each line it reads."""
        cache, out = self._cache, []
        for word in text.strip(_LINE_ENDS).split(" "):
            if not word:  # subword-nmt skips the empty words of repeated spaces
                continue
            pieces = cache.get(word)
            if pieces is None:
                pieces = self._codes.segment(word)
                if len(word) <= _CACHE_LONGEST:
                    if self._cached_chars + len(word) > _CACHE_CHARS:
                        cache.clear()
                        self._cached_chars = 0
                    cache[word] = pieces
                    self._cached_chars += len(word)
            out.extend(piece + SEPARATOR for piece in pieces[:-1])
            out.append(pieces[-1])
        return out + list(self.end_tokens) if out else out

    def detokenize(self, pieces: Sequence[str]) -> str:
        """The transform's reverse: pieces joined by spaces, ``"@@ "`` deleted."""
        return _REVERSE.sub("", " ".join(pieces))

    def options(self) -> dict:
        # end tokens only when set: a manifest without them reads as before
        return {"unk_id": self.unk_id} | (
            {"end_tokens": list(self.end_tokens)} if self.end_tokens else {}
        )

    def write(self, directory: Path, side: str) -> dict[str, str]:
        """Write this tokenizer's files into ``directory``; their manifest keys."""
        files = self._write_vocabulary(directory, side) | {"model_file": f"{side}.bpe.codes"}
        shutil.copyfile(self.codes_file, directory / files["model_file"])
        if self.vocabulary is not None:
            files["vocabulary_file"] = f"{side}.bpe-vocabulary.json"
            text = json.dumps(self.vocabulary, ensure_ascii=False) + "\n"
            (directory / files["vocabulary_file"]).write_text(text, encoding="utf-8")
        return files


def load_bpe(entry: dict, directory: Path) -> BpeTokenizer:
    """The ``bpe`` tokenizer a manifest entry describes (see :meth:`BpeTokenizer.write`)."""
    try:
        tokens = json.loads(bundle_file(directory, entry["file"]).read_text(encoding="utf-8"))
        codes, unk_id = bundle_file(directory, entry["model_file"]), entry["unk_id"]
        vocabulary = None
        if "vocabulary_file" in entry:
            path = bundle_file(directory, entry["vocabulary_file"])
            vocabulary = json.loads(path.read_text(encoding="utf-8"))
    except (KeyError, OSError, ValueError) as exc:
        raise TokenizerError(f"unreadable bpe tokenizer entry {entry}: {exc}") from None
    if not isinstance(tokens, list) or not isinstance(unk_id, int):
        raise TokenizerError("a bpe tokenizer entry needs a token list and an integer unk_id")
    if vocabulary is not None and not all(isinstance(p, str) for p in vocabulary):
        raise TokenizerError("a bpe vocabulary file is a JSON list of pieces")
    end = entry.get("end_tokens", [])
    if not isinstance(end, list) or not all(isinstance(t, str) for t in end):
        raise TokenizerError("a bpe tokenizer entry's end_tokens is a list of tokens")
    return BpeTokenizer(
        tokens, unk_id=unk_id, codes_file=codes, vocabulary=vocabulary, end_tokens=end
    )
