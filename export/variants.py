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


def _translate(bundle_dir: Path, state_names, sources, special) -> tuple[list, float]:
    from service.decoding import decode
    from service.runtime import OnnxModel, RuntimeConfig

    model = OnnxModel(bundle_dir, state_names, RuntimeConfig(providers=("cpu",)))
    decode(model, sources[:8], options=DecodeOptions(), special=special)  # warm up
    start = time.monotonic()
    nbest = decode(model, sources, options=DecodeOptions(), special=special)
    return [h[0].tokens for h in nbest], time.monotonic() - start


def compare(
    fp32_dir: Path,
    variant_dir: Path,
    *,
    precision: str,
    state_names,
    special,
    sources: list[list[int]],
    references: list[str],
    detok,
) -> VariantReport:
    """Greedy-decode ``sources`` with both bundles, side by side in one run."""
    import sacrebleu

    tok32, sec32 = _translate(fp32_dir, state_names, sources, special)
    tokv, secv = _translate(variant_dir, state_names, sources, special)
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
    )
