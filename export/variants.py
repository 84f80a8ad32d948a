"""Reduced-precision bundle variants and their quality/speed gate.

A variant cannot be token-identical to fp32, so its gate is measured quality:
BLEU on a reference set must not drop by more than ``max_bleu_drop`` (unless forced),
and the manifest records the BLEU delta and the measured speed ratio. The int8 variant
must also be batch-invariant (:func:`check_batch_invariance`): every sentence decodes to
the same tokens and scores alone and batched with others, or nothing is written.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

from export import spec
from models.options import DecodeOptions

# The batch-invariance check: how many of the gate's sentences, with which options, and
# how far apart a sentence's scores alone and batched may be.
INVARIANCE_SENTENCES = 200
INVARIANCE_OPTIONS = {
    "greedy": DecodeOptions(),
    "beam5-nbest3": DecodeOptions(beam_size=5, n_best=3),
}
INVARIANCE_TOLERANCE = 1e-5


class VariantError(RuntimeError):
    """A variant that loses too much quality or depends on its batch; the message gives
    the numbers."""


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
    # check_batch_invariance's figures, or None for a variant that is not checked (fp16:
    # GPU kernels may sum in another order for another batch size)
    batch_invariance: dict | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


log = logging.getLogger(__name__)


def quantize_int8(src_dir: Path, dst_dir: Path) -> None:
    """int8 for CPU: weights int8 per output column, activations quantized on the fly with
    one scale per row (per token vector), so a sentence's numbers never depend on the other
    sentences of its batch (:mod:`export.quantize`)."""
    from export.quantize import quantize_file

    quantized = []
    for name in (spec.ENCODER_FILE, spec.DECODER_FILE):
        quantized += quantize_file(src_dir / name, dst_dir / name)
    if not quantized:
        raise VariantError(
            "int8: neither graph has a MatMul/Gemm with a constant weight to quantize; export fp32"
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


# precision -> (writer, execution providers its gate runs on in preference order,
# whether the gate requires it to be batch-invariant)
VARIANTS = {
    "int8": (quantize_int8, ("cpu",), True),
    "fp16": (convert_fp16, ("cuda", "cpu"), False),
}


def _model(bundle_dir: Path, config, providers):
    from service.runtime import OnnxModel
    from service.sessions import RuntimeConfig

    return OnnxModel(
        bundle_dir,
        config.state_names,
        RuntimeConfig(providers=providers),
        exact_lengths=config.exact_lengths,
    )


def _special(config):
    from service.decoding import SpecialIds

    return SpecialIds(config.pad_id, config.bos_id, config.eos_id, config.unk_id)


def _translate(model, config, sources) -> tuple[list, float]:
    from service.loop import decode

    special = _special(config)
    decode(model, sources[:8], options=DecodeOptions(), special=special)  # warm up
    start = time.monotonic()
    nbest = decode(model, sources, options=DecodeOptions(), special=special)
    return [h[0].tokens for h in nbest], time.monotonic() - start


def batch_differences(
    model,
    sources: list[list[int]],
    special,
    options: DecodeOptions,
    *,
    batch_size: int = 64,
) -> dict:
    """Decode every sentence of ``sources`` alone, then all of them batched the way the
    service batches them (``batch_size`` live sentences of mixed lengths, new ones admitted
    as others finish) and count the differences: ``best_changed`` (best hypotheses with
    other tokens), ``nbest_changed`` (n-best lists with other tokens anywhere),
    ``max_score_diff`` over the hypotheses whose tokens agree, ``nonfinite`` (NaN or
    infinite scores, either way)."""
    from service.loop import decode

    if not sources:
        raise VariantError("batch invariance: no sentences to check")
    batched = decode(model, sources, options=options, special=special, batch_size=batch_size)
    counts = {"sentences": len(sources), "best_changed": 0, "nbest_changed": 0}
    counts |= {"max_score_diff": 0.0, "nonfinite": 0}
    for src, together in zip(sources, batched, strict=True):
        (alone,) = decode(model, [src], options=options, special=special, batch_size=1)
        tokens = [h.tokens for h in alone], [h.tokens for h in together]
        counts["best_changed"] += tokens[0][:1] != tokens[1][:1]
        counts["nbest_changed"] += tokens[0] != tokens[1]
        for a, b in zip(alone, together, strict=False):  # lists may differ in length
            if not (math.isfinite(a.score) and math.isfinite(b.score)):
                counts["nonfinite"] += 1
            elif a.tokens == b.tokens:
                counts["max_score_diff"] = max(counts["max_score_diff"], abs(a.score - b.score))
    return counts


def check_batch_invariance(
    model,
    sources: list[list[int]],
    special,
    *,
    options: dict[str, DecodeOptions] | None = None,
    tolerance: float = INVARIANCE_TOLERANCE,
    batch_size: int = 64,
) -> dict:
    """The gate of a variant that must not depend on its batch: :func:`batch_differences`
    for each of ``options`` (default: greedy, beam 5 with 3-best) must find every n-best
    list identical and scores within ``tolerance``.

    Returns ``{"sentences", "options", "max_score_diff", "tolerance"}``; raises
    :class:`VariantError` naming the counts when a sentence differs, when a score is NaN
    or infinite, or when there is nothing to check.
    """
    options = INVARIANCE_OPTIONS if options is None else options
    if not sources or not options:
        raise VariantError("batch invariance: no sentences or no decode options to check")
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise VariantError(f"batch invariance: tolerance must be finite and >= 0, got {tolerance}")
    worst = 0.0
    for name, opts in options.items():
        d = batch_differences(model, sources, special, opts, batch_size=batch_size)
        if d["nbest_changed"] or d["nonfinite"] or d["max_score_diff"] > tolerance:
            raise VariantError(
                f"not batch-invariant ({name}, {len(sources)} sentences decoded alone and "
                f"batched): {d['best_changed']} best and {d['nbest_changed']} n-best "
                f"translations differ, {d['nonfinite']} scores NaN or infinite, scores up to "
                f"{d['max_score_diff']:.2e} apart (tolerance {tolerance:g})"
            )
        worst = max(worst, d["max_score_diff"])
    return {
        "sentences": len(sources),
        "options": list(options),
        "max_score_diff": worst,
        "tolerance": tolerance,
    }


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

    if not sources or len(references) != len(sources):
        raise VariantError(
            f"{precision}: {len(sources)} sentences and {len(references)} references to "
            "compare; give at least one sentence and one reference per sentence"
        )
    _, providers, batch_invariant = VARIANTS[precision]
    variant = _model(variant_dir, config, providers)
    log.info(
        "%s: BLEU gate, fp32 and %s on %s sentences", precision, precision, f"{len(sources):,}"
    )
    tok32, sec32 = _translate(_model(fp32_dir, config, providers), config, sources)
    tokv, secv = _translate(variant, config, sources)
    b32 = sacrebleu.corpus_bleu([detok(t) for t in tok32], [references]).score
    bv = sacrebleu.corpus_bleu([detok(t) for t in tokv], [references]).score
    if not (math.isfinite(b32) and math.isfinite(bv)):
        raise VariantError(f"{precision}: BLEU {bv} vs fp32 {b32} is not a number")
    invariance = None
    if batch_invariant:
        log.info("%s: batch invariance, alone vs batched", precision)
        invariance = check_batch_invariance(
            variant, sources[:INVARIANCE_SENTENCES], _special(config)
        )
    return VariantReport(
        precision,
        round(b32, 2),
        round(bv, 2),
        round(bv - b32, 2),
        round(sec32, 2),
        round(secv, 2),
        round(sec32 / secv, 3),
        len(sources),
        variant.provider,
        invariance,
    )
