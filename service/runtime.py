"""ONNX Runtime sessions for one bundle: the module that talks to ORT (with
:mod:`service.devicepool`, the decode state it keeps on the device under IO binding)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from export import spec
from service import greedysteps, topk
from service.cudagraphs import DEVICE_LOCK, GraphSteps, static_state_dims
from service.decoding import Encoded, GreedyStepsOutput, SpecialIds, StepOutput
from service.devicepool import DeviceGraphs, DevicePool, DeviceState, bind_input
from service.encodergraphs import EncoderGraphs, encoder_layout
from service.pool import MemoryPool

log = logging.getLogger(__name__)

_OPT_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
GRAPH_OPTIMIZATION_LEVELS = tuple(_OPT_LEVELS)
IO_BINDING_MODES = ("auto", "on", "off")
# Steps a greedy call may run: each is a copy of the decoder's nodes in one graph.
MAX_GREEDY_STEPS = 16
# What greedy_steps 0 (auto) runs on host arrays; with IO binding auto stays at 1 step a
# call until the device path is measured (README, "Several greedy steps a call").
HOST_GREEDY_STEPS = 4
CUDA_GRAPH_MODES = ("auto", "on", "off")
CHUNKED_TOPK_MODES = ("auto", "on", "off")
PROVIDER_ALIASES = {"cuda": "CUDAExecutionProvider", "cpu": "CPUExecutionProvider"}
# The provider of sessions captured as CUDA graphs (decoder steps, encoder calls); TF32 off
# as for every CUDA session (see OnnxModel).
CUDA_GRAPH_PROVIDER = ("CUDAExecutionProvider", {"use_tf32": "0", "enable_cuda_graph": "1"})


class BundleRuntimeError(RuntimeError):
    """The bundle's graphs cannot run here (missing provider, wrong graph I/O)."""


@dataclass(frozen=True)
class RuntimeConfig:
    """How to build the ORT sessions. ``providers`` in preference order.

    On the CPU provider with more than one intra-op thread, every graph gets a second,
    single-threaded session: decoder steps with fewer than ``parallel_rows`` rows (and
    encoder batches of fewer sentences) run there. Splitting a few rows' GEMMs across
    cores costs more in hand-offs than it saves, and the other core is busy with the
    gRPC threads; large steps (beam search, many clients) do gain from it. Pool threads
    do not spin between kernels unless ``allow_spinning``: spinning threads took the
    cores the Python threads needed and halved the service's throughput on 2 cores.

    ``io_binding`` ("auto", "on", "off"; auto = on for CUDA) keeps the decode state on the
    execution device through ONNX Runtime IO binding: encoder outputs, the memory pool
    and the decoder states stay there (:mod:`service.devicepool`); per step only top-k
    ids/log-probs, EOS log-probs and attention come to the host.

    ``greedy_steps``: decoder steps one call runs when every sentence of a step is plain
    greedy (:mod:`service.greedysteps`; 1: one step a call; 0, auto: 4 on host arrays,
    1 with IO binding, where several steps run too, bound and through the CUDA graphs'
    fixed buffers, but are not measured on a GPU yet). A stream then gets its tokens in
    bursts of up to that many, and a request admitted mid-call waits for the call to end.

    ``cuda_graphs`` ("auto", "on", "off"; auto = on with CUDA and IO binding) replays
    decoder steps from CUDA graphs on fixed, bucketed buffers (:mod:`service.cudagraphs`),
    and encoder calls on sessions of fixed shape buckets (:mod:`service.encodergraphs`).
    "on" elsewhere runs the same buffers without capturing (how CI tests that path).

    ``chunked_topk`` ("auto", "on", "off"; auto = on for the CPU provider) rewrites the
    decoder's top-k over the vocabulary into two levels at load time
    (:mod:`service.topk`): the same values, ids and order, at a fraction of one TopK's
    cost on a CPU. On CUDA it is neither measured nor tested, hence off in auto.
    """

    providers: tuple[str, ...] = ("cuda", "cpu")
    intra_op_threads: int = 0
    inter_op_threads: int = 1
    optimization: str = "all"
    require_gpu: bool = False
    parallel_rows: int = 32
    allow_spinning: bool = False
    io_binding: str = "auto"
    cuda_graphs: str = "auto"
    greedy_steps: int = 0
    chunked_topk: str = "auto"

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
        if self.io_binding not in IO_BINDING_MODES:
            raise ValueError(f"io_binding must be one of {list(IO_BINDING_MODES)}")
        if self.cuda_graphs not in CUDA_GRAPH_MODES:
            raise ValueError(f"cuda_graphs must be one of {list(CUDA_GRAPH_MODES)}")
        if self.chunked_topk not in CHUNKED_TOPK_MODES:
            raise ValueError(f"chunked_topk must be one of {list(CHUNKED_TOPK_MODES)}")
        if self.parallel_rows < 0:
            raise ValueError("parallel_rows must be >= 0 (0: always the multi-threaded session)")
        if not 0 <= self.greedy_steps <= MAX_GREEDY_STEPS:
            raise ValueError(
                f"greedy_steps must be 0..{MAX_GREEDY_STEPS} (1: one step a decoder call, 0: auto)"
            )

    def session_options(self, *, threads: int | None = None) -> ort.SessionOptions:
        """Options of one session; ``threads`` overrides ``intra_op_threads``."""
        opts = ort.SessionOptions()
        opts.graph_optimization_level = _OPT_LEVELS[self.optimization]
        opts.intra_op_num_threads = self.intra_op_threads if threads is None else threads
        opts.inter_op_num_threads = self.inter_op_threads
        opts.log_severity_level = 3
        if not self.allow_spinning:
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
        return opts


@dataclass
class RunStats:
    """Cumulative work and wall time inside ONNX Runtime (read by benchmarks; cheap to keep).

    ``decoder_rows`` counts hypothesis rows over all steps (generated tokens, and with
    several greedy steps a call the steps a row computes after its EOS) and
    ``decoder_row_positions`` the source positions they attended over, padding included;
    ``decoder_steps`` the steps the ``decoder_calls`` ran (several a call with
    ``greedy_steps``).
    """

    encoder_calls: int = 0
    encoder_seconds: float = 0.0
    sentences_encoded: int = 0
    source_tokens: int = 0
    decoder_calls: int = 0
    decoder_steps: int = 0
    decoder_seconds: float = 0.0
    decoder_rows: int = 0
    decoder_row_positions: int = 0
    # decoder calls run on the fixed buffers (replayed on CUDA; service.cudagraphs), and
    # where their time went: uploading the index vectors, the run, outputs to the host
    graph_steps: int = 0
    graph_upload_seconds: float = 0.0
    graph_run_seconds: float = 0.0
    graph_download_seconds: float = 0.0
    # encoder calls run on a fixed-shape session (replayed on CUDA; service.encodergraphs)
    graph_encodes: int = 0


def _session(
    path: Path | bytes, opts: ort.SessionOptions, providers: list, name: Path | None = None
) -> ort.InferenceSession:
    """An ORT session of ``path`` (or of a serialized graph named ``name``); a graph ORT
    cannot load is one line naming the file."""
    if isinstance(path, bytes):
        data, path = path, name
    else:
        data = str(path)
    try:
        return ort.InferenceSession(data, opts, providers=providers)
    except Exception as exc:  # ORT raises its own Fail/InvalidGraph/... types, or RuntimeError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BundleRuntimeError(
            f"ONNX Runtime cannot load {path.name}: {first[:300]}; re-export the model"
        ) from None


def _check_io(session: ort.InferenceSession, path: Path, inputs: list[str], outputs: list[str]):
    have_in = [i.name for i in session.get_inputs()]
    have_out = [o.name for o in session.get_outputs()]
    if sorted(have_in) != sorted(inputs) or sorted(have_out) != sorted(outputs):
        raise BundleRuntimeError(
            f"{path.name} does not have the graph inputs/outputs this service expects "
            f"(inputs {have_in} vs {inputs}; outputs {have_out} vs {outputs}); "
            "re-export the model with this version's `nmt-export`"
        )


@functools.cache
def _preload_cuda_libraries() -> None:
    """Load CUDA/cuDNN from pip's ``nvidia-*`` packages when they are installed, so the
    CUDA provider works without LD_LIBRARY_PATH (a CUDA base image has them system-wide,
    where this finds nothing to do)."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return
    try:
        preload()
    except Exception as exc:  # a failed preload only means the system's libraries are used
        log.debug("onnxruntime.preload_dlls() failed: %s", exc)


def usable_providers(config: RuntimeConfig) -> list[str]:
    """The configured execution providers this ONNX Runtime build really has, in order."""
    available = ort.get_available_providers()
    wanted = [PROVIDER_ALIASES[p] for p in config.providers]
    providers = [p for p in wanted if p in available]
    if "CUDAExecutionProvider" in providers:
        _preload_cuda_libraries()
    if config.require_gpu and "CUDAExecutionProvider" not in wanted:
        raise BundleRuntimeError(
            f"--require-gpu is set but --providers {','.join(config.providers)} leaves out "
            "CUDA; add cuda to --providers"
        )
    if config.require_gpu and "CUDAExecutionProvider" not in providers:
        raise BundleRuntimeError(
            "--require-gpu is set but ONNX Runtime has no CUDA execution provider here "
            f"(available: {available}); install onnxruntime-gpu and check the CUDA driver"
        )
    if not providers:
        raise BundleRuntimeError(f"none of the providers {wanted} is available ({available})")
    return providers


class OnnxModel:
    """Encoder and decoder-step sessions of one bundle (implements ``StepModel``)."""

    def __init__(
        self,
        bundle_dir: Path,
        state_names: tuple[str, ...],
        config: RuntimeConfig,
        *,
        exact_lengths: bool = False,
        pad_id: int = 0,
        target: tuple[SpecialIds, int] | None = None,
    ) -> None:
        """``exact_lengths``: the encoder reads padding as input (see
        :class:`export.spec.BundleConfig`), so :meth:`encode` runs it per length;
        ``pad_id``: the source's padding token (what fixed-shape encoder calls pad with);
        ``target``: the target's special ids and vocabulary size, which the greedy steps
        of ``config.greedy_steps`` need (None: one step a call)."""
        self.state_names = state_names
        self.exact_lengths = exact_lengths
        wanted = [PROVIDER_ALIASES[p] for p in config.providers]
        providers = usable_providers(config)
        opts = config.session_options()
        enc_path, dec_path = bundle_dir / spec.ENCODER_FILE, bundle_dir / spec.DECODER_FILE
        # TF32 matmuls would break the token-for-token parity the export gate measured in
        # fp32; this model's GEMMs are too small for TF32 to pay off anyway.
        providers = [
            (p, {"use_tf32": "0"}) if p == "CUDAExecutionProvider" else p for p in providers
        ]
        self.encoder = _session(enc_path, opts, providers)
        # the decoder as served: its file, or that graph rewritten (bytes)
        dec_graph = self._decoder_graph(config, dec_path, providers, target)
        self.decoder = _session(dec_graph, opts, providers, dec_path)
        # Single-threaded twins for small batches (CPU only; see RuntimeConfig).
        self.parallel_rows = 0
        self._encoder_1, self._decoder_1 = self.encoder, self.decoder
        threads = config.intra_op_threads or (os.cpu_count() or 1)
        if (
            self.decoder.get_providers()[0] == "CPUExecutionProvider"
            and threads > 1
            and config.parallel_rows > 0
        ):
            single = config.session_options(threads=1)
            self._encoder_1 = _session(enc_path, single, providers)
            self._decoder_1 = _session(dec_graph, single, providers, dec_path)
            self.parallel_rows = config.parallel_rows
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
        self.device = "cuda" if self.provider == "CUDAExecutionProvider" else "cpu"
        self.io_binding = config.io_binding == "on" or (
            config.io_binding == "auto" and self.device == "cuda"
        )
        # the graphs that admit, compact and join decode state on the device
        copy_options = config.session_options(threads=1)
        self._graphs = DeviceGraphs(
            self.device, lambda path: _session(Path(path), copy_options, providers)
        )
        if self.io_binding:
            types = {o.name: o.type for o in self.encoder.get_outputs()}
            memory_type = types[spec.encoder_outputs(state_names)[0]]
            if memory_type != "tensor(float)":
                raise BundleRuntimeError(
                    f"IO binding keeps float32 encoder outputs on the device, this bundle's "
                    f"are {memory_type}; serve it with --io-binding off"
                )
            self._graphs.prepare(np.float32)
        self.stats = RunStats()
        self.graph_steps = self._graph_steps(config, dec_graph, dec_path, opts, state_names)
        self.greedy_steps = 1
        self._greedy = self._greedy_1 = None
        self.greedy_graph_steps: GraphSteps | None = None
        steps = config.greedy_steps or (1 if self.io_binding else HOST_GREEDY_STEPS)
        if steps > 1 and target is not None:
            self._greedy_sessions(config, steps, dec_graph, dec_path, opts, providers, target)
        self.encoder_graphs = self._encoder_graphs(config, enc_path, state_names, pad_id)
        # CUDA graphs of any model in this process may be capturing (nothing to guard on
        # a CPU, where encoder threads of several lanes run side by side)
        self._encoder_lock = DEVICE_LOCK if self.device == "cuda" else contextlib.nullcontext()
        log.info(
            "ONNX Runtime sessions on %s (requested %s), IO binding %s, CUDA graphs %s, "
            "chunked top-k %s",
            self.provider,
            wanted,
            "on" if self.io_binding else "off",
            "on" if self.graph_steps is not None and self.graph_steps.capture else "off",
            "on" if self.chunked_topk else "off",
        )
        self._enc_out = spec.encoder_outputs(state_names)
        self._dec_out = spec.decoder_outputs(state_names)
        self._top_k: dict[int, np.ndarray] = {}

    def _decoder_graph(
        self,
        config: RuntimeConfig,
        path: Path,
        providers: list,
        target: tuple[SpecialIds, int] | None,
    ) -> Path | bytes:
        """The decoder as served: ``path`` itself, or its graph with the top-k in two
        levels (serialized; ``config.chunked_topk``, :mod:`service.topk`)."""
        self.chunked_topk = False
        mode = config.chunked_topk
        first = providers[0] if isinstance(providers[0], str) else providers[0][0]
        if target is None or mode == "off" or (mode == "auto" and first != "CPUExecutionProvider"):
            return path
        try:
            data = topk.chunked(path.read_bytes(), target[1])
        except topk.TopKError as exc:  # exact or not at all: the bundle's own TopK serves
            log.log(logging.WARNING if mode == "on" else logging.INFO, "top-k: one TopK (%s)", exc)
            return path
        self.chunked_topk = True
        return data

    def _graph_steps(
        self,
        config: RuntimeConfig,
        graph: Path | bytes,
        path: Path,
        opts: ort.SessionOptions,
        names: tuple,
    ) -> GraphSteps | None:
        """The fixed-buffer steps of ``config.cuda_graphs`` (None: plain steps only)."""
        mode = config.cuda_graphs
        if mode == "on" and not self.io_binding:
            raise BundleRuntimeError(
                "--cuda-graphs on needs the decode state on the device: add --io-binding on"
            )
        if mode == "off" or (mode == "auto" and not (self.io_binding and self.device == "cuda")):
            return None
        dims = static_state_dims(self.decoder, names)
        if dims is None:
            if mode == "on":
                raise BundleRuntimeError(
                    "--cuda-graphs on: this bundle has a decoder state as wide as the source "
                    "(coverage), which fixed buffers cannot hold; serve it with --cuda-graphs off"
                )
            log.info("CUDA graphs off: a decoder state is as wide as the source (coverage)")
            return None
        capture = self.device == "cuda"
        session = self.decoder
        if capture:  # a session of its own: a failed capture leaves the plain one as it was
            session = _session(graph, opts, [CUDA_GRAPH_PROVIDER], path)
        return GraphSteps(
            session,
            self.device,
            names,
            dims,
            self._graphs.copy_rows,
            self.stats,
            capture=capture,
        )

    def _greedy_sessions(
        self,
        config: RuntimeConfig,
        steps: int,
        graph: Path | bytes,
        path: Path,
        opts: ort.SessionOptions,
        providers: list,
        target: tuple[SpecialIds, int],
    ) -> None:
        """The sessions of :mod:`service.greedysteps` (their single-threaded twin as for
        the decoder, their fixed buffers as for the decoder's CUDA graphs); a decoder
        that cannot be composed keeps one step a call."""
        special, vocab_size = target
        name = Path(f"{path.stem}-{steps}-greedy-steps")
        try:
            one = graph if isinstance(graph, bytes) else path.read_bytes()
            data = greedysteps.compose(one, steps, self.state_names, special, vocab_size)
            greedy = _session(data, opts, providers, name)
            greedy_1 = greedy
            if self._decoder_1 is not self.decoder:
                greedy_1 = _session(data, config.session_options(threads=1), providers, name)
        except (greedysteps.ComposeError, BundleRuntimeError) as exc:
            # a bundle this cannot compose still serves, one step a call
            log.warning("greedy steps: one a decoder call (%s)", exc)
            return
        graph_steps = None
        if self.graph_steps is not None:
            try:
                session = greedy
                if self.graph_steps.capture:  # a session of its own, as for the decoder
                    session = _session(data, opts, [CUDA_GRAPH_PROVIDER], name)
                graph_steps = GraphSteps.sharing(self.graph_steps, session, steps=steps)
            except BundleRuntimeError as exc:  # the steps still run, bound
                log.warning("greedy steps: no CUDA graphs for them (%s)", exc)
        self._greedy, self._greedy_1 = greedy, greedy_1
        self.greedy_graph_steps = graph_steps
        self.greedy_steps = steps
        self._greedy_out = greedysteps.outputs(self.state_names)

    def _encoder_graphs(
        self, config: RuntimeConfig, path: Path, names: tuple, pad_id: int
    ) -> EncoderGraphs | None:
        """Fixed-shape encoder calls beside the decoder's graph steps (None: plain calls
        only). Not for an encoder that reads padding as input: it encodes per length."""
        if self.graph_steps is None or self.exact_lengths:
            return None
        outputs = spec.encoder_outputs(names)
        layout = encoder_layout(self.encoder, outputs)
        if layout is None:
            log.info("encoder graphs off: the encoder's axes are not both free dimensions")
            return None
        device, providers = self.device, self.encoder.get_providers()

        def make(dims: dict[str, int], capture: bool) -> ort.InferenceSession:
            options = config.session_options()
            for name, size in dims.items():
                options.add_free_dimension_override_by_name(name, size)
            if capture:
                return _session(path, options, [CUDA_GRAPH_PROVIDER])
            return _session(path, options, providers)

        def plain(ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
            return self.encoder.run(outputs, {spec.SRC_IDS: ids, spec.SRC_LENGTHS: lengths})

        # prepared (on CUDA: captured) by the first thread that encodes, in the warm-up
        return EncoderGraphs(
            make, plain, layout, device, pad_id, self.stats, capture=self.graph_steps.capture
        )

    def new_pool(self) -> MemoryPool | DevicePool:
        """The memory pool a decode loop over this model keeps its sentences in: on the
        device under IO binding (in fixed, bucketed buffers for CUDA graphs), host
        arrays otherwise."""
        if not self.io_binding:
            return MemoryPool()
        return DevicePool(self._graphs, fixed=self.graph_steps is not None)

    def encode(self, src_ids: np.ndarray, src_lengths: np.ndarray) -> Encoded:
        """Encode ``src_ids`` ``(batch, src_len)`` with true ``src_lengths`` ``(batch,)``;
        under IO binding the outputs stay on the device (:class:`DeviceState`)."""
        if self.exact_lengths and (
            src_ids.shape[1] != int(src_lengths.max()) or int(src_lengths.min()) != src_ids.shape[1]
        ):
            return self._encode_by_length(src_ids, src_lengths)
        return self._encode(src_ids, src_lengths, on_device=self.io_binding)

    def _encode_by_length(self, src_ids: np.ndarray, src_lengths: np.ndarray) -> Encoded:
        """Encode each group of equal length without padding, then pad the outputs back
        into one batch (memory and keys zero, mask false past each length)."""
        batch, width = src_ids.shape
        parts = []
        for n in np.unique(src_lengths):
            rows = np.flatnonzero(src_lengths == n)
            enc = self._encode(src_ids[rows, :n], src_lengths[rows], on_device=False)
            parts.append((rows, int(n), enc))
        first = parts[0][2]

        def empty(a: np.ndarray, dims: tuple) -> np.ndarray:
            return np.zeros(dims + a.shape[2:] if a.ndim > 2 else dims, dtype=a.dtype)

        memory = empty(first.memory, (batch, width))
        keys = empty(first.keys, (batch, width))
        mask = np.zeros((batch, width), dtype=first.mask.dtype)
        states = [np.zeros((batch,) + s.shape[1:], dtype=s.dtype) for s in first.states]
        for rows, n, enc in parts:
            memory[rows, :n] = enc.memory
            keys[rows, :n] = enc.keys
            mask[rows, :n] = enc.mask
            for whole, part in zip(states, enc.states, strict=True):
                whole[rows] = part
        return Encoded(memory, keys, mask, tuple(states))

    def _encode(self, src_ids: np.ndarray, src_lengths: np.ndarray, *, on_device: bool) -> Encoded:
        batch = src_ids.shape[0]
        session = self.encoder if batch >= self.parallel_rows else self._encoder_1
        feeds = {spec.SRC_IDS: src_ids, spec.SRC_LENGTHS: src_lengths}
        start = time.perf_counter()
        graphed = None
        if on_device and self.encoder_graphs is not None:
            with self._encoder_lock:  # not while a decoder step captures a CUDA graph
                graphed = self.encoder_graphs.run(src_ids, src_lengths)
        if graphed is not None:  # views of a fixed output set, as wide as its bucket
            memory, keys, mask, states = graphed.memory, graphed.keys, graphed.mask, graphed.states
        elif on_device:
            binding = session.io_binding()
            for name, value in feeds.items():
                binding.bind_cpu_input(name, np.ascontiguousarray(value))
            for name in self._enc_out:
                binding.bind_output(name, self.device)
            with self._encoder_lock:  # not while a decoder step captures a CUDA graph
                session.run_with_iobinding(binding)
            memory, keys, mask, *states = (DeviceState(v) for v in binding.get_outputs())
        else:
            with self._encoder_lock:
                memory, keys, mask, *states = session.run(self._enc_out, feeds)
        stats = self.stats
        stats.encoder_seconds += time.perf_counter() - start
        stats.encoder_calls += 1
        stats.sentences_encoded += batch
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
        eos_mask: np.ndarray | None = None,
    ) -> StepOutput | GreedyStepsOutput:
        """One decoder step; shapes as in :mod:`export.spec`. With ``eos_mask`` ``(rows,
        greedy_steps, K + 1)`` bool: :attr:`greedy_steps` greedy steps in one call
        (:mod:`service.greedysteps`; ``top_k`` is then Greedy.K)."""
        feeds = {
            spec.PREV_TOKENS: prev_tokens,
            spec.PARENT_ROWS: parent_rows,
            spec.ROW_SENTENCE: row_sentence,
            spec.MEMORY: memory,
            spec.KEYS: keys,
            spec.SRC_MASK: mask,
        }
        for name, state in zip(self.state_names, states, strict=True):
            feeds[name] = state
        rows = prev_tokens.shape[0]
        start = time.perf_counter()
        if eos_mask is not None:
            feeds[greedysteps.EOS_MASK] = eos_mask
            feeds[greedysteps.OWN_ROWS] = np.arange(rows, dtype=np.int64)
            session = self._greedy if rows >= self.parallel_rows else self._greedy_1
            if self.io_binding:
                steps = self.greedy_graph_steps
                graphed = steps.run(feeds) if steps is not None else None
                out = graphed or self._run_bound(session, feeds, self._greedy_out)
            else:
                out = session.run(self._greedy_out, feeds)
            tokens, log_probs, attention, *new_states = out
            self._count(start, rows, eos_mask.shape[1], mask.shape[1])
            return GreedyStepsOutput(tokens, log_probs, attention, tuple(new_states))
        top = self._top_k.get(top_k)
        if top is None:
            top = self._top_k[top_k] = np.array([top_k], dtype=np.int64)
        feeds[spec.TOP_K] = top
        session = self.decoder if rows >= self.parallel_rows else self._decoder_1
        if self.io_binding:
            graphed = self.graph_steps.run(feeds) if self.graph_steps is not None else None
            out = graphed or self._run_bound(session, feeds, self._dec_out)
            values, ids, eos, attention, *new_states = out
        else:
            values, ids, eos, attention, *new_states = session.run(self._dec_out, feeds)
        self._count(start, rows, 1, mask.shape[1])
        return StepOutput(values, ids, eos, attention, tuple(new_states))

    def _count(self, start: float, rows: int, steps: int, width: int) -> None:
        """A decoder call begun at ``start`` of ``steps`` steps over ``rows`` rows, each
        attending over ``width`` source positions, in :attr:`stats`."""
        stats = self.stats
        stats.decoder_seconds += time.perf_counter() - start
        stats.decoder_calls += 1
        stats.decoder_steps += steps
        stats.decoder_rows += rows * steps
        stats.decoder_row_positions += rows * steps * width

    def _run_bound(self, session: ort.InferenceSession, feeds: dict, names: list) -> list:
        """One decoder call through IO binding: the pool bound where it lies
        (:class:`service.devicepool.DeviceSlice`), states as :class:`DeviceState` left on
        the device, host outputs (``names`` before the states: top-k, EOS and attention,
        or the greedy steps' tokens, log-probs and attention) as numpy arrays."""
        binding = session.io_binding()
        for name, value in feeds.items():
            bind_input(binding, name, value)
        n_host = len(names) - len(self.state_names)
        for i, name in enumerate(names):
            binding.bind_output(name, "cpu" if i < n_host else self.device)
        session.run_with_iobinding(binding)
        outputs = binding.get_outputs()
        host = [value.numpy() for value in outputs[:n_host]]
        return host + [DeviceState(value) for value in outputs[n_host:]]
