"""Sequential baselines: one sentence at a time, no batching, text in and text out.

* PyTorch eager: the reference decoders of :mod:`models.search` (through
  :func:`models.translate.translate_ids` with one sentence), greedy or beam.
* ONNX Runtime: :func:`service.loop.decode` over the bundle's sessions
  (:mod:`service.runtime`) with ``batch_size=1``, the service's code path without its
  scheduler or gRPC.

Both time each sentence from its text to its translated text (tokenise, encode,
decode, detokenise), so they compare with the service's per-request latency.
torch is imported lazily: only the PyTorch baseline needs it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.concurrency import percentile
from models.options import DecodeOptions

log = logging.getLogger(__name__)


@dataclass
class RunStats:
    """Per-sentence latencies (seconds), target tokens (best hypothesis + EOS) and texts
    of one measured run, plus its wall and process CPU time."""

    latencies: list[float] = field(default_factory=list)
    tokens: int = 0
    texts: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    def summary(self) -> dict:
        n = len(self.latencies)
        wall = self.seconds or float("nan")
        return {
            "sentences": n,
            "seconds": round(self.seconds, 3),
            "sentences_per_s": round(n / wall, 2),
            "tokens_per_s": round(self.tokens / wall, 1),
            "p50_ms": round(1000 * percentile(self.latencies, 50), 2),
            "p95_ms": round(1000 * percentile(self.latencies, 95), 2),
            "p99_ms": round(1000 * percentile(self.latencies, 99), 2),
            "cpu_ms_per_sentence": round(1000 * self.cpu_seconds / max(1, n), 3),
        }


def run_sequential(
    texts: Sequence[str], translate: Callable[[str], tuple[str, int]], warmup: int = 3
) -> RunStats:
    """Time ``translate(text) -> (translation, target_tokens)`` over ``texts`` in order,
    after ``warmup`` untimed calls."""
    for text in texts[:warmup]:
        translate(text)
    stats = RunStats()
    start, cpu = time.perf_counter(), time.process_time()
    for text in texts:
        t0 = time.perf_counter()
        out, tokens = translate(text)
        stats.latencies.append(time.perf_counter() - t0)
        stats.tokens += tokens
        stats.texts.append(out)
    stats.seconds = time.perf_counter() - start
    stats.cpu_seconds = time.process_time() - cpu
    return stats


class TorchBaseline:
    """PyTorch eager reference decoding on ``device`` ("cpu" or "cuda") with ``threads``
    intra-op threads (set only while a run lasts)."""

    def __init__(self, checkpoint: Path, threads: int, device: str = "cpu") -> None:
        from models.checkpoint import load_checkpoint

        self.threads = threads
        self.ckpt = load_checkpoint(checkpoint)
        self.ckpt.model.to(device)

    def translate_fn(self, options: DecodeOptions) -> Callable[[str], tuple[str, int]]:
        from models.translate import translate_ids

        model, src, tgt = self.ckpt.model, self.ckpt.src_tokenizer, self.ckpt.tgt_tokenizer

        def translate(text: str) -> tuple[str, int]:
            (hyps,) = translate_ids(model, [src.encode(text)], options=options)
            return tgt.decode(hyps[0].tokens), len(hyps[0].tokens) + 1

        return translate

    def run(self, texts: Sequence[str], options: DecodeOptions, warmup: int = 3) -> RunStats:
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            with torch.inference_mode():
                return run_sequential(texts, self.translate_fn(options), warmup)
        finally:
            torch.set_num_threads(before)


class OnnxBaseline:
    """The bundle's ORT sessions driven by :func:`service.loop.decode`, batch 1, on
    ``providers`` (the CUDA provider is required when listed first)."""

    def __init__(
        self,
        bundle_dir: Path,
        threads: int,
        providers: tuple[str, ...] = ("cpu",),
        *,
        io_binding: str = "auto",
    ) -> None:
        from service.bundle import load_bundle
        from service.sessions import RuntimeConfig

        config = RuntimeConfig(
            providers=providers,
            intra_op_threads=threads,
            require_gpu=providers[0] == "cuda",
            io_binding=io_binding,
        )
        self.bundle = load_bundle(bundle_dir, config)

    def translate_fn(self, options: DecodeOptions) -> Callable[[str], tuple[str, int]]:
        from service.loop import decode

        b = self.bundle

        def translate(text: str) -> tuple[str, int]:
            (hyps,) = decode(
                b.model,
                [b.src_tokenizer.encode(text)],
                options=options,
                special=b.special,
                batch_size=1,
            )
            return b.tgt_tokenizer.decode(hyps[0].tokens), len(hyps[0].tokens) + 1

        return translate

    def run(self, texts: Sequence[str], options: DecodeOptions, warmup: int = 3) -> RunStats:
        return run_sequential(texts, self.translate_fn(options), warmup)
