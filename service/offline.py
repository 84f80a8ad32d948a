"""Translate with a bundle in this process, without a server (``nmt-eval --bundle``):
the serving decoder on ONNX Runtime's CPU provider, with the bundle's own decoding
defaults."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from service.bundle import load_bundle
from service.decoding import decode
from service.runtime import RuntimeConfig


def translate_with_bundle(bundle_dir: Path, lines: list[str], beam: int) -> list[str]:
    """Best translations of ``lines`` at beam size ``beam`` (1: greedy)."""
    bundle = load_bundle(Path(bundle_dir), RuntimeConfig(providers=("cpu",)))
    options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=1)
    sources = [bundle.src_tokenizer.encode(line) or [bundle.config.unk_id] for line in lines]
    nbest = decode(bundle.model, sources, options=options, special=bundle.special)
    return [bundle.tgt_tokenizer.decode(h[0].tokens) for h in nbest]
