"""``nmt-export CHECKPOINT --out model_repository/<name>/<version>``, or
``nmt-export --from-modules mypkg.model:load --out ...`` for your own modules.

Writes a self-contained bundle (encoder.onnx, decoder.onnx, tokenizers,
manifest.json) that the service loads without torch. The bundle is built in a
temporary directory and moved into place only after the parity gate passed, so a
failed export writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from export.parity import ParityError
from export.signature import AdapterError
from export.spec import ContractError
from export.stages import shown_stages
from export.variants import VariantError
from export.writer import (
    MAX_SOURCE_TOKENS,
    ExportError,
    bundle_config,
    out_problem,
    write_bundle,
)
from models.checkpoint import CheckpointError, load_checkpoint
from models.commands import parse_strictly, show_defaults
from models.tokenizer import TokenizerError


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
    max_source_tokens: int = MAX_SOURCE_TOKENS,
) -> dict:
    """Export a checkpoint of this project's trainer; returns the manifest.

    The gate's sentences: ``parity_src``, else ``test.en`` beside the checkpoint, else
    random token sequences (a tiny test model has no data).
    """
    from export.user import parity_ids
    from service.bundle import sha256_file

    ckpt = load_checkpoint(checkpoint_path)
    if parity_src is None and (checkpoint_path.parent / "test.en").is_file():
        parity_src = checkpoint_path.parent / "test.en"
    sources, source_name = parity_ids(
        ckpt.src_tokenizer, bundle_config(ckpt.model), parity_src, parity_limit
    )
    provenance = {
        "checkpoint": {
            "file": checkpoint_path.name,
            "sha256": sha256_file(checkpoint_path),
            "meta": {k: v for k, v in ckpt.meta.items() if k != "history"},
        }
    }
    return write_bundle(
        ckpt.model,
        ckpt.src_tokenizer,
        ckpt.tgt_tokenizer,
        out,
        sources=sources,
        source_name=source_name,
        provenance=provenance,
        description=ckpt.config.to_dict(),
        force=force,
        beam_sentences=beam_sentences,
        name=name,
        precision=precision,
        parity_ref=parity_ref,
        parity_limit=parity_limit,
        max_bleu_drop=max_bleu_drop,
        max_source_tokens=max_source_tokens,
    )


def add_bundle_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every way in shares (nmt-export, nmt-convert): where to write the
    bundle and how to gate it."""
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
        help="source sentences for the gate (default: test.en beside a checkpoint, else "
        "random token sequences)",
    )
    parser.add_argument(
        "--parity-limit",
        type=int,
        default=None,
        help="use only the first N parity sentences for greedy",
    )
    parser.add_argument(
        "--beam-sentences",
        type=int,
        default=200,
        help="sentences the beam check decodes (>= 1; default: %(default)s)",
    )
    parser.add_argument(
        "--max-source-tokens",
        type=int,
        default=MAX_SOURCE_TOKENS,
        help="longest source the gate checks, in tokens; the server refuses longer ones "
        "(default: %(default)s)",
    )
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


def check_bundle_arguments(args: argparse.Namespace) -> str | None:
    """What is wrong with the shared options, in one line, or None."""
    if args.beam_sentences < 1:
        return (
            f"--beam-sentences must be >= 1, got {args.beam_sentences}: "
            "the beam check cannot be skipped"
        )
    if args.max_source_tokens < 1:
        return f"--max-source-tokens must be >= 1, got {args.max_source_tokens}"
    if args.parity_limit is not None and args.parity_limit < 1:
        return f"--parity-limit must be >= 1, got {args.parity_limit}"
    return out_problem(args.out, args.force)


def layout_note(out: Path) -> str | None:
    """A line for a bundle written where ``nmt-serve`` would not find it: it serves
    ``<repository>/<name>/<version>/`` with a whole-number version."""
    if out.name.isdigit():
        return None
    return (
        f"note: nmt-serve serves <repository>/<name>/<version>/ with a whole-number version, "
        f"not {out.name!r}: to serve this bundle, put it at REPOSITORY/NAME/1 and pass "
        "--model-repository REPOSITORY"
    )


def bundle_options(args: argparse.Namespace) -> dict:
    """The shared options as keywords of the export functions."""
    return dict(
        force=args.force,
        parity_src=args.parity_src,
        parity_limit=args.parity_limit,
        beam_sentences=args.beam_sentences,
        name=args.name,
        precision="int8" if args.int8 else "fp16" if args.fp16 else "fp32",
        parity_ref=args.parity_ref,
        max_source_tokens=args.max_source_tokens,
    )


# Failures of the user's input: one line, exit 2 (a gate failure is exit 1).
INPUT_ERRORS = (ExportError, CheckpointError, TokenizerError, AdapterError, ContractError)


def run_export(prog: str, export: Callable[[], dict], out: Path) -> int:
    """Run ``export``; print its summary or one error line; return the exit code."""
    try:
        with shown_stages(prog):  # on a terminal: what the export is doing
            manifest = export()
    except INPUT_ERRORS as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except (ParityError, VariantError) as exc:
        print(f"{prog}: gate failed, nothing written: {exc}", file=sys.stderr)
        return 1
    if manifest["variant"]:
        v = manifest["variant"]
        print(
            f"{v['precision']}: BLEU {v['bleu_variant']} vs fp32 {v['bleu_fp32']} "
            f"({v['bleu_delta']:+.2f}), {v['speedup']:.2f}x the fp32 speed on {v['provider']}"
        )
    p = manifest["parity"]
    if (note := layout_note(out)) is not None:
        print(f"{prog}: {note}", file=sys.stderr)
    if asked := (manifest.get("source_model") or {}).get("origin", {}).get("request_options"):
        shown = ", ".join(f"{k} {v}" for k, v in asked.items())
        print(
            f"{prog}: note: the model's config decodes with {shown}: not a default of the "
            "bundle (nmt-serve decodes greedily unless asked); requests ask for it",
            file=sys.stderr,
        )
    ties = p.get("beam_near_ties", 0)
    tied = f" ({ties} with hypotheses tied in score, in another order)" if ties else ""
    print(
        f"wrote {out}: greedy identical on {p['greedy_sentences']} sentences, "
        f"beam {p['beam_size']} identical on {p['beam_sentences']}{tied}, max |dlogp| "
        f"{p['max_log_prob_diff']:.1e}, max |dattn| {p['max_attention_diff']:.1e}"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nmt-export",
        description="Export a model as a bundle nmt-serve loads without torch: a checkpoint "
        "of nmt-train, or your own encoder and one-step decoder modules (--from-modules).",
    )
    parser.add_argument(
        "checkpoint", type=Path, nargs="?", help="a checkpoint of nmt-train (or --from-modules)"
    )
    parser.add_argument(
        "--from-modules",
        metavar="MODULE:FUNCTION",
        default=None,
        help="export your own modules: FUNCTION() returns an export.user.UserModel "
        "(README: Serve your own model)",
    )
    add_bundle_arguments(parser)
    args = parse_strictly(show_defaults(parser), argv)
    problem = check_bundle_arguments(args)
    if problem is None and (args.checkpoint is None) == (args.from_modules is None):
        problem = "give a CHECKPOINT or --from-modules (one of the two)"
    if problem:
        print(f"nmt-export: error: {problem}", file=sys.stderr)
        return 2
    options = bundle_options(args)

    def export() -> dict:
        if args.from_modules:
            from export.user import export_modules, load_user_model

            return export_modules(load_user_model(args.from_modules), args.out, **options)
        return export_bundle(args.checkpoint, args.out, **options)

    return run_export("nmt-export", export, args.out)


if __name__ == "__main__":
    sys.exit(main())
