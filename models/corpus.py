"""``nmt-data``: build the English->Spanish demo corpus from Debian packages.

English side: WordNet glosses and example sentences (``wordnet-base``). Spanish
side: the Apertium rule-based engine (``apertium`` + ``apertium-eng-spa``). Both
are deterministic, so the corpus is reproducible on any Debian machine offline.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from models.commands import show_defaults

WORDNET_DIR = Path("/usr/share/wordnet")
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
APERTIUM_MODE = "eng-spa"
INSTALL_HINT = "apt-get install -y apertium apertium-eng-spa wordnet-base"
# Apertium marks unknown words (*), generation errors (#) and transfer errors (@).
UNKNOWN_MARKS = re.compile(r"[*#@]")
SPLIT_SEED = 20241122
CHUNK_LINES = 1000


class CorpusError(RuntimeError):
    """The corpus cannot be built here; the message says what to install or fix."""


def check_tools(wordnet_dir: Path = WORDNET_DIR) -> None:
    missing = [f for f in WORDNET_FILES if not (wordnet_dir / f).is_file()]
    if missing:
        raise CorpusError(
            f"WordNet data not found in {wordnet_dir} (missing {', '.join(missing)}); "
            f"run: {INSTALL_HINT}, or pass --wordnet-dir"
        )
    if shutil.which("apertium") is None:
        raise CorpusError(f"apertium is not installed; run: {INSTALL_HINT}")
    modes = subprocess.run(["apertium", "-l"], capture_output=True, text=True).stdout.split()
    if APERTIUM_MODE not in modes:
        raise CorpusError(f"Apertium mode {APERTIUM_MODE} not installed; run: {INSTALL_HINT}")


def normalize(text: str) -> str:
    return " ".join(text.split())


def sentence_case(text: str) -> str:
    """Capitalise the first letter: Apertium capitalises every output line it sees as a
    sentence start, so doing the same on the source keeps the mapping consistent."""
    return text[:1].upper() + text[1:]


def split_gloss(gloss: str) -> Iterator[str]:
    """Definitions and quoted examples of one WordNet gloss, cleaned."""
    for part in re.split(r';(?=(?:[^"]*"[^"]*")*[^"]*$)', gloss):
        part = normalize(part.strip().strip('"').strip())
        if part:
            yield part


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


def _apertium(lines: Sequence[str]) -> list[str]:
    """Translate lines, one output line per input line.

    A blank line between inputs makes Apertium treat each as its own paragraph, so its
    transfer rules never join words across two inputs.
    """
    text = "\n\n".join(line.replace("\n", " ") for line in lines) + "\n"
    out = subprocess.run(
        ["apertium", APERTIUM_MODE], input=text, capture_output=True, text=True, check=True
    ).stdout
    result = [normalize(x) for x in out.split("\n\n")]
    if result and not result[-1]:
        result.pop()
    if len(result) != len(lines):
        if len(lines) == 1:
            return [""]
        half = len(lines) // 2
        return _apertium(lines[:half]) + _apertium(lines[half:])
    return result


def translate(lines: Sequence[str], *, workers: int = 2, progress: bool = True) -> list[str]:
    """Translate with Apertium in parallel chunks, with a progress bar."""
    from tqdm import tqdm

    chunks = [lines[i : i + CHUNK_LINES] for i in range(0, len(lines), CHUNK_LINES)]
    out: list[str] = []
    with (
        ThreadPoolExecutor(max_workers=workers) as pool,
        tqdm(total=len(lines), desc="apertium eng-spa", unit="sent", disable=not progress) as bar,
    ):
        for translated in pool.map(_apertium, chunks):
            out.extend(translated)
            bar.update(len(translated))
    return out


def clean_pairs(src: Iterable[str], tgt: Iterable[str]) -> list[tuple[str, str]]:
    """Drop pairs with Apertium's unknown-word marks or empty sides; dedupe by source."""
    pairs: dict[str, str] = {}
    for s, t in zip(src, tgt, strict=True):
        s, t = normalize(s), normalize(t)
        if s and t and not UNKNOWN_MARKS.search(t) and not UNKNOWN_MARKS.search(s):
            pairs.setdefault(s, t)
    return list(pairs.items())


def split_pairs(
    pairs: Sequence[tuple[str, str]], *, valid: int = 2000, test: int = 2000, seed: int = SPLIT_SEED
) -> dict[str, list[tuple[str, str]]]:
    """Deterministic split: sort, shuffle with a fixed seed, cut test, valid, train."""
    if len(pairs) <= valid + test:
        raise CorpusError(f"only {len(pairs)} pairs; need more than valid + test = {valid + test}")
    ordered = sorted(pairs)
    random.Random(seed).shuffle(ordered)
    return {
        "test": ordered[:test],
        "valid": ordered[test : test + valid],
        "train": ordered[test + valid :],
    }


def write_split(out: Path, splits: dict[str, list[tuple[str, str]]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        for side, idx in (("en", 0), ("es", 1)):
            (out / f"{name}.{side}").write_text(
                "".join(row[idx] + "\n" for row in rows), encoding="utf-8"
            )


def train_tokenizers(data: Path, *, vocab_size: int, model_type: str = "unigram") -> None:
    """Train one SentencePiece model per side on the training split."""
    from models.tokenizer import read_lines, train_sentencepiece

    for side in ("en", "es"):
        try:
            train_sentencepiece(
                read_lines(data / f"train.{side}"),
                data / f"spm.{side}",
                vocab_size=vocab_size,
                model_type=model_type,
            )
        except RuntimeError as exc:  # e.g. "Vocabulary size too high" on a small corpus
            reason = normalize(str(exc))
            raise CorpusError(
                f"SentencePiece training on {data / f'train.{side}'} failed with "
                f"--vocab-size {vocab_size}: {reason}"
            ) from None


def build(
    out: Path,
    *,
    valid: int,
    test: int,
    vocab_size: int,
    limit: int | None,
    wordnet_dir: Path = WORDNET_DIR,
) -> dict:
    check_tools(wordnet_dir)
    english = wordnet_sentences(wordnet_dir)
    if limit:
        english = english[:limit]
    spanish = translate(english)
    pairs = clean_pairs(english, spanish)
    splits = split_pairs(pairs, valid=valid, test=test)
    write_split(out, splits)
    train_tokenizers(out, vocab_size=vocab_size)
    return {"english": len(english), "kept": len(pairs)} | {k: len(v) for k, v in splits.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nmt-data", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the WordNet+Apertium corpus and tokenizers")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--valid", type=int, default=2000)
    b.add_argument("--test", type=int, default=2000)
    b.add_argument("--vocab-size", type=int, default=4000)
    b.add_argument("--limit", type=int, default=None, help="only the first N English sentences")
    b.add_argument(
        "--wordnet-dir",
        type=Path,
        default=WORDNET_DIR,
        metavar="DIR",
        help=f"directory with WordNet's {', '.join(WORDNET_FILES)} (default: {WORDNET_DIR})",
    )
    s = sub.add_parser("spm", help="(re)train the SentencePiece models of a corpus")
    s.add_argument("--data", type=Path, required=True)
    s.add_argument("--vocab-size", type=int, default=4000)
    s.add_argument("--model-type", choices=("unigram", "bpe"), default="unigram")
    args = show_defaults(parser).parse_args(argv)
    try:
        if args.command == "build":
            stats = build(
                args.out,
                valid=args.valid,
                test=args.test,
                vocab_size=args.vocab_size,
                limit=args.limit,
                wordnet_dir=args.wordnet_dir,
            )
            print(" ".join(f"{k}={v}" for k, v in stats.items()))
        else:
            if not (args.data / "train.en").is_file():
                raise CorpusError(f"{args.data}/train.en not found; run `nmt-data build` first")
            train_tokenizers(args.data, vocab_size=args.vocab_size, model_type=args.model_type)
    except CorpusError as exc:
        print(f"nmt-data: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
