"""``nmt-data``: build the English->Spanish demo corpus from Debian packages.

English side: sentences from Debian packages (:mod:`models.sources`): WordNet glosses
and examples (``wordnet-base``), fortune cookies (``fortunes-min``, ``fortunes``) and
the Ding dictionary's example sentences (``trans-de-en``). Spanish side: the Apertium
rule-based engine (``apertium`` + ``apertium-eng-spa``). Both are deterministic, so the
corpus is reproducible on any Debian machine offline. No sentence of a test set (the
everyday set, the demo model's test split) enters any split; ``manifest.json`` records
each source's package, licence and sentence counts.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from models.commands import show_defaults
from models.sources import (  # noqa: F401 (re-exported: the corpus API before models.sources)
    DEFAULT_SOURCES,
    SOURCES,
    WORDNET_DIR,
    WORDNET_FILES,
    normalize,
    sentence_case,
    split_gloss,
    wordnet_sentences,
)

APERTIUM_MODE = "eng-spa"
INSTALL_HINT = "apt-get install -y apertium apertium-eng-spa wordnet-base"
# Apertium marks unknown words (*), generation errors (#) and transfer errors (@).
UNKNOWN_MARKS = re.compile(r"[*#@]")
SPLIT_SEED = 20241122
CHUNK_LINES = 1000
MODELS_DIR = Path(__file__).resolve().parent
# Test sets no split may contain (matched by exclusion_key).
DEFAULT_EXCLUDES = (
    MODELS_DIR / "everyday" / "everyday.en",
    MODELS_DIR / "pretrained" / "en-es" / "test.en",
)


class CorpusError(RuntimeError):
    """The corpus cannot be built here; the message says what to install or fix."""


def check_sources(names: Sequence[str], paths: dict[str, Path]) -> None:
    """Every selected source's data is there, or a message says what to install."""
    for name in names:
        source = SOURCES[name]
        path = paths.get(name, source.path)
        missing = source.missing(path)
        if not missing:
            continue
        if name == "wordnet":
            raise CorpusError(
                f"WordNet data not found in {path} (missing {', '.join(missing)}); "
                f"run: {INSTALL_HINT}, or pass --wordnet-dir"
            )
        raise CorpusError(
            f"source {name} not found in {path} (missing {', '.join(missing)}); run: "
            f"apt-get install -y --no-install-recommends {source.package}, pass "
            f"--source-dir {name}=PATH, or leave {name} out of --sources"
        )


def check_apertium() -> None:
    if shutil.which("apertium") is None:
        raise CorpusError(f"apertium is not installed; run: {INSTALL_HINT}")
    modes = subprocess.run(["apertium", "-l"], capture_output=True, text=True).stdout.split()
    if APERTIUM_MODE not in modes:
        raise CorpusError(f"Apertium mode {APERTIUM_MODE} not installed; run: {INSTALL_HINT}")


def check_tools(wordnet_dir: Path = WORDNET_DIR) -> None:
    """WordNet and Apertium are installed (the original WordNet-only corpus)."""
    check_sources(["wordnet"], {"wordnet": wordnet_dir})
    check_apertium()


def exclusion_key(text: str) -> str:
    """What two sentences share when they are "the same" for test-set exclusion and
    deduplication: lower case, punctuation turned into spaces, spaces collapsed."""
    text = text.lower().replace("\u2019", "'")
    return " ".join(re.sub(r"[^\w\s]|_", " ", text).split())


def read_excludes(files: Sequence[Path]) -> tuple[set[str], list[dict]]:
    """Keys of every sentence of the test sets, and a record of each file for the manifest."""
    keys: set[str] = set()
    record = []
    for path in files:
        if not path.is_file():
            raise CorpusError(f"test set {path} not found; pass --exclude with the test sets")
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        keys.update(exclusion_key(line) for line in lines)
        record.append({"file": str(path), "sentences": len(lines)})
    return keys, record


def collect(
    names: Sequence[str],
    paths: dict[str, Path],
    *,
    exclude: set[str],
    limit: int | None = None,
) -> tuple[list[str], list[str], dict[str, dict]]:
    """English sentences of the sources in order, each with the source it came from.

    A sentence whose :func:`exclusion_key` is a test sentence's is dropped, and so is one
    that an earlier sentence (of this or an earlier source) already has. ``limit``: at
    most the first N sentences of each source.
    """
    english: list[str] = []
    origin: list[str] = []
    seen: set[str] = set()
    stats: dict[str, dict] = {}
    for name in names:
        source = SOURCES[name]
        candidates = list(dict.fromkeys(source.read(paths.get(name, source.path))))
        if limit:
            candidates = candidates[:limit]
        count = {"candidates": len(candidates), "excluded": 0, "duplicates": 0, "sentences": 0}
        for sentence in candidates:
            key = exclusion_key(sentence)
            if key in exclude:
                count["excluded"] += 1
            elif key in seen:
                count["duplicates"] += 1
            else:
                seen.add(key)
                english.append(sentence)
                origin.append(name)
                count["sentences"] += 1
        stats[name] = count
    return english, origin, stats


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


def package_version(package: str) -> str | None:
    """The installed version of a Debian package, or None (not installed, no dpkg)."""
    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def manifest(
    *,
    names: Sequence[str],
    paths: dict[str, Path],
    counts: dict[str, dict],
    excludes: list[dict],
    command: str,
    oversample: dict[str, int] | None = None,
) -> dict:
    """What the corpus is made of, for the model card: per source its Debian package,
    version, licence and sentence counts (candidates, test-set matches dropped,
    duplicates of earlier sentences dropped, sent to Apertium, kept, per split)."""
    sources = {}
    for name in names:
        source = SOURCES[name]
        sources[name] = {
            "description": source.description,
            "package": source.package,
            "version": package_version(source.package),
            "licence": source.licence,
            "copyright": source.copyright,
            "path": str(paths.get(name, source.path)),
        } | counts[name]
    return {
        "command": command,
        "date": datetime.date.today().isoformat(),
        "apertium": {
            "mode": APERTIUM_MODE,
            "apertium-eng-spa": package_version("apertium-eng-spa"),
            "licence": "GPL-2+ (apertium-eng-spa)",
        },
        "excluded_test_sets": excludes,
        "oversample": dict(oversample or {}),
        "sources": sources,
        "totals": {k: sum(c[k] for c in counts.values()) for k in next(iter(counts.values()))},
    }


def build(
    out: Path,
    *,
    valid: int,
    test: int,
    vocab_size: int,
    limit: int | None,
    wordnet_dir: Path = WORDNET_DIR,
    sources: Sequence[str] = DEFAULT_SOURCES,
    source_dirs: dict[str, Path] | None = None,
    excludes: Sequence[Path] = DEFAULT_EXCLUDES,
    oversample: dict[str, int] | None = None,
    command: str = "nmt-data build",
) -> dict:
    """Build the corpus into ``out``: split files, SentencePiece models, manifest.json.

    ``oversample`` maps a source to how many times its training pairs appear in
    ``train.*`` (valid and test are never repeated); ``SPLIT.origin`` names each line's
    source, which ``nmt-train --select-on`` reads.
    """
    oversample = oversample or {}
    unknown = sorted(set(oversample) - set(sources))
    if unknown:
        raise CorpusError(f"--oversample names {', '.join(unknown)}, not among --sources")
    paths = {"wordnet": wordnet_dir} | (source_dirs or {})
    check_sources(sources, paths)
    check_apertium()
    exclude, exclude_record = read_excludes(excludes)
    english, origin, counts = collect(sources, paths, exclude=exclude, limit=limit)
    spanish = translate(english)
    pairs = clean_pairs(english, spanish)
    splits = split_pairs(pairs, valid=valid, test=test)
    source_of = {normalize(en): name for en, name in zip(english, origin, strict=True)}
    for name in sources:
        counts[name] |= {"kept": 0, "train": 0, "valid": 0, "test": 0}
    for split, rows in splits.items():
        for en, _ in rows:
            counts[source_of[en]][split] += 1
            counts[source_of[en]]["kept"] += 1
    # Repeated pairs go after the originals; nmt-train shuffles batches every epoch.
    splits["train"] = splits["train"] + [
        row for row in splits["train"] for _ in range(oversample.get(source_of[row[0]], 1) - 1)
    ]
    for name in sources:
        counts[name]["train_lines"] = counts[name]["train"] * oversample.get(name, 1)
    write_split(out, splits)
    for split, rows in splits.items():
        (out / f"{split}.origin").write_text(
            "".join(source_of[en] + "\n" for en, _ in rows), encoding="utf-8"
        )
    train_tokenizers(out, vocab_size=vocab_size)
    record = manifest(
        names=sources,
        paths=paths,
        counts=counts,
        excludes=exclude_record,
        command=command,
        oversample=oversample,
    )
    (out / "manifest.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return {
        "english": len(english),
        "excluded": record["totals"]["excluded"],
        "kept": len(pairs),
    } | {k: len(v) for k, v in splits.items()}


def _source_list(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in SOURCES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown source {', '.join(unknown) or '(none)'}; choose from {', '.join(SOURCES)}"
        )
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a source is named twice in {text!r}")
    return names


def _source_dir(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or name not in SOURCES or not path:
        raise argparse.ArgumentTypeError(
            f"expected NAME=PATH with NAME one of {', '.join(SOURCES)}, got {text!r}"
        )
    return name, Path(path)


def _oversample(text: str) -> dict[str, int]:
    weights: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, times = item.partition("=")
        if not sep or name not in SOURCES or not times.isdigit() or int(times) < 1:
            raise argparse.ArgumentTypeError(
                f"expected NAME=TIMES,... with NAME one of {', '.join(SOURCES)} and TIMES a "
                f"whole number >= 1, got {item!r}"
            )
        weights[name] = int(times)
    return weights


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="nmt-data", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the Apertium-translated corpus and tokenizers")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--valid", type=int, default=2000)
    b.add_argument("--test", type=int, default=2000)
    b.add_argument("--vocab-size", type=int, default=4000)
    b.add_argument(
        "--limit", type=int, default=None, help="only the first N English sentences of each source"
    )
    b.add_argument(
        "--sources",
        type=_source_list,
        default=DEFAULT_SOURCES,
        metavar="NAME,...",
        help=f"English sources, in order of precedence, from: {', '.join(SOURCES)}",
    )
    b.add_argument(
        "--wordnet-dir",
        type=Path,
        default=WORDNET_DIR,
        metavar="DIR",
        help=f"directory with WordNet's {', '.join(WORDNET_FILES)} (default: {WORDNET_DIR})",
    )
    b.add_argument(
        "--source-dir",
        type=_source_dir,
        action="append",
        metavar="NAME=PATH",
        help="read a source from PATH instead of its Debian location (repeatable)",
    )
    b.add_argument(
        "--exclude",
        type=Path,
        nargs="+",
        default=list(DEFAULT_EXCLUDES),
        metavar="FILE",
        help="test sets (one English sentence a line) kept out of every split "
        "(default: the everyday set and the demo model's test split)",
    )
    b.add_argument(
        "--oversample",
        type=_oversample,
        default={},
        metavar="NAME=TIMES,...",
        help="repeat a source's training pairs TIMES times in train.* (e.g. ding=3)",
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
                sources=args.sources,
                source_dirs=dict(args.source_dir or []),
                excludes=args.exclude,
                oversample=args.oversample,
                command=shlex.join(["nmt-data", *argv]),
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
