"""Score a checkpoint and Apertium on the everyday set and the demo test split.

``python -m models.everyday [--checkpoint PT] [--out JSON]`` translates each test set with
the checkpoint (greedy and beam 5, PyTorch reference decoders) and with Apertium, and
reports sacreBLEU BLEU and chrF against the references. On the everyday set the
references are human translations (``models/everyday/README.md``); on the test split they
are Apertium's own output, so there Apertium scores 100 by construction.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import logging
import re
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from models.commands import show_defaults

log = logging.getLogger(__name__)

MODELS_DIR = Path(__file__).resolve().parent
TEST_SETS = {
    "everyday": MODELS_DIR / "everyday" / "everyday",
    "test": MODELS_DIR / "pretrained" / "en-es" / "test",
}
SYSTEMS = ("greedy", "beam5", "apertium")
# Issue 20's targets for a retrained model: share of Apertium's BLEU on the everyday set.
TARGETS = {"beam5": 0.80, "greedy": 0.75}
KEEP_TRANSLATIONS = 500  # store the system outputs of sets up to this size
BATCH = 64
APERTIUM_MARK = re.compile(r"(?<!\S)[*#@]")


def read_set(prefix: Path) -> tuple[list[str], list[str]]:
    src = prefix.with_suffix(".en").read_text(encoding="utf-8").splitlines()
    ref = prefix.with_suffix(".es").read_text(encoding="utf-8").splitlines()
    if len(src) != len(ref):
        raise ValueError(f"{prefix}.en has {len(src)} lines but {prefix}.es has {len(ref)}")
    return src, ref


def score(hyps: Sequence[str], refs: Sequence[str]) -> dict:
    """sacreBLEU corpus BLEU and chrF (default settings, 13a tokenisation), with signatures."""
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(), CHRF()
    return {
        "bleu": round(bleu.corpus_score(list(hyps), [list(refs)]).score, 2),
        "chrf": round(chrf.corpus_score(list(hyps), [list(refs)]).score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def apertium_translate(lines: Sequence[str]) -> list[str]:
    """Apertium eng-spa, without its unknown-word and error marks (scored as text)."""
    from models.corpus import check_apertium, translate

    check_apertium()
    return [APERTIUM_MARK.sub("", t) for t in translate(lines, progress=len(lines) > BATCH)]


def model_translator(checkpoint: Path, beam: int) -> Callable[[Sequence[str]], list[str]]:
    """A function that translates sentences with the checkpoint, showing a progress bar."""
    from tqdm import tqdm

    from models.checkpoint import load_checkpoint
    from models.options import DecodeOptions
    from models.translate import translate_texts

    ckpt = load_checkpoint(checkpoint)
    options = DecodeOptions(beam_size=beam)

    def run(lines: Sequence[str]) -> list[str]:
        out: list[str] = []
        with tqdm(total=len(lines), desc=f"beam {beam}", unit="sent", leave=False) as bar:
            for i in range(0, len(lines), BATCH):
                chunk = lines[i : i + BATCH]
                out += translate_texts(
                    ckpt.model, ckpt.src_tokenizer, ckpt.tgt_tokenizer, chunk, options=options
                )
                bar.update(len(chunk))
        return out

    return run


def evaluate(
    sets: dict[str, Path], systems: dict[str, Callable[[Sequence[str]], list[str]]]
) -> dict[str, dict]:
    """Scores (and, for small sets, outputs) of every system on every set."""
    results: dict[str, dict] = {}
    for name, prefix in sets.items():
        src, ref = read_set(prefix)
        entry: dict = {"sentences": len(src), "source": _shown(prefix.with_suffix(".en"))}
        entry["systems"] = {}
        outputs = {}
        for system, run in systems.items():
            log.info("%s: %s on %d sentences", name, system, len(src))
            start = time.monotonic()
            outputs[system] = run(src)
            seconds = round(time.monotonic() - start, 1)
            entry["systems"][system] = score(outputs[system], ref) | {"seconds": seconds}
            log.info("%s: %s %s", name, system, entry["systems"][system])
        if "apertium" in outputs:
            top = entry["systems"]["apertium"]["bleu"]
            entry["bleu_vs_apertium"] = {
                s: round(v["bleu"] / top, 3) if top else None
                for s, v in entry["systems"].items()
                if s != "apertium"
            }
        if len(src) <= KEEP_TRANSLATIONS:
            entry["translations"] = [
                {"en": s, "ref": r} | {k: v[i] for k, v in outputs.items()}
                for i, (s, r) in enumerate(zip(src, ref, strict=True))
            ]
        results[name] = entry
    return results


def table(results: dict[str, dict]) -> str:
    """A Markdown table of the scores: one row per set and system."""
    rows = ["| set | system | BLEU | chrF | BLEU / Apertium's |", "|---|---|---|---|---|"]
    for name, entry in results.items():
        for system, s in entry["systems"].items():
            ratio = entry.get("bleu_vs_apertium", {}).get(system)
            shown = f"{ratio:.0%}" if ratio is not None else "-"
            rows.append(f"| {name} | {system} | {s['bleu']:.2f} | {s['chrf']:.2f} | {shown} |")
    return "\n".join(rows)


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it."""
    try:
        return str(path.resolve().relative_to(MODELS_DIR.parent))
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", type=Path, default=MODELS_DIR / "pretrained/en-es/model.pt")
    p.add_argument("--sets", default=",".join(TEST_SETS), help="comma-separated, from: "
                   + ", ".join(TEST_SETS))  # fmt: skip
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = show_defaults(p).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    set_names, names = args.sets.split(","), args.systems.split(",")
    unknown = (set(set_names) - set(TEST_SETS)) | (set(names) - set(SYSTEMS))
    if unknown:
        p.error(f"unknown set or system: {', '.join(sorted(unknown))}")
    sets = {n: TEST_SETS[n] for n in set_names}
    import torch

    from models.corpus import package_version

    torch.set_num_threads(args.threads)
    beams = {"greedy": 1, "beam5": 5}
    systems = {
        n: apertium_translate if n == "apertium" else model_translator(args.checkpoint, beams[n])
        for n in names
    }
    results = evaluate(sets, systems)
    record = {
        "command": shlex.join(["python3", "-m", "models.everyday", *argv]),
        "date": datetime.date.today().isoformat(),
        "checkpoint": _shown(args.checkpoint),
        "checkpoint_sha256": hashlib.sha256(args.checkpoint.read_bytes()).hexdigest(),
        "apertium-eng-spa": package_version("apertium-eng-spa"),
        "threads": args.threads,
        "targets_bleu_vs_apertium_everyday": TARGETS,
        "sets": results,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        log.info("wrote %s", args.out)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
