"""Write a bundle: trace the graphs, run the parity gate, save tokenizers and manifest.

Every way in (this project's checkpoints, a user's own modules, an Eole checkpoint)
ends here. The bundle is built in a temporary directory beside ``out`` and moved into
place only after the gate passed, so a failed export writes nothing.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from export import spec
from export.spec import BundleConfig
from models.tokenizer import read_lines, tokenizer_files, write_tokenizer

MAX_SOURCE_TOKENS = 128


class ExportError(RuntimeError):
    """An export that cannot proceed; the message says how to fix it."""


log = logging.getLogger(__name__)


def out_problem(out: Path, force: bool) -> str | None:
    """Why ``out`` cannot become a bundle directory, in one line, or None: checked before
    any work (a gate takes minutes; a path under a file used to fail after it, with a
    traceback): by the CLIs as they parse, and by every writer of a bundle."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        return f"{out} exists and is not empty; pass --force to replace it"
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot write {out}: {parent} is a file, not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot write {out}: {parent} is not writable"
    return None


def staging_dir(parent: Path) -> Path:
    """A fresh directory beside the bundle, renamed into place when the gate passes.

    ``mkdtemp`` makes it 0700, which a bundle must not keep: the server may run as another
    user (the Docker image runs as uid 10001 and could not read an exported bundle). It
    gets the mode ``mkdir`` would give it under the current umask.
    """
    path = Path(tempfile.mkdtemp(prefix=".export-", dir=parent))
    umask = os.umask(0)
    os.umask(umask)
    path.chmod(0o777 & ~umask)
    return path


def bundle_config(model: Any) -> BundleConfig:
    """The decoding contract of ``model`` (a ``Seq2Seq`` or an adapted model)."""
    cfg = model.config
    if isinstance(cfg, BundleConfig):
        return cfg
    return BundleConfig(
        src_vocab_size=cfg.src_vocab_size,
        tgt_vocab_size=cfg.tgt_vocab_size,
        pad_id=cfg.pad_id,
        unk_id=cfg.unk_id,
        bos_id=cfg.bos_id,
        eos_id=cfg.eos_id,
        state_names=cfg.state_names,
    )


def graph_io(path: Path) -> dict:
    """Names, dtypes and shapes of a graph's inputs and outputs, for the manifest."""
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


def non_finite_weights(model: Any) -> str | None:
    """What in ``model``'s weights is NaN or inf, ``None`` when nothing is: a training
    that diverged saves such checkpoints, and their export failed only in the parity gate
    ("non-finite values in the logits"), after tracing, with no word of which weights."""
    import torch

    # NaN anywhere; inf in the parameters only: a buffer may hold -inf on purpose (the
    # Marian converter's mask of blocked tokens)
    parameters = {name for name, _ in model.named_parameters()}
    bad = []
    for name, tensor in model.state_dict().items():
        if torch.is_tensor(tensor) and tensor.is_floating_point():
            wrong = torch.isnan(tensor) if name not in parameters else ~torch.isfinite(tensor)
            count = int(wrong.sum())
            if count:
                bad.append(f"{name} ({count:,} of {tensor.numel():,} values)")
    if not bad:
        return None
    more = f" and {len(bad) - 3} more tensors" if len(bad) > 3 else ""
    return (
        f"the model's weights hold NaN or inf: {', '.join(bad[:3])}{more}; the training "
        "diverged before this checkpoint was saved: convert an earlier one"
    )


def references_for(source_name: str, parity_ref: Path | None) -> list[str]:
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


def write_bundle(
    model: Any,
    src_tokenizer: Any,
    tgt_tokenizer: Any,
    out: Path,
    *,
    sources: list[list[int]],
    source_name: str,
    provenance: dict[str, Any],
    description: dict[str, Any],
    force: bool = False,
    beam_sentences: int = 200,
    name: str | None = None,
    precision: str = "fp32",
    parity_ref: Path | None = None,
    parity_limit: int | None = None,
    max_bleu_drop: float = 1.0,
    reference_batch_size: int = 64,
    max_source_tokens: int = MAX_SOURCE_TOKENS,
    decoding: dict[str, Any] | None = None,
) -> dict:
    """Export ``model``, gate it on ``sources`` (token ids), write the bundle; returns the
    manifest. ``provenance`` says where the model came from, ``description`` what it is
    (both go to the manifest as they are). ``max_source_tokens``: the longest source the
    gate checks, which the server will not exceed. ``decoding``: the model's decoding
    defaults (:class:`models.options.DecodeOptions` fields) the server applies to
    requests that do not set them.

    ``precision="int8"`` or ``"fp16"`` exports and gates fp32 graphs first, then writes
    their dynamic int8 quantization (CPU) or fp16 conversion (GPU), gated on BLEU against
    the fp32 graphs (side by side).
    """
    from export.graphs import export_graphs
    from export.modules import first_line
    from export.parity import ParityError, run_gate
    from service.bundle import sha256_file
    from service.runtime import OnnxModel
    from service.sessions import RuntimeConfig

    if (problem := out_problem(out, force) or non_finite_weights(model)) is not None:
        raise ExportError(problem)
    config = bundle_config(model)
    config.check_vocabularies(src_tokenizer.vocab_size, tgt_tokenizer.vocab_size)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = staging_dir(out.parent)
    try:
        started = time.monotonic()
        log.info("tracing the encoder and one decoder step to ONNX")
        export_graphs(model, tmp)
        tokenizers = {}
        for side, tok in (("source", src_tokenizer), ("target", tgt_tokenizer)):
            tokenizers[side] = write_tokenizer(tok, tmp, side)
        tok_files = [f for entry in tokenizers.values() for f in tokenizer_files(entry)]
        onnx_model = OnnxModel(
            tmp,
            config.state_names,
            RuntimeConfig(providers=("cpu",)),
            exact_lengths=config.exact_lengths,
        )
        try:
            report = run_gate(
                model,
                onnx_model,
                sources,
                beam_sentences=beam_sentences,
                max_len=max_source_tokens,
                reference_batch_size=reference_batch_size,
            )
        except Exception as exc:
            if not type(exc).__module__.startswith("onnxruntime"):
                raise
            # torch ran the modules, ONNX Runtime cannot run what the trace wrote of them
            raise ParityError(
                f"ONNX Runtime cannot run the exported graphs: {first_line(exc, 400)} (the "
                "trace wrote something other than the modules compute: a size it fixed, or "
                "an op the ONNX exporter translated differently)"
            ) from None
        variant = None
        if precision != "fp32":
            variant, tmp = _make_variant(
                tmp,
                out,
                config,
                tgt_tokenizer,
                precision,
                sources,
                source_name,
                parity_ref,
                parity_limit,
                force,
                max_bleu_drop,
                tok_files,
            )
        files = [spec.ENCODER_FILE, spec.DECODER_FILE] + tok_files
        manifest = {
            "format": spec.BUNDLE_FORMAT,
            "name": name or out.parent.name,
            "version": out.name,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "precision": precision,
            "model_config": description,
            "parameters": sum(p.numel() for p in model.parameters()),
            **config.manifest_fields(),
            spec.TOKENIZERS_KEY: tokenizers,
            "max_source_tokens": max_source_tokens,
            "decoding": dict(decoding or {}),
            "opset": spec.OPSET,
            "graphs": {
                "encoder": graph_io(tmp / spec.ENCODER_FILE),
                "decoder": graph_io(tmp / spec.DECODER_FILE),
            },
            "versions": _versions(),
            **provenance,
            "parity": report.to_dict() | {"source": source_name},
            "variant": variant.to_dict() if variant else None,
            "export_seconds": round(time.monotonic() - started, 1),
            "files": {f: sha256_file(tmp / f) for f in files},
        }
        install(tmp, out, manifest)
        return manifest
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def install(tmp: Path, out: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest`` into the staged bundle ``tmp``, check that nmt-serve loads it,
    and move it to ``out`` (replacing whatever is there: ``--force`` was checked)."""
    (tmp / spec.MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    log.info("loading the bundle as nmt-serve will")
    loads_as_served(tmp)
    if out.is_dir():
        shutil.rmtree(out)
    elif out.exists():
        out.unlink()  # --force over a plain file
    tmp.rename(out)


def loads_as_served(bundle_dir: Path) -> None:
    """The server's own loader must accept what was written (tokenizers with these special
    ids, decoding defaults, graph I/O); a bundle it would refuse is not written."""
    from service.bundle import BundleError, load_bundle
    from service.sessions import RuntimeConfig

    try:
        load_bundle(bundle_dir, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    except BundleError as exc:
        message = str(exc).replace(f"{bundle_dir}: ", "")
        raise ExportError(f"nmt-serve would refuse this bundle: {message}") from None


def _make_variant(
    fp32_dir: Path,
    out: Path,
    config: BundleConfig,
    tgt_tokenizer: Any,
    precision: str,
    sources: list[list[int]],
    source_name: str,
    parity_ref: Path | None,
    limit: int | None,
    force: bool,
    max_bleu_drop: float,
    tokenizer_files: list[str],
):
    """Write the ``precision`` variant of ``fp32_dir`` into a new temp dir and gate it;
    returns (report, new dir)."""
    from export.variants import VARIANTS, VariantError, compare

    if precision not in VARIANTS:
        raise ExportError(
            f"unknown precision {precision!r}; supported: fp32, {', '.join(VARIANTS)}"
        )
    write_variant = VARIANTS[precision][0]
    references = references_for(source_name, parity_ref)
    references = references[:limit] if limit else references
    if len(references) != len(sources):
        raise ExportError(f"{len(references)} references for {len(sources)} parity sentences")
    dst = staging_dir(out.parent)
    try:
        log.info("%s: writing the variant of the fp32 graphs", precision)
        write_variant(fp32_dir, dst)
        for f in tokenizer_files:
            shutil.copy(fp32_dir / f, dst / f)
        report = compare(
            fp32_dir,
            dst,
            precision=precision,
            config=config,
            sources=sources,
            references=references,
            detok=tgt_tokenizer.decode,
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
