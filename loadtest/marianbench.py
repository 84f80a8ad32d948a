"""Marian's own CPU translator vs this project's decode loop on one Marian s2s model of
Marian's default size, side by side in one run:

    python -m loadtest.marianbench --out loadtest/results/marian-vs-bundle
    python -m loadtest.marianbench --shape wmt17 --out loadtest/results/nematus-vs-bundle

    python -m loadtest.marianbench --members 2 --out loadtest/results/marian-ensemble-vs-bundle
    python -m loadtest.marianbench --score --out loadtest/results/marian-score-vs-bundle

``--score``: Marian's scorer (``marian score``, marian-scorer) against the bundle's
``Score`` path (forced decoding, :func:`score_runs`) instead of translating: the 300
reference pairs ten times over (3,000 pairs), the same flags; Marian's time includes
loading the model once (well under a second of the run).

``--members N``: an ensemble of N such models (trained alike but for their seeds, 1..N),
Marian's (``--models``, weights 1 each) against the bundles composed by ``nmt-convert
ensemble``. ``--shape wmt17``: the Edinburgh WMT17 systems' deep-transition Nematus shape
at the same sizes instead (``--type nematus``, GRUNematus cells, encoder transition depth 4, decoder
base depth 8, Nematus layer normalisation, tied target embeddings; about 20 minutes of
training on 2 cores).

Needs pymarian (``$MARIAN_VENV``, default ``/root/marian-venv``: built by
``tests/fixtures/marian/make_fixture.sh``); not part of CI.

The model is Marian's ``--type s2s`` at its default sizes (``--dim-emb 512 --dim-rnn
1024``: bidirectional GRU encoder, conditional GRU decoder) with a 16k-token vocabulary
a side (the data's words, then fillers), trained by Marian on the 300 pairs for 30 epochs
(about 10 minutes on 2 cores): it has learnt them, so its translations end with EOS as a
real model's do, and the two decode the same translations (counted: Marian batches with
the length limit of the batch's longest source, which a sentence that reaches its own
limit feels), so both do the same work.
Marian translates the 300 sources of ``tests/fixtures/fairseq/data/train.en`` in one call
(``mini_batch`` 32, 2 CPU threads); the bundle decodes them in one call of the engine's
decode loop (:func:`service.loop.decode`, ONNX Runtime with 2 intra-op threads), greedy and
beam 5. Latency: each of the first 40 sources alone, one after another.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from loadtest.outputs import write_result

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "fixtures" / "fairseq" / "data"
VOCAB = 16000
DIMS = {"dim_emb": 512, "dim_rnn": 1024}
# the model's Marian options besides its sizes
SHAPES = {
    "s2s": {"type": "s2s"},
    "wmt17": {"type": "nematus", "enc_cell": "gru-nematus", "dec_cell": "gru-nematus",
              "enc_cell_depth": 4, "dec_cell_base_depth": 8, "layer_normalization": True,
              "tied_embeddings": True},
}  # fmt: skip
THREADS = 2
MINI_BATCH = 32
ALONE = 40
EPOCHS = 30
BEAMS = (1, 5)

# run in pymarian's venv: train for one batch, then time the translator
_MARIAN = r"""
import json, sys, time
from pymarian import Trainer, Translator
job = json.loads(sys.argv[1])
if job["train"]:
    Trainer(model=job["model"], train_sets=job["train"], vocabs=job["vocabs"],
            after_epochs=job["epochs"], mini_batch=16, learn_rate=0.001,
            cpu_threads=job["threads"], seed=job["seed"], quiet=True, **job["dims"],
            **job["shape"]).train()
    sys.exit(0)
if job.get("score"):
    import _pymarian
    out_file = job["score"]["out"]
    start = time.perf_counter()
    code = _pymarian.main(["score", "-m", *job["models"], "-v", *job["vocabs"], "-t",
                           job["score"]["src"], job["score"]["tgt"], "--mini-batch",
                           str(job["mini_batch"]), "--maxi-batch", "100", "--cpu-threads",
                           str(job["threads"]), "--quiet", "-o", out_file])
    seconds = time.perf_counter() - start
    assert code == 0, code
    scores = [float(x) for x in open(out_file).read().split()]
    print(json.dumps({"seconds": seconds, "scores": scores}))
    sys.exit(0)
lines = open(job["sources"], encoding="utf-8").read().splitlines()
out = {}
for beam in job["beams"]:
    t = Translator(models=job["models"], vocabs=job["vocabs"], beam_size=beam,
                   mini_batch=job["mini_batch"], maxi_batch=100, cpu_threads=job["threads"],
                   quiet=True)
    t.translate(lines[:8])  # warm up
    start = time.perf_counter()
    texts = t.translate(lines)
    seconds = time.perf_counter() - start
    one = Translator(models=job["models"], vocabs=job["vocabs"], beam_size=beam, mini_batch=1,
                     maxi_batch=1, cpu_threads=job["threads"], quiet=True)
    alone = []
    for line in lines[: job["alone"]]:
        start = time.perf_counter()
        one.translate(line)
        alone.append(time.perf_counter() - start)
    out[str(beam)] = {"seconds": seconds, "texts": texts, "alone": alone}
print(json.dumps(out))
"""


def _marian(venv: Path, job: dict) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(THREADS))
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _MARIAN, json.dumps(job)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"marianbench: Marian failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}


def _vocabulary(path: Path, words: set[str]) -> None:
    """A Marian .yml vocabulary of VOCAB tokens: the data's words, then fillers."""
    tokens = ["</s>", "<unk>", *sorted(words)]
    tokens += [f"w{i}" for i in range(VOCAB - len(tokens))]
    path.write_text(
        "".join(f"{json.dumps(t, ensure_ascii=False)}: {i}\n" for i, t in enumerate(tokens)),
        encoding="utf-8",
    )


def bundle_runs(bundle_dir: Path, lines: list[str], alone: int = ALONE) -> dict:
    """For each beam of ``BEAMS`` (keys ``"1"``, ``"5"``): seconds for all ``lines`` in one
    call of the decode loop (``THREADS`` ORT threads), per-sentence seconds of the first
    ``alone`` decoded one at a time, the best texts and the best ``(tokens, score)``."""
    from service.bundle import load_bundle
    from service.loop import decode
    from service.sessions import RuntimeConfig

    bundle = load_bundle(bundle_dir, RuntimeConfig(providers=("cpu",), intra_op_threads=THREADS))
    sources = [bundle.src_tokenizer.encode(line) for line in lines]
    out = {}
    for beam in BEAMS:
        options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=1)
        decode(bundle.model, sources[:8], options=options, special=bundle.special)  # warm up
        start = time.perf_counter()
        nbest = decode(bundle.model, sources, options=options, special=bundle.special)
        seconds = time.perf_counter() - start
        times = []
        for source in sources[:alone]:
            start = time.perf_counter()
            decode(bundle.model, [source], options=options, special=bundle.special)
            times.append(time.perf_counter() - start)
        texts = [bundle.tgt_tokenizer.decode(h[0].tokens) for h in nbest]
        best = [(h[0].tokens, h[0].score) for h in nbest]
        out[str(beam)] = {"seconds": seconds, "texts": texts, "alone": times, "best": best}
    return out


def score_runs(bundle_dir: Path, sources: list[str], targets: list[str]) -> dict:
    """Seconds to score all ``(sources[i], targets[i])`` in one call of the decode loop
    (``THREADS`` ORT threads; the ``Score`` RPC's options and forced targets), and each
    pair's log-prob."""
    from nmt_api.nmt.v1 import translator_pb2 as pb
    from service.bundle import load_bundle
    from service.loop import decode
    from service.messages import to_score_options
    from service.sessions import RuntimeConfig

    bundle = load_bundle(bundle_dir, RuntimeConfig(providers=("cpu",), intra_op_threads=THREADS))
    options = to_score_options(pb.ScoreOptions(), max_length=512, defaults=bundle.decoding)
    eos = bundle.special.eos
    ids = [bundle.src_tokenizer.encode(line) for line in sources]
    forced = [(*bundle.tgt_tokenizer.encode(line), eos) for line in targets]
    special = bundle.special
    decode(bundle.model, ids[:8], options=options, special=special, prefixes=forced[:8])
    start = time.perf_counter()
    scored = decode(bundle.model, ids, options=options, special=special, prefixes=forced)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "scores": [h[0].log_prob for h in scored]}


def _score_report(args, marian: dict, ours: dict, pairs: int, tokens: int) -> int:
    """The ``--score`` rows and result files."""
    gaps = np.abs(np.array(marian["scores"]) - np.array(ours["scores"]))
    row = {
        "pairs": pairs,
        "target_tokens": tokens,
        "max_abs_log_prob_gap": float(gaps.max()),
        "mean_abs_log_prob_gap": float(gaps.mean()),
        "marian_pairs_per_s": pairs / marian["seconds"],
        "bundle_pairs_per_s": pairs / ours["seconds"],
        "bundle_over_marian": marian["seconds"] / ours["seconds"],
    }
    meta = {"date": time.strftime("%Y-%m-%d"), "dims": DIMS, "vocab": VOCAB,
            "shape": {"name": args.shape} | SHAPES[args.shape], "threads": THREADS,
            "mini_batch": MINI_BATCH, "cpu": _cpu(),
            "command": "python -m loadtest.marianbench --score"
            + ("" if args.shape == "s2s" else f" --shape {args.shape}")}  # fmt: skip
    text = (
        f"# Marian's scorer vs the bundle's Score path ({meta['date']})\n\n"
        f"`{meta['command']}` on {meta['cpu']}: Marian "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in SHAPES[args.shape].items())
        + f", dim-emb 512, dim-rnn 1024, {VOCAB} tokens a side, {EPOCHS} epochs on the 300 "
        f"pairs; scoring those 300 pairs ten times over, {THREADS} threads each; Marian "
        f"`marian score --mini-batch {MINI_BATCH}` (its time includes loading the model), "
        "the bundle one call of `service.loop.decode` with the Score RPC's forced targets."
        "\n\n| pairs | target tokens | max / mean abs log-prob gap | Marian pairs/s | "
        "bundle pairs/s | bundle / Marian |\n|---|---|---|---|---|---|\n"
        f"| {pairs} | {tokens} | {row['max_abs_log_prob_gap']:.2e} / "
        f"{row['mean_abs_log_prob_gap']:.2e} | {row['marian_pairs_per_s']:.1f} | "
        f"{row['bundle_pairs_per_s']:.1f} | {row['bundle_over_marian']:.2f}x |\n"
    )
    write_result(args.out, {"meta": meta, "rows": [row]}, text)
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="marianbench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="result files' stem")
    parser.add_argument(
        "--shape", choices=sorted(SHAPES), default="s2s", help="the model's shape (s2s)"
    )
    parser.add_argument(
        "--members", type=int, default=1, help="models in the ensemble (1: one model)"
    )
    parser.add_argument(
        "--score", action="store_true", help="Marian's scorer vs the Score path (one model)"
    )
    parser.add_argument(
        "--marian-venv", type=Path, default=Path(os.environ.get("MARIAN_VENV", "/root/marian-venv"))
    )
    args = parser.parse_args(argv)
    if args.members < 1:
        parser.error(f"--members must be >= 1, got {args.members}")
    if args.score and args.members != 1:
        parser.error("--score scores with one model: leave --members at 1")
    if not (args.marian_venv / "bin" / "python").exists():
        print(f"marianbench: no pymarian venv at {args.marian_venv}", file=sys.stderr)
        return 2
    # everything the run imports, imported now: a tree edited while models train (tens of
    # minutes) must not give the run half old, half new modules
    import export.ensemble_gate  # noqa: F401
    import export.ensemble_graphs  # noqa: F401
    import service.messages  # noqa: F401
    from export.convert import main as convert

    lines = (DATA / "train.en").read_text(encoding="utf-8").splitlines()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        vocabs = [work / "vocab.en.yml", work / "vocab.es.yml"]
        for path, side in zip(vocabs, ("en", "es"), strict=True):
            text = (DATA / f"train.{side}").read_text(encoding="utf-8")
            _vocabulary(path, set(text.split()))
        job = {"vocabs": [str(v) for v in vocabs],
               "train": [str(DATA / "train.en"), str(DATA / "train.es")], "dims": DIMS,
               "threads": THREADS, "epochs": EPOCHS,
               "shape": SHAPES[args.shape]}  # fmt: skip
        flags = ["--parity-src", str(DATA / "train.en"), "--parity-limit", "20",
                 "--beam-sentences", "2"]  # fmt: skip
        models, bundles = [], []
        for seed in range(1, args.members + 1):
            models.append(str(work / f"model{seed}.npz"))
            _marian(args.marian_venv, job | {"model": models[-1], "seed": seed})
            bundles.append(work / f"bundle{seed}" / "1")
            if convert(["marian", models[-1], "--out", str(bundles[-1]), *flags]) != 0:
                return 1
        bundle_dir = bundles[0]
        if args.members > 1:
            bundle_dir = work / "ensemble" / "1"
            if convert(["ensemble", *map(str, bundles), "--out", str(bundle_dir), *flags]) != 0:
                return 1
        job |= {"train": None, "models": models, "sources": str(DATA / "train.en"),
                "beams": list(BEAMS), "mini_batch": MINI_BATCH, "alone": ALONE}  # fmt: skip
        if args.score:
            targets = (DATA / "train.es").read_text(encoding="utf-8").splitlines()
            src, tgt = lines * 10, targets * 10
            for path, text in ((work / "score.en", src), (work / "score.es", tgt)):
                path.write_text("".join(t + "\n" for t in text), encoding="utf-8")
            job["score"] = {"src": str(work / "score.en"), "tgt": str(work / "score.es"),
                            "out": str(work / "scores.txt")}  # fmt: skip
            marian = _marian(args.marian_venv, job)
            ours = score_runs(bundle_dir, src, tgt)
            tokens = sum(len(t.split()) + 1 for t in tgt)
            return _score_report(args, marian, ours, len(src), tokens)
        marian = _marian(args.marian_venv, job)
        ours = bundle_runs(bundle_dir, lines)
    rows = []
    for beam in BEAMS:
        m, o = marian[str(beam)], ours[str(beam)]
        rows.append({
            "beam": beam,
            "sentences": len(lines),
            "same_translations": sum(a == b for a, b in zip(m["texts"], o["texts"], strict=True)),
            "marian_sentences_per_s": len(lines) / m["seconds"],
            "bundle_sentences_per_s": len(lines) / o["seconds"],
            "bundle_over_marian": m["seconds"] / o["seconds"],
            "marian_alone_p50_ms": 1000 * float(np.median(m["alone"])),
            "bundle_alone_p50_ms": 1000 * float(np.median(o["alone"])),
            "marian_target_tokens": sum(len(t.split()) + 1 for t in m["texts"]),
            "bundle_target_tokens": sum(len(t.split()) + 1 for t in o["texts"]),
        })  # fmt: skip
    meta = {"date": time.strftime("%Y-%m-%d"), "dims": DIMS, "vocab": VOCAB,
            "members": args.members,
            "shape": {"name": args.shape} | SHAPES[args.shape],
            "threads": THREADS, "mini_batch": MINI_BATCH, "cpu": _cpu(),
            "command": "python -m loadtest.marianbench"
            + ("" if args.shape == "s2s" else f" --shape {args.shape}")
            + ("" if args.members == 1 else f" --members {args.members}")}  # fmt: skip
    table = [
        "| beam | same translations | target tokens Marian / bundle | Marian sent/s | "
        "bundle sent/s | bundle / Marian | Marian alone p50 ms | bundle alone p50 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        table.append(
            f"| {r['beam']} | {r['same_translations']}/{r['sentences']} | "
            f"{r['marian_target_tokens']} / {r['bundle_target_tokens']} | "
            f"{r['marian_sentences_per_s']:.1f} | {r['bundle_sentences_per_s']:.1f} | "
            f"{r['bundle_over_marian']:.2f}x | {r['marian_alone_p50_ms']:.1f} | "
            f"{r['bundle_alone_p50_ms']:.1f} |"
        )
    what = "" if args.members == 1 else (
        f"an ensemble of {args.members} models (seeds 1..{args.members}; Marian --models, "
        "weights 1 each; the bundle nmt-convert ensemble), each "
    )  # fmt: skip
    text = (
        f"# Marian's translator vs the bundle's decode loop ({meta['date']})\n\n"
        f"`{meta['command']}` on {meta['cpu']}: {what}Marian "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in SHAPES[args.shape].items())
        + ", dim-emb 512, dim-rnn 1024, "
        f"{VOCAB} tokens a side, {EPOCHS} epochs on the 300 pairs, their 300 sources, "
        f"{THREADS} threads each; Marian mini-batch "
        f"{MINI_BATCH}, the bundle one call of `service.loop.decode`.\n\n" + "\n".join(table) + "\n"
    )
    write_result(args.out, {"meta": meta, "rows": rows}, text)
    print(text)
    return 0


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{os.cpu_count()} x {line.split(':', 1)[1].strip()}"
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs"


if __name__ == "__main__":
    sys.exit(main())
