"""Reduced-precision bundle variants and their quality/speed gate.

A variant cannot be token-identical to fp32, so its gate is measured quality:
BLEU on a reference set must not drop by more than ``max_bleu_drop`` (unless forced),
and the manifest records the BLEU delta and the measured speed ratio.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from export import spec
from models.options import DecodeOptions


class VariantError(RuntimeError):
    """A variant that loses too much quality; the message gives the numbers."""


@dataclass(frozen=True)
class VariantReport:
    precision: str
    bleu_fp32: float
    bleu_variant: float
    bleu_delta: float
    seconds_fp32: float
    seconds_variant: float
    speedup: float
    sentences: int
    provider: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def quantize_int8(src_dir: Path, dst_dir: Path) -> None:
    """Dynamic int8 quantization (weights int8, activations quantized on the fly) for CPU."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    for name in (spec.ENCODER_FILE, spec.DECODER_FILE):
        quantize_dynamic(
            str(src_dir / name),
            str(dst_dir / name),
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul", "Gemm"],
        )


def convert_fp16(src_dir: Path, dst_dir: Path) -> None:
    """fp16 weights and arithmetic for GPUs. Graph inputs and outputs stay fp32, so the
    service feeds an fp16 bundle exactly like an fp32 one (the graph casts at its edges).
    ONNX Runtime's converter is used rather than onnxconverter-common's, which leaves
    Cast nodes and value_info typed float and gives graphs ORT refuses to load."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    for name in (spec.ENCODER_FILE, spec.DECODER_FILE):
        model = convert_float_to_float16(onnx.load(str(src_dir / name)), keep_io_types=True)
        onnx.save(model, str(dst_dir / name))


# precision -> (writer, execution providers its gate runs on, in preference order)
VARIANTS = {
    "int8": (quantize_int8, ("cpu",)),
    "fp16": (convert_fp16, ("cuda", "cpu")),
}


def _translate(bundle_dir: Path, config, sources, providers) -> tuple[list, float, str]:
    from service.decoding import SpecialIds, decode
    from service.runtime import OnnxModel, RuntimeConfig

    model = OnnxModel(
        bundle_dir,
        config.state_names,
        RuntimeConfig(providers=providers),
        exact_lengths=config.exact_lengths,
    )
    special = SpecialIds(config.pad_id, config.bos_id, config.eos_id)
    decode(model, sources[:8], options=DecodeOptions(), special=special)  # warm up
    start = time.monotonic()
    nbest = decode(model, sources, options=DecodeOptions(), special=special)
    return [h[0].tokens for h in nbest], time.monotonic() - start, model.provider


def compare(
    fp32_dir: Path,
    variant_dir: Path,
    *,
    precision: str,
    config,
    sources: list[list[int]],
    references: list[str],
    detok,
) -> VariantReport:
    """Greedy-decode ``sources`` with both bundles, side by side in one run, on the
    variant's execution provider (CUDA for fp16 when present, else the CPU: the report
    names it, since an fp16 speed ratio measured on a CPU says nothing about a GPU).
    ``config``: the bundles' :class:`export.spec.BundleConfig`."""
    import sacrebleu

    providers = VARIANTS[precision][1]
    tok32, sec32, _ = _translate(fp32_dir, config, sources, providers)
    tokv, secv, provider = _translate(variant_dir, config, sources, providers)
    b32 = sacrebleu.corpus_bleu([detok(t) for t in tok32], [references]).score
    bv = sacrebleu.corpus_bleu([detok(t) for t in tokv], [references]).score
    return VariantReport(
        precision,
        round(b32, 2),
        round(bv, 2),
        round(bv - b32, 2),
        round(sec32, 2),
        round(secv, 2),
        round(sec32 / secv, 3),
        len(sources),
        provider,
    )
