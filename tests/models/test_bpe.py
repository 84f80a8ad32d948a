"""models.bpe against subword-nmt itself (the library Eole's and OpenNMT-py's ``bpe``
transform calls): the same pieces for learnt and for adversarial codes, both codes
versions, with and without a vocabulary threshold; and the tokenizer around it."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from subword_nmt.apply_bpe import BPE
from subword_nmt.apply_bpe import read_vocabulary as library_vocabulary
from subword_nmt.learn_bpe import learn_bpe

import models.bpe
from models.bpe import BpeCodes, BpeTokenizer, read_vocabulary
from models.tokenizer import TokenizerError, load_tokenizer, tokenizer_files, write_tokenizer

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "models" / "pretrained" / "en-es" / "test.en").read_text(encoding="utf-8")


def _library(codes: str, vocab: str | None = None, threshold: int | None = None):
    vocabulary = library_vocabulary(io.StringIO(vocab), threshold) if vocab else None
    return BPE(io.StringIO(codes), vocab=vocabulary)


def _ours(codes: BpeCodes, word: str) -> list[str]:
    pieces = codes.segment(word)
    return [p + "@@" for p in pieces[:-1]] + [pieces[-1]]


@pytest.fixture(scope="module")
def learnt() -> tuple[str, str, list[str]]:
    """(codes v0.2, 'piece count' vocabulary of the segmented text, test words)."""
    out = io.StringIO()
    learn_bpe(io.StringIO(TEXT[:60_000]), out, 800, min_frequency=2)
    codes = out.getvalue()
    library = _library(codes)
    counts: dict[str, int] = {}
    for word in TEXT.split():
        for piece in library.segment_tokens([word]):
            counts[piece] = counts.get(piece, 0) + 1
    vocab = "".join(f"{p} {n}\n" for p, n in sorted(counts.items(), key=lambda x: -x[1]))
    rng = random.Random(0)
    words = sorted(set(TEXT.split()))[:3000]
    words += [
        "".join(rng.choice("etaoinshrdlu") for _ in range(rng.randint(1, 60))) for _ in range(500)
    ]
    return codes, vocab, words


@pytest.mark.parametrize("version", ["0.2", "0.1"])
@pytest.mark.parametrize("threshold", [None, 2, 20])
def test_learnt_codes_segment_as_subword_nmt_does(learnt, version, threshold):
    codes, vocab, words = learnt
    if version == "0.1":
        codes = codes.split("\n", 1)[1]  # no header: subword-nmt reads it as 0.1
    library = _library(codes, vocab if threshold else None, threshold)
    ours = BpeCodes(codes, read_vocabulary(vocab, threshold) if threshold else None)
    assert ours.version == tuple(int(x) for x in version.split("."))
    differ = [w for w in words if _ours(ours, w) != library.segment_tokens([w])]
    assert differ == []
    if threshold:  # the vocabulary split is exercised: it changes some words
        plain = BpeCodes(codes)
        assert any(_ours(plain, w) != _ours(ours, w) for w in words)


@pytest.mark.parametrize("seed", range(6))
def test_overlapping_and_out_of_order_merges_as_subword_nmt(seed):
    """Random codes over two letters: overlapping occurrences (``a a a``), duplicate lines,
    merges of pieces not made yet, end-of-word merges; random words and a vocabulary."""
    rng = random.Random(seed)
    symbols = ["a", "b", "a</w>", "b</w>"]
    lines = []
    for _ in range(40):
        left, right = rng.choice(symbols[:2] + symbols[4:]), rng.choice(symbols)
        lines.append(f"{left} {right}")
        if not left.endswith("</w>"):
            symbols.append(left + right)
    codes = "#version: 0.2\n" + "\n".join(lines) + "\n"
    words = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 30))) for _ in range(300)]
    library, ours = _library(codes), BpeCodes(codes)
    assert [_ours(ours, w) for w in words] == [library.segment_tokens([w]) for w in words]
    pieces = {p for w in words for p in library.segment_tokens([w])}
    vocab = "".join(f"{p} {rng.randint(1, 3)}\n" for p in sorted(pieces))
    library, ours = _library(codes, vocab, 2), BpeCodes(codes, read_vocabulary(vocab, 2))
    assert [_ours(ours, w) for w in words] == [library.segment_tokens([w]) for w in words]


def test_a_long_word_is_the_librarys(learnt):
    codes, _, _ = learnt
    rng = random.Random(1)
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(2000))
    assert _ours(BpeCodes(codes), word) == _library(codes).segment_tokens([word])


def test_vocabulary_split_deeper_than_the_recursion_limit():
    """A 1,500-character word merged into one piece by a chain of merges, missing from
    the vocabulary: subword-nmt's recursive split exceeds Python's recursion limit; this
    one splits it back into its characters."""
    chars = [chr(0x4E00 + i) for i in range(1500)]
    lines = [f"{''.join(chars[:n])} {chars[n]}" for n in range(1, 1499)]
    lines.append(f"{''.join(chars[:1499])} {chars[1499]}</w>")
    codes = "#version: 0.2\n" + "\n".join(lines) + "\n"
    word = "".join(chars)
    assert BpeCodes(codes).segment(word) == (word,)
    vocab = [c + "@@" for c in chars[:-1]] + [chars[-1]]
    assert BpeCodes(codes, vocab).segment(word) == tuple(chars)
    library = _library(codes, "".join(f"{p} 5\n" for p in vocab), 1)
    with pytest.raises(RecursionError):
        library.segment_tokens([word])


@pytest.mark.parametrize(
    ("codes", "message"),
    [
        ("", "BPE codes line 1 is ''"),
        ("#version: 0.2\na b\nc d e\n", "BPE codes line 3 is 'c d e'"),
        ("a  b\n", "BPE codes line 1 is 'a  b'"),
        ("#version: 0.3\na b\n", r"BPE codes version \(0, 3\); known: 0.1, 0.2"),
        ("#version: x.y\na b\n", "bad version line"),
    ],
)
def test_malformed_codes_are_refused(codes, message):
    with pytest.raises(TokenizerError, match=message):
        BpeCodes(codes)


def test_malformed_vocabulary_is_refused():
    assert read_vocabulary("a@@ 3\nb 1\n", 2) == ["a@@"]
    assert read_vocabulary("a@@ 3\nb 1\n", None) == ["a@@", "b"]
    with pytest.raises(TokenizerError, match="BPE vocabulary line 2 is 'b'"):
        read_vocabulary("a@@ 3\nb\n", 2)
    with pytest.raises(TokenizerError, match="line 1 is 'a x'"):
        read_vocabulary("a x\n", 2)


def _tokenizer(tmp_path: Path, learnt, vocabulary=None) -> BpeTokenizer:
    codes, _, _ = learnt
    (tmp_path / "codes").write_text(codes, encoding="utf-8")
    library = _library(codes)
    pieces = sorted({p for w in TEXT.split()[:4000] for p in library.segment_tokens([w])})
    return BpeTokenizer(
        ["<unk>", "<blank>", "<s>", "</s>", *pieces],
        unk_id=0,
        codes_file=tmp_path / "codes",
        vocabulary=vocabulary,
    )


def test_tokenizer_is_the_transform(tmp_path, learnt):
    """Eole's BPETransform: split on single spaces (empty words dropped), segment, ``@@``
    on all but a word's last piece; reverse: delete ``"@@ "``."""
    tok = _tokenizer(tmp_path, learnt)
    library = _library(learnt[0])
    for line in TEXT.splitlines()[:200] + ["two  spaces here", "zzqx unknownish"]:
        want = library.segment_tokens(line.split(" "))
        assert tok.surface(line) == want
        ids = tok.encode(line)
        assert [tok.tokens[i] if i else p for i, p in zip(ids, want, strict=True)] == want
        assert tok.detokenize(want) == " ".join(w for w in line.split(" ") if w)
    assert tok.detokenize(["un@@", "be@@", "liev@@", "able", "x@@"]) == "unbelievable x"
    assert tok.decode(tok.encode("the cat")) == "the cat"


def test_cache_is_bounded_and_changes_nothing(tmp_path, learnt, monkeypatch):
    """Bounded by characters (a long word's pieces are many), long words never kept."""
    tok = _tokenizer(tmp_path, learnt)
    words = sorted(set(TEXT.split()))[:500]
    want = [tok.surface(w) for w in words]
    tok._cache.clear()
    tok._cached_chars = 0
    monkeypatch.setattr(models.bpe, "_CACHE_CHARS", 200)
    got = [tok.surface(w) for w in words]
    assert got == want and 0 < sum(map(len, tok._cache)) <= 200
    tok._cache.clear()
    long = "x" * (models.bpe._CACHE_LONGEST + 1)
    tok.surface(f"{long} the")
    assert list(tok._cache) == ["the"]


def test_line_ends_are_stripped_as_eole_predict_does(tmp_path, learnt):
    """eole predict strips each -src line (bytes.strip: ASCII whitespace); a tab or a CR
    at the end would otherwise become a piece of its own."""
    tok = _tokenizer(tmp_path, learnt)
    plain = tok.surface("the house .")
    for text in ("the house .\t", "\tthe house .\r", " the house .\r\n", "the house .\x0c"):
        assert tok.surface(text) == plain, text
    assert tok.surface("the\thouse") != tok.surface("the house")  # inside: a character


def test_vocabulary_lines_break_at_newlines_only():
    """subword-nmt reads the vocabulary file line by line: a U+2028 inside a piece is
    part of it (str.splitlines would break there)."""
    assert read_vocabulary("a\u2028b@@ 5\nc 3\n", 1) == ["a\u2028b@@", "c"]
    with pytest.raises(TokenizerError, match="BPE vocabulary line 2 is ''"):
        read_vocabulary("a 5\n\nc 3\n", 1)


@pytest.mark.parametrize("vocabulary", [None, ["th@@", "e"]])
def test_bundle_round_trip(tmp_path, learnt, vocabulary):
    tok = _tokenizer(tmp_path, learnt, vocabulary)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    entry = write_tokenizer(tok, bundle, "source")
    assert entry["kind"] == "bpe"
    files = tokenizer_files(entry)
    assert all((bundle / f).is_file() for f in files)
    assert ("source.bpe-vocabulary.json" in files) == (vocabulary is not None)
    back = load_tokenizer(json.loads(json.dumps(entry)), bundle, (1, 0, 2, 3))
    line = TEXT.splitlines()[5]
    assert back.encode(line) == tok.encode(line) and back.tokens == tok.tokens
    if vocabulary:  # restricted: "the" is split back into pieces the vocabulary has
        assert back.surface("the") == ["th@@", "e"]


def test_end_tokens_close_every_sentence_and_travel_in_the_bundle(tmp_path, learnt):
    """Joey NMT appends ``</s>`` to its sources: so does ``end_tokens``, on every non-empty
    sentence, through the manifest and back; a token the vocabulary lacks is refused."""
    plain = _tokenizer(tmp_path, learnt)
    tok = BpeTokenizer(plain.tokens, unk_id=0, codes_file=tmp_path / "codes", end_tokens=["</s>"])
    assert tok.surface("the house") == [*plain.surface("the house"), "</s>"]
    assert tok.encode("the house")[-1] == 3 and tok.surface("  ") == []
    assert "end_tokens" not in plain.options()  # older servers read manifests without it
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    entry = json.loads(json.dumps(write_tokenizer(tok, bundle, "source")))
    assert entry["end_tokens"] == ["</s>"]
    back = load_tokenizer(entry, bundle, (1, 0, 2, 3))
    assert back.encode("the house") == tok.encode("the house")
    with pytest.raises(TokenizerError, match=r"end tokens \['EOS'\] are not in the vocabulary"):
        BpeTokenizer(plain.tokens, unk_id=0, codes_file=tmp_path / "codes", end_tokens=["EOS"])
    with pytest.raises(TokenizerError, match="end_tokens is a list of tokens"):
        load_tokenizer({**entry, "end_tokens": "</s>"}, bundle, (1, 0, 2, 3))


def test_bundle_entry_errors_are_tokenizer_errors(tmp_path, learnt):
    tok = _tokenizer(tmp_path, learnt)
    entry = write_tokenizer(tok, tmp_path, "target")
    (tmp_path / entry["model_file"]).write_text("a b c\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match="BPE codes line 1 is 'a b c'"):
        load_tokenizer(entry, tmp_path, (1, 0, 2, 3))
    with pytest.raises(TokenizerError, match="unreadable bpe tokenizer entry"):
        load_tokenizer(
            {**entry, "model_file": None, "file": "missing.json"}, tmp_path, (1, 0, 2, 3)
        )
    with pytest.raises(TokenizerError, match="BPE codes .*missing"):
        BpeTokenizer(["<unk>"], unk_id=0, codes_file=tmp_path / "missing")


def _random_trial(seed: int) -> list:
    """A random codes file (version 0.1 or 0.2, 10% duplicate lines, merges of pieces
    nothing makes, ``</w>`` alone and inside operands) over a 2-4 letter alphabet, 200
    random words of 1-120 letters, with and without a vocabulary threshold: the words
    where this module and subword-nmt differ."""
    rng = random.Random(seed)
    alphabet = rng.choice(["abcd", "ab", "a</w>"])
    version = rng.choice(["0.1", "0.2"])
    symbols = list(set(alphabet)) + [c + "</w>" for c in set(alphabet)] + ["</w>"]
    lines: list[str] = []
    for _ in range(rng.randint(50, 300)):
        if rng.random() < 0.1 and lines:
            lines.append(rng.choice(lines))
            continue
        left, right = rng.choice(symbols), rng.choice(symbols)
        lines.append(f"{left} {right}")
        symbols.append(left + right)
    header = f"#version: {version}\n" if version == "0.2" or rng.random() < 0.5 else ""
    codes = header + "\n".join(lines) + "\n"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120))) for _ in range(200)]
    library, ours = _library(codes), BpeCodes(codes)
    bad = [w for w in words if _ours(ours, w) != library.segment_tokens([w])]
    pieces = {p for w in words for p in library.segment_tokens([w])}
    pieces |= {s for s in symbols[:30] if "</w>" not in s} | {s + "@@" for s in symbols[:30]}
    vocab = "".join(f"{p} {rng.randint(1, 4)}\n" for p in sorted(pieces))
    threshold = rng.randint(1, 4)
    library = _library(codes, vocab, threshold)
    ours = BpeCodes(codes, read_vocabulary(vocab, threshold))
    for w in words:
        try:
            want = library.segment_tokens([w])
        except RecursionError:  # the library's own limit (ours has none)
            continue
        if _ours(ours, w) != want:
            bad.append(w)
    return bad


@pytest.mark.parametrize("seed", range(40))
def test_random_codes_segment_as_subword_nmt(seed):
    """A differential test against the library (a one-off run of seeds 0-3,399 on
    2026-11-26 found no difference either)."""
    assert _random_trial(seed) == []
