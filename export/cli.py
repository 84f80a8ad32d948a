"""``nmt-export CHECKPOINT --out model_repository/<name>/<version>``.

Writes a self-contained bundle (encoder.onnx, decoder.onnx, tokenizers,
manifest.json) that the service loads without torch. The bundle is built in a
temporary directory and moved into place only after the parity gate passed, so a
failed export writes nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from export import spec
from export.parity import ParityError, run_gate
from export.variants import VariantError
from models.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from models.tokenizer import TokenizerError, read_lines

MAX_SOURCE_TOKENS = 128


class ExportError(RuntimeError):
    """An export that cannot proceed; the message says how to fix it."""


def _graph_io(path: Path) -> dict:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph

    def describe(values) -> list[dict]:
        out = []
        for v in values:
            t = v.type.tensor_type
            dims = [d.dim_param or d.dim_value for d in t.shape.dim]
            out.append(
                {
                    "name": v.name,
                    "dtype": onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name,
                    "shape": dims,
                }
            )
        return out

    return {"inputs": describe(graph.input), "outputs": describe(graph.output)}


def _versions() -> dict:
    import onnx
    import onnxruntime
    import torch

    return {
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
        "exporter": "rnn-nmt-serving export/1",
    }


def parity_sources(
    ckpt: Checkpoint, path: Path | None, checkpoint_path: Path, limit: int | None, seed: int = 0
) -> tuple[list[list[int]], str]:
    """Token ids the gate decodes: the given file, else ``test.en`` beside the checkpoint,
    else random token sequences (a tiny test model has no data)."""
    if path is None and (checkpoint_path.parent / "test.en").is_file():
        path = checkpoint_path.parent / "test.en"
    if path is not None:
        if not path.is_file():
            raise ExportError(f"parity source file not found: {path}")
        lines = [line for line in read_lines(path) if line.strip()]
        lines = lines[:limit] if limit else lines
        return ckpt.src_tokenizer.encode_batch(lines), str(path)
    rng = np.random.default_rng(seed)
    vocab = ckpt.config.src_vocab_size
    n = limit or 50
    return [list(rng.integers(4, vocab, rng.integers(1, 16))) for _ in range(n)], "random"


def _references(source_name: str, parity_ref: Path | None) -> list[str]:
    """Reference translations for a variant's BLEU gate: ``--parity-ref`` or the
    parity source file with its ``.en`` suffix replaced by ``.es``."""
    path = parity_ref
    if path is None and source_name.endswith(".en"):
        path = Path(source_name[:-3] + ".es")
    if path is None or not path.is_file():
        raise ExportError(
            "a reduced-precision variant needs reference translations for its BLEU gate; "
            "pass --parity-src FILE.en with FILE.es beside it, or --parity-ref"
        )
    return read_lines(path)


def export_bundle(
    checkpoint_path: Path,
    out: Path,
    *,
    force: bool = False,
    parity_src: Path | None = None,
    parity_limit: int | None = None,
    beam_sentences: int = 200,
    name: str | None = None,
    precision: str = "fp32",
    parity_ref: Path | None = None,
    max_bleu_drop: float = 1.0,
) -> dict:
    """Export, run the gate, write the manifest; returns the manifest.

    ``precision="int8"`` or ``"fp16"`` exports and gates fp32 graphs first, then writes
    their dynamic int8 quantization (CPU) or fp16 conversion (GPU), gated on BLEU against
    the fp32 graphs (side by side).
    """
    from export.graphs import export_graphs
    from service.bundle import sha256_file
    from service.runtime import OnnxModel, RuntimeConfig

    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise ExportError(f"{out} exists and is not empty; pass --force to replace it")
    ckpt = load_checkpoint(checkpoint_path)
    sources, source_name = parity_sources(ckpt, parity_src, checkpoint_path, parity_limit)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=out.parent))
    try:
        started = time.monotonic()
        export_graphs(ckpt.model, tmp)
        ckpt.src_tokenizer.save(tmp / spec.SRC_SPM_FILE)
        ckpt.tgt_tokenizer.save(tmp / spec.TGT_SPM_FILE)
        cfg = ckpt.config
        onnx_model = OnnxModel(tmp, cfg.state_names, RuntimeConfig(providers=("cpu",)))
        report = run_gate(
            ckpt.model,
            onnx_model,
            sources,
            beam_sentences=beam_sentences,
            max_len=MAX_SOURCE_TOKENS,
        )
        variant = None
        if precision != "fp32":
            variant, tmp = _make_variant(
                tmp,
                out,
                ckpt,
                precision,
                sources,
                source_name,
                parity_ref,
                parity_limit,
                force,
                max_bleu_drop,
            )
        files = [spec.ENCODER_FILE, spec.DECODER_FILE, spec.SRC_SPM_FILE, spec.TGT_SPM_FILE]
        manifest = {
            "format": spec.BUNDLE_FORMAT,
            "name": name or out.parent.name,
            "version": out.name,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "precision": precision,
            "model_config": cfg.to_dict(),
            "parameters": ckpt.model.parameter_count(),
            "src_vocab_size": cfg.src_vocab_size,
            "tgt_vocab_size": cfg.tgt_vocab_size,
            "special_ids": {
                "pad": cfg.pad_id,
                "unk": cfg.unk_id,
                "bos": cfg.bos_id,
                "eos": cfg.eos_id,
            },
            "max_source_tokens": MAX_SOURCE_TOKENS,
            "opset": spec.OPSET,
            "state_names": list(cfg.state_names),
            "graphs": {
                "encoder": _graph_io(tmp / spec.ENCODER_FILE),
                "decoder": _graph_io(tmp / spec.DECODER_FILE),
            },
            "versions": _versions(),
            "checkpoint": {
                "file": checkpoint_path.name,
                "sha256": sha256_file(checkpoint_path),
                "meta": {k: v for k, v in ckpt.meta.items() if k != "history"},
            },
            "parity": report.to_dict() | {"source": source_name},
            "variant": variant.to_dict() if variant else None,
            "export_seconds": round(time.monotonic() - started, 1),
            "files": {f: sha256_file(tmp / f) for f in files},
        }
        (tmp / spec.MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        if out.is_dir():
            shutil.rmtree(out)
        elif out.exists():
            out.unlink()  # --force over a plain file
        tmp.rename(out)
        return manifest
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _make_variant(
    fp32_dir: Path,
    out: Path,
    ckpt: Checkpoint,
    precision: str,
    sources: list[list[int]],
    source_name: str,
    parity_ref: Path | None,
    limit: int | None,
    force: bool,
    max_bleu_drop: float,
):
    """Write the ``precision`` variant of ``fp32_dir`` into a new temp dir and gate it;
    returns (report, new dir)."""
    from export.variants import VARIANTS, VariantError, compare
    from service.decoding import SpecialIds

    if precision not in VARIANTS:
        raise ExportError(
            f"unknown precision {precision!r}; supported: fp32, {', '.join(VARIANTS)}"
        )
    write_variant = VARIANTS[precision][0]
    references = _references(source_name, parity_ref)
    references = references[:limit] if limit else references
    if len(references) != len(sources):
        raise ExportError(f"{len(references)} references for {len(sources)} parity sentences")
    dst = Path(tempfile.mkdtemp(prefix=".export-", dir=out.parent))
    try:
        write_variant(fp32_dir, dst)
        for f in (spec.SRC_SPM_FILE, spec.TGT_SPM_FILE):
            shutil.copy(fp32_dir / f, dst / f)
        cfg = ckpt.config
        report = compare(
            fp32_dir,
            dst,
            precision=precision,
            state_names=cfg.state_names,
            special=SpecialIds(cfg.pad_id, cfg.bos_id, cfg.eos_id),
            sources=sources,
            references=references,
            detok=ckpt.tgt_tokenizer.decode,
        )
    except BaseException:
        shutil.rmtree(dst, ignore_errors=True)
        raise
    shutil.rmtree(fp32_dir, ignore_errors=True)
    if -report.bleu_delta > max_bleu_drop and not force:
        shutil.rmtree(dst, ignore_errors=True)
        raise VariantError(
            f"{precision} BLEU {report.bleu_variant} vs fp32 {report.bleu_fp32} drops by more "
            f"than {max_bleu_drop}; pass --force to write it anyway"
        )
    return report, dst


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nmt-export", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument(
        "--out", type=Path, required=True, help="bundle directory, e.g. model_repository/en-es/1"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a non-empty --out; also writes a variant that loses more than 1.0 BLEU",
    )
    parser.add_argument(
        "--parity-src",
        type=Path,
        default=None,
        help="source sentences for the gate (default: test.en beside the "
        "checkpoint, else random token sequences)",
    )
    parser.add_argument(
        "--parity-limit",
        type=int,
        default=None,
        help="use only the first N parity sentences for greedy",
    )
    parser.add_argument("--beam-sentences", type=int, default=200)
    parser.add_argument("--name", default=None, help="model name (default: parent dir of --out)")
    precision = parser.add_mutually_exclusive_group()
    precision.add_argument(
        "--int8",
        action="store_true",
        help="write a dynamic-int8 (CPU) variant, gated on BLEU vs fp32",
    )
    precision.add_argument(
        "--fp16",
        action="store_true",
        help="write an fp16 (GPU) variant, gated on BLEU vs fp32 (measured on CUDA when "
        "present, else on the CPU; the manifest names the provider)",
    )
    parser.add_argument(
        "--parity-ref",
        type=Path,
        default=None,
        help="references for a variant's BLEU gate (default: the .es twin of the parity source)",
    )
    args = parser.parse_args(argv)
    try:
        manifest = export_bundle(
            args.checkpoint,
            args.out,
            force=args.force,
            parity_src=args.parity_src,
            parity_limit=args.parity_limit,
            beam_sentences=args.beam_sentences,
            name=args.name,
            precision="int8" if args.int8 else "fp16" if args.fp16 else "fp32",
            parity_ref=args.parity_ref,
        )
    except (ExportError, CheckpointError, TokenizerError) as exc:
        print(f"nmt-export: error: {exc}", file=sys.stderr)
        return 2
    except (ParityError, VariantError) as exc:
        print(f"nmt-export: gate failed, nothing written: {exc}", file=sys.stderr)
        return 1
    if manifest["variant"]:
        v = manifest["variant"]
        print(
            f"{v['precision']}: BLEU {v['bleu_variant']} vs fp32 {v['bleu_fp32']} "
            f"({v['bleu_delta']:+.2f}), {v['speedup']:.2f}x the fp32 speed on {v['provider']}"
        )
    p = manifest["parity"]
    print(
        f"wrote {args.out}: greedy identical on {p['greedy_sentences']} sentences, "
        f"beam {p['beam_size']} identical on {p['beam_sentences']}, max |dlogp| "
        f"{p['max_log_prob_diff']:.1e}, max |dattn| {p['max_attention_diff']:.1e}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
