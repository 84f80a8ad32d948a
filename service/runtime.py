"""ONNX Runtime sessions for one bundle: the only module that talks to ORT."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from export import spec
from service.decoding import Encoded, StepOutput

log = logging.getLogger(__name__)

_OPT_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
PROVIDER_ALIASES = {"cuda": "CUDAExecutionProvider", "cpu": "CPUExecutionProvider"}


class BundleRuntimeError(RuntimeError):
    """The bundle's graphs cannot run here (missing provider, wrong graph I/O)."""


@dataclass(frozen=True)
class RuntimeConfig:
    """How to build the ORT sessions. ``providers`` in preference order."""

    providers: tuple[str, ...] = ("cuda", "cpu")
    intra_op_threads: int = 0
    inter_op_threads: int = 1
    optimization: str = "all"
    require_gpu: bool = False

    def __post_init__(self) -> None:
        unknown = [p for p in self.providers if p not in PROVIDER_ALIASES]
        if unknown or not self.providers:
            raise ValueError(
                f"providers must be a non-empty list of {sorted(PROVIDER_ALIASES)}, got "
                f"{list(self.providers)}"
            )
        if self.optimization not in _OPT_LEVELS:
            raise ValueError(f"optimization must be one of {sorted(_OPT_LEVELS)}")
        if self.intra_op_threads < 0 or self.inter_op_threads < 0:
            raise ValueError("thread counts must be >= 0 (0 lets ONNX Runtime choose)")


@dataclass
class RunStats:
    """Cumulative work and wall time inside ONNX Runtime (read by benchmarks; cheap to keep).

    ``decoder_rows`` counts hypothesis rows over all steps (generated tokens) and
    ``decoder_row_positions`` the source positions they attended over, padding included.
    """

    encoder_calls: int = 0
    encoder_seconds: float = 0.0
    sentences_encoded: int = 0
    source_tokens: int = 0
    decoder_calls: int = 0
    decoder_seconds: float = 0.0
    decoder_rows: int = 0
    decoder_row_positions: int = 0


def _check_io(session: ort.InferenceSession, path: Path, inputs: list[str], outputs: list[str]):
    have_in = [i.name for i in session.get_inputs()]
    have_out = [o.name for o in session.get_outputs()]
    if sorted(have_in) != sorted(inputs) or sorted(have_out) != sorted(outputs):
        raise BundleRuntimeError(
            f"{path.name} does not have the graph inputs/outputs this service expects "
            f"(inputs {have_in} vs {inputs}; outputs {have_out} vs {outputs}); "
            "re-export the model with this version's `nmt-export`"
        )


class OnnxModel:
    """Encoder and decoder-step sessions of one bundle (implements ``StepModel``)."""

    def __init__(
        self, bundle_dir: Path, state_names: tuple[str, ...], config: RuntimeConfig
    ) -> None:
        self.state_names = state_names
        available = ort.get_available_providers()
        wanted = [PROVIDER_ALIASES[p] for p in config.providers]
        providers = [p for p in wanted if p in available]
        if config.require_gpu and "CUDAExecutionProvider" not in providers:
            raise BundleRuntimeError(
                "--require-gpu is set but ONNX Runtime has no CUDA execution provider here "
                f"(available: {available}); install onnxruntime-gpu and check the CUDA driver"
            )
        if not providers:
            raise BundleRuntimeError(f"none of the providers {wanted} is available ({available})")
        opts = ort.SessionOptions()
        opts.graph_optimization_level = _OPT_LEVELS[config.optimization]
        opts.intra_op_num_threads = config.intra_op_threads
        opts.inter_op_num_threads = config.inter_op_threads
        opts.log_severity_level = 3
        enc_path, dec_path = bundle_dir / spec.ENCODER_FILE, bundle_dir / spec.DECODER_FILE
        self.encoder = ort.InferenceSession(str(enc_path), opts, providers=providers)
        self.decoder = ort.InferenceSession(str(dec_path), opts, providers=providers)
        _check_io(self.encoder, enc_path, spec.encoder_inputs(), spec.encoder_outputs(state_names))
        _check_io(
            self.decoder,
            dec_path,
            spec.decoder_inputs(state_names),
            spec.decoder_outputs(state_names),
        )
        self.provider = self.decoder.get_providers()[0]
        if config.require_gpu and self.provider != "CUDAExecutionProvider":
            raise BundleRuntimeError(
                f"--require-gpu is set but the session runs on {self.provider}"
            )
        log.info("ONNX Runtime sessions on %s (requested %s)", self.provider, wanted)
        self._enc_out = spec.encoder_outputs(state_names)
        self._dec_out = spec.decoder_outputs(state_names)
        self._top_k: dict[int, np.ndarray] = {}
        self.stats = RunStats()

    def encode(self, src_ids: np.ndarray, src_lengths: np.ndarray) -> Encoded:
        start = time.perf_counter()
        memory, keys, mask, *states = self.encoder.run(
            self._enc_out, {spec.SRC_IDS: src_ids, spec.SRC_LENGTHS: src_lengths}
        )
        stats = self.stats
        stats.encoder_seconds += time.perf_counter() - start
        stats.encoder_calls += 1
        stats.sentences_encoded += src_ids.shape[0]
        stats.source_tokens += int(src_lengths.sum())
        return Encoded(memory, keys, mask, tuple(states))

    def step(
        self,
        *,
        prev_tokens: np.ndarray,
        parent_rows: np.ndarray,
        row_sentence: np.ndarray,
        memory: np.ndarray,
        keys: np.ndarray,
        mask: np.ndarray,
        states: tuple[np.ndarray, ...],
        top_k: int,
    ) -> StepOutput:
        """One decoder step; shapes as in :mod:`export.spec`."""
        top = self._top_k.get(top_k)
        if top is None:
            top = self._top_k[top_k] = np.array([top_k], dtype=np.int64)
        feeds = {
            spec.PREV_TOKENS: prev_tokens,
            spec.PARENT_ROWS: parent_rows,
            spec.ROW_SENTENCE: row_sentence,
            spec.MEMORY: memory,
            spec.KEYS: keys,
            spec.SRC_MASK: mask,
            spec.TOP_K: top,
        }
        for name, state in zip(self.state_names, states, strict=True):
            feeds[name] = state
        start = time.perf_counter()
        values, ids, eos, attention, *new_states = self.decoder.run(self._dec_out, feeds)
        stats = self.stats
        stats.decoder_seconds += time.perf_counter() - start
        stats.decoder_calls += 1
        rows = prev_tokens.shape[0]
        stats.decoder_rows += rows
        stats.decoder_row_positions += rows * mask.shape[1]
        return StepOutput(values, ids, eos, attention, tuple(new_states))
