"""ONNX Runtime sessions for one bundle: the module that talks to ORT (with
:mod:`service.devicepool`, the decode state it keeps on the device under IO binding)."""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from export import spec
from service import forced, greedysteps, poolwidth, topk
from service.cudagraphs import DEVICE_LOCK, GraphSteps, static_state_dims
from service.decoding import Encoded, GreedyStepsOutput, SpecialIds, StepOutput
from service.devicepool import DeviceGraphs, DevicePool, DeviceState, bind_input
from service.encodergraphs import EncoderGraphs, encoder_layout
from service.pool import MemoryPool
from service.sessions import (
    CUDA_GRAPH_PROVIDER,
    HOST_GREEDY_STEPS,
    PROVIDER_ALIASES,
    BundleRuntimeError,
    RunStats,
    RuntimeConfig,
    check_io,
    open_session,
    usable_cpus,
    usable_providers,
)

log = logging.getLogger(__name__)


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
        self.encoder = open_session(enc_path, opts, providers)
        # the decoder as served: its file, or that graph rewritten (bytes); ``dec_graph``
        # without the forced tokens' output, which the composed graphs do without
        dec_graph, served = self._decoder_graphs(config, dec_path, providers, target)
        self.decoder = open_session(served, opts, providers, dec_path)
        # Single-threaded twins for small batches (CPU only; see RuntimeConfig).
        self.parallel_rows = 0
        self._encoder_1, self._decoder_1 = self.encoder, self.decoder
        threads = config.intra_op_threads or usable_cpus()
        if (
            self.decoder.get_providers()[0] == "CPUExecutionProvider"
            and threads > 1
            and config.parallel_rows > 0
        ):
            single = config.session_options(threads=1)
            self._encoder_1 = open_session(enc_path, single, providers)
            self._decoder_1 = open_session(served, single, providers, dec_path)
            self.parallel_rows = config.parallel_rows
        check_io(self.encoder, enc_path, spec.encoder_inputs(), spec.encoder_outputs(state_names))
        forced_out = [] if self.forcing_error else [forced.STEP_LOG_PROBS]
        check_io(
            self.decoder,
            dec_path,
            spec.decoder_inputs(state_names),
            spec.decoder_outputs(state_names) + forced_out,
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
            self.device, lambda path: open_session(Path(path), copy_options, providers)
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

    def _decoder_graphs(
        self,
        config: RuntimeConfig,
        path: Path,
        providers: list,
        target: tuple[SpecialIds, int] | None,
    ) -> tuple[Path | bytes, Path | bytes]:
        """The decoder's graph as the composed graphs start from, and as served: each
        ``path`` itself, or its graph rewritten (serialized): the top-k in two levels
        (``config.chunked_topk``, :mod:`service.topk`), and in the served one the forced
        tokens' output (:mod:`service.forced`; :attr:`forcing_error` says why not). First
        its attention's sums over the source are made independent of the pool's width
        (:mod:`service.poolwidth`: a sentence's numbers then do not depend on what it is
        decoded beside)."""
        data, rewritten = poolwidth.width_invariant(path.read_bytes())
        served: Path | bytes = data if rewritten else path
        if rewritten:
            log.debug("decoder: %d sum(s) over the source made width-invariant", rewritten)
        try:
            forcing: bytes | None = forced.exposed(data)
            self.forcing_error: str | None = None
        except forced.ForcedError as exc:
            forcing, self.forcing_error = None, str(exc)
            log.warning(
                "forced tokens unscored: %s (target prefixes, constraints and Score refused)", exc
            )
        self.chunked_topk = False
        mode = config.chunked_topk
        first = providers[0] if isinstance(providers[0], str) else providers[0][0]
        if target is None or mode == "off" or (mode == "auto" and first != "CPUExecutionProvider"):
            return served, served if forcing is None else forcing
        try:
            chunked = topk.chunked(data, target[1])
            if forcing is not None:
                forcing = topk.chunked(forcing, target[1])
        except topk.TopKError as exc:  # exact or not at all: the bundle's own TopK serves
            log.log(logging.WARNING if mode == "on" else logging.INFO, "top-k: one TopK (%s)", exc)
            return served, served if forcing is None else forcing
        self.chunked_topk = True
        return chunked, chunked if forcing is None else forcing

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
            session = open_session(graph, opts, [CUDA_GRAPH_PROVIDER], path)
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
            greedy = open_session(data, opts, providers, name)
            greedy_1 = greedy
            if self._decoder_1 is not self.decoder:
                greedy_1 = open_session(data, config.session_options(threads=1), providers, name)
        except (greedysteps.ComposeError, BundleRuntimeError) as exc:
            # a bundle this cannot compose still serves, one step a call
            log.warning("greedy steps: one a decoder call (%s)", exc)
            return
        graph_steps = None
        if self.graph_steps is not None:
            try:
                session = greedy
                if self.graph_steps.capture:  # a session of its own, as for the decoder
                    session = open_session(data, opts, [CUDA_GRAPH_PROVIDER], name)
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
                return open_session(path, options, [CUDA_GRAPH_PROVIDER])
            return open_session(path, options, providers)

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
        log_probs: bool = False,
    ) -> StepOutput | GreedyStepsOutput:
        """One decoder step; shapes as in :mod:`export.spec`. With ``eos_mask`` ``(rows,
        greedy_steps, K + 1)`` bool: :attr:`greedy_steps` greedy steps in one call
        (:mod:`service.greedysteps`; ``top_k`` is then Greedy.K). ``log_probs``: also
        every row's log-probs (:attr:`StepOutput.log_probs`; forced tokens need them:
        :mod:`service.forced`)."""
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
        names = self._dec_out
        if log_probs:
            if self.forcing_error is not None:  # requests are refused before (EngineFront)
                raise BundleRuntimeError(f"this model cannot force tokens: {self.forcing_error}")
            # host outputs first, then the states (_run_bound's order)
            names = names[:4] + [forced.STEP_LOG_PROBS] + names[4:]
        if self.io_binding:
            graphed = None
            if self.graph_steps is not None and not log_probs:
                graphed = self.graph_steps.run(feeds)
            out = graphed or self._run_bound(session, feeds, names)
        else:
            out = session.run(names, feeds)
        values, ids, eos, attention, *new_states = out
        every = new_states.pop(0) if log_probs else None
        self._count(start, rows, 1, mask.shape[1])
        return StepOutput(values, ids, eos, attention, tuple(new_states), every)

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
