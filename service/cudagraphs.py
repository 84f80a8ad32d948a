"""Decoder steps replayed from CUDA graphs (:class:`GraphSteps`; IO binding mode of
:class:`service.runtime.OnnxModel`, on CUDA by default).

Why: under load on an H100 a decoder step of ~130 rows took ~1.1 ms of wall time for
~0.2 ms of kernels (``python -m loadtest.stepbench``'s graph column): the rest is ONNX
Runtime launching a few dozen small kernels one by one. A CUDA graph replays all of
them with one launch. Measured on an H200 (README, "CUDA graphs in the runtime"): a step
alone 0.24-0.30 ms against 0.45-0.47 ms plain, one client's p50 14-20 % lower; under
load the replay shares the GPU with the encoder thread's calls (0.84 ms a replay at 256
greedy clients) and the service's throughput stayed within noise of plain steps.

A graph bakes in every address and shape it was captured with, so a step runs on fixed
buffers only:

* rows are padded up to a bucket (:data:`ROW_BUCKETS`); a padded row decodes token 0
  from state row 0 of slot 0, and its outputs are never read;
* the pool is bound whole (capacity x width, not its first ``slots`` slots):
  :class:`service.devicepool.DevicePool` rounds its capacity and width to powers of two
  and keeps two buffer sets per shape for its life, so the same few buffer sets recur;
* decoder states live in two fixed buffers per state (rows = the largest bucket): a
  step reads one and writes the other (ping-pong); a state that is no view of them
  (fresh from the encoder, joined on an admission) is copied into one first;
* the three index vectors go up in one copy (one ``(3, bucket)`` buffer); top-k, EOS
  log-probs and attention come down from fixed device buffers.

The composed graph of several greedy steps (:mod:`service.greedysteps`) runs the same
way, on a :class:`GraphSteps` of its own that shares the decoder's state buffers and
owning thread (:meth:`GraphSteps.sharing`): its index buffer has a fourth row (the
identity rows of every copy after the first), its EOS mask goes up into a fixed
``(bucket, steps, K + 1)`` buffer, and tokens, log-probs and attention of every step come
down. A batch that switches between single and several steps (a beam request joins or
leaves) keeps its states where they are.

One graph id names one (bucket, top_k, pool buffers, input parity); ONNX Runtime
captures it within its first few runs (:data:`CAPTURE_RUNS`, under :data:`DEVICE_LOCK`)
and replays it afterwards. A step that does not fit
(more rows than the largest bucket, states on the host, another thread's step) runs
as before, uncaptured.

On the CPU provider the same buffers and bindings run as plain steps (there is nothing
to capture): that is how CI checks that bucketed, ping-ponged steps decode exactly what
the plain path decodes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import onnxruntime as ort

from export import spec
from service import greedysteps
from service.devicepool import DEVICE_ID, ORT_TYPES, DeviceSlice, DeviceState, bind_output

if TYPE_CHECKING:
    from service.sessions import RunStats

log = logging.getLogger(__name__)

# Row counts a step is padded up to. Powers of two keep the number of graphs small;
# the waste (up to half the rows) costs little on a GPU, where a step of 256 rows took
# about what one of 128 took (stepbench).
ROW_BUCKETS = (8, 16, 32, 64, 128, 256, 512, 1024)
# Runs of a new graph id that may capture it: ONNX Runtime runs a graph id plainly a
# few times before it captures (kernels warmed up, allocations settled).
CAPTURE_RUNS = 4
# Held while a graph may be capturing, and by every encoder run (of any model in this
# process): CUDA refuses other threads' synchronous calls (a copy, an allocation) while
# a stream captures, and such a call would break the capture.
DEVICE_LOCK = threading.Lock()
# Captured graphs kept at most, by each GraphSteps (the decoder's and that of its greedy
# steps); steps needing another run uncaptured (each graph holds its kernels' parameters;
# a pool that keeps changing shape must not grow this forever).
MAX_GRAPHS = 512
_INDEX_INPUTS = (spec.PREV_TOKENS, spec.PARENT_ROWS, spec.ROW_SENTENCE)


class FirstThread:
    """The thread that fixed buffers belong to: the first that asks. ONNX Runtime keeps a
    CUDA graph per thread, and two decode loops (lanes) would race on the buffers, so
    other threads run the plain way. The thread itself is kept, not its ident, which may
    be reused once the thread ends."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None

    def mine(self) -> bool:
        """Whether the calling thread is the owner (the first caller becomes it)."""
        thread = threading.current_thread()
        if self.thread is None:
            self.thread = thread
        return self.thread is thread


def static_state_dims(session: ort.InferenceSession, names: tuple[str, ...]) -> dict | None:
    """Each state's trailing dimensions, or None when one is not fixed by the graph (a
    coverage state is as wide as the source: its buffers could not be fixed)."""
    dims = {}
    for i in session.get_inputs():
        if i.name in names:
            if not all(isinstance(d, int) for d in i.shape[1:]):
                return None
            dims[i.name] = tuple(i.shape[1:])
    return dims


class GraphSteps:
    """Fixed-buffer decoder steps over one decoder session (see the module docstring)."""

    def __init__(
        self,
        session: ort.InferenceSession,
        device: str,
        state_names: tuple[str, ...],
        state_dims: dict[str, tuple[int, ...]],
        copy_rows: Callable[[object, DeviceSlice], None],
        stats: RunStats,
        *,
        capture: bool,
        max_rows: int = ROW_BUCKETS[-1],
        steps: int = 1,
        _shared: GraphSteps | None = None,
    ) -> None:
        """``session``: made with ``enable_cuda_graph`` when ``capture``; ``copy_rows(x,
        target)`` writes a state ``x`` into the rows of ``target`` on the device;
        ``stats``: the model's counters, where each step through the buffers is counted
        (``graph_steps`` and the ``graph_*_seconds`` of its phases); ``steps``: 1 for
        the decoder, more for its composed greedy steps (see :meth:`sharing`)."""
        self.session = session
        self.device = device
        self.state_names = state_names
        self.capture = capture
        self.buckets = tuple(b for b in ROW_BUCKETS if b <= max_rows) or (max_rows,)
        self._copy_rows = copy_rows
        self.stats = stats
        self.steps = steps
        if steps == 1:  # top-k, EOS, attention, states
            self._output_names = list(spec.decoder_outputs(state_names))
            self._index_inputs: tuple[str, ...] = _INDEX_INPUTS
        else:  # tokens, log-probs, attention (each step's), states
            self._output_names = greedysteps.outputs(state_names)
            self._index_inputs = (*_INDEX_INPUTS, greedysteps.OWN_ROWS)
        self._n_host = len(self._output_names) - len(state_names)  # outputs read on the host
        self._output_types = {o.name: ORT_TYPES[o.type] for o in session.get_outputs()}
        if _shared is not None:
            self._states, self._owner = _shared._states, _shared._owner
        else:
            rows = self.buckets[-1]
            # two fixed buffers per state (ping-pong), as many rows as the largest bucket
            state_types = [self._output_types[n] for n in self._output_names[self._n_host :]]
            self._states = tuple(
                tuple(
                    ort.OrtValue.ortvalue_from_shape_and_type(
                        [rows, *state_dims[name]], dtype, device, DEVICE_ID
                    )
                    for name, dtype in zip(state_names, state_types, strict=True)
                )
                for _ in range(2)
            )
            self._owner = FirstThread()
        self._index: dict[int, tuple[np.ndarray, ort.OrtValue]] = {}
        self._eos_mask: dict[int, tuple[np.ndarray, ort.OrtValue]] = {}
        self._top_k: dict[int, ort.OrtValue] = {}
        self._outputs: dict[tuple, list[ort.OrtValue]] = {}
        # graph key -> its binding, run options and host-bound output buffers
        self._bindings: dict[tuple, tuple[ort.IOBinding, ort.RunOptions | None, list]] = {}
        self._runs: dict[tuple, int] = {}
        self.enabled = True

    @classmethod
    def sharing(cls, decoder: GraphSteps, session: ort.InferenceSession, *, steps: int):
        """Fixed-buffer calls of ``steps`` greedy steps (``session``: the composed graph of
        :mod:`service.greedysteps`) on the state buffers and owning thread of the
        ``decoder``'s steps, so that states pass between the two without a copy and one
        decode loop only ever writes them."""
        return cls(
            session,
            decoder.device,
            decoder.state_names,
            {},
            decoder._copy_rows,
            decoder.stats,
            capture=decoder.capture,
            max_rows=decoder.buckets[-1],
            steps=steps,
            _shared=decoder,
        )

    @property
    def graphs(self) -> int:
        """Graph ids handed out so far (each captured within its first runs)."""
        return len(self._bindings)

    def bucket(self, rows: int) -> int | None:
        return next((b for b in self.buckets if b >= rows), None)

    def _parity(self, states: tuple) -> int | None:
        """Which state buffer set ``states`` are views of (from row 0), else None."""
        for parity, buffers in enumerate(self._states):
            if all(
                isinstance(x, DeviceSlice) and x.first == 0 and x.buffer is b
                for x, b in zip(states, buffers, strict=True)
            ):
                return parity
        return None

    def run(self, feeds: dict) -> list | None:
        """One decoder step of ``feeds`` (the runtime's graph inputs: index vectors and
        top-k on the host, pool views, states) through a graph; the outputs as
        :meth:`service.runtime.OnnxModel._run_bound` returns them, states as views of a
        state buffer. None when this step does not fit: run it the plain way."""
        if not self.enabled:
            return None
        if not self._owner.mine():  # the buffers belong to one decode loop
            return None
        prev = feeds[spec.PREV_TOKENS]
        rows = prev.shape[0]
        bucket = self.bucket(rows)
        pool = (feeds[spec.MEMORY], feeds[spec.KEYS], feeds[spec.SRC_MASK])
        states = tuple(feeds[name] for name in self.state_names)
        if bucket is None or not all(isinstance(x, DeviceSlice) and x.first == 0 for x in pool):
            return None
        parity = self._parity(states)
        if parity is None:
            if not all(isinstance(x, DeviceState | DeviceSlice) for x in states):
                return None  # host states (a bundle encoded per length): plain step
            if states[0].shape[0] > self.buckets[-1]:
                return None
            parity = 0
            for x, buffer in zip(states, self._states[0], strict=True):
                self._copy_rows(x, DeviceSlice(buffer, x.shape[0]))
        top_k = int(feeds[spec.TOP_K][0]) if self.steps == 1 else 0
        buffers = tuple(x.buffer for x in pool)
        width = pool[2].buffer.shape()[1]
        key = (bucket, top_k, parity, *(b.data_ptr() for b in buffers), width)
        key += tuple(tuple(b.shape()) for b in buffers)
        bound = self._bindings.get(key)
        if bound is None:
            if len(self._bindings) >= MAX_GRAPHS:
                return None
            bound = self._bindings[key] = self._bind(bucket, top_k, parity, buffers)
        binding, options, outputs = bound
        staging, index = self._index_buffer(bucket)
        for i, name in enumerate(self._index_inputs):
            staging[i, :rows] = feeds[name]
        staging[:, rows:] = 0
        start = time.perf_counter()
        index.update_inplace(staging)
        if self.steps > 1:
            mask_staging, mask = self._mask_buffer(bucket)
            mask_staging[:rows] = feeds[greedysteps.EOS_MASK]
            mask_staging[rows:] = False
            mask.update_inplace(mask_staging)
        uploaded = time.perf_counter()
        runs = self._runs.get(key, 0)
        if not self.capture or runs >= CAPTURE_RUNS:
            self.session.run_with_iobinding(binding, options)
        else:
            try:
                with DEVICE_LOCK:
                    self.session.run_with_iobinding(binding, options)
            except Exception as exc:  # noqa: BLE001 - ORT's own error types
                # ORT could not capture this graph (a node off the GPU, an unsupported
                # op): decode without graphs from now on rather than fail every step
                what = "a decoder step" if self.steps == 1 else f"{self.steps} greedy steps"
                log.warning("CUDA graphs off for these calls: capturing %s failed: %s", what, exc)
                self.enabled = False
                return None
            self._runs[key] = runs + 1
        ran = time.perf_counter()
        host = [value.numpy()[:rows] for value in outputs]
        if self.device == "cpu":  # numpy() of a host OrtValue is its buffer: the next step's
            host = [x.copy() for x in host]
        stats = self.stats
        stats.graph_steps += 1
        stats.graph_upload_seconds += uploaded - start
        stats.graph_run_seconds += ran - uploaded
        stats.graph_download_seconds += time.perf_counter() - ran
        out_states = [DeviceSlice(b, rows) for b in self._states[1 - parity]]
        return host + out_states

    def _index_buffer(self, bucket: int) -> tuple[np.ndarray, ort.OrtValue]:
        found = self._index.get(bucket)
        if found is None:
            staging = np.zeros((len(self._index_inputs), bucket), dtype=np.int64)
            found = self._index[bucket] = (staging, self._upload_buffer(staging))
        return found

    def _mask_buffer(self, bucket: int) -> tuple[np.ndarray, ort.OrtValue]:
        """The greedy steps' EOS mask of one bucket: host staging and its device copy."""
        found = self._eos_mask.get(bucket)
        if found is None:
            staging = np.zeros((bucket, self.steps, greedysteps.CANDIDATES), dtype=bool)
            found = self._eos_mask[bucket] = (staging, self._upload_buffer(staging))
        return found

    def _upload_buffer(self, staging: np.ndarray) -> ort.OrtValue:
        """A buffer of ``staging``'s shape and type on the device, which ``update_inplace``
        fills: allocated by ORT, never a view of ``staging`` (on the CPU, an OrtValue made
        from a numpy array is that array, so a missing upload would go unnoticed in CI)."""
        value = ort.OrtValue.ortvalue_from_shape_and_type(
            list(staging.shape), staging.dtype.type, self.device, DEVICE_ID
        )
        value.update_inplace(staging)
        return value

    def _bind(self, bucket: int, top_k: int, parity: int, pool: tuple) -> tuple:
        """The binding of one graph: every input and output at a fixed address (the
        host-bound outputs' buffers shared by the graphs of one bucket, top-k, parity and
        width)."""
        binding = self.session.io_binding()
        _, index = self._index_buffer(bucket)
        base = index.data_ptr()
        for i, name in enumerate(self._index_inputs):
            binding.bind_input(
                name, self.device, DEVICE_ID, np.int64, [bucket], base + 8 * i * bucket
            )
        for name, buffer in zip((spec.MEMORY, spec.KEYS, spec.SRC_MASK), pool, strict=True):
            binding.bind_ortvalue_input(name, buffer)
        if self.steps > 1:
            binding.bind_ortvalue_input(greedysteps.EOS_MASK, self._mask_buffer(bucket)[1])
        else:
            k = self._top_k.get(top_k)
            if k is None:  # TopK reads k on the host
                k = self._top_k[top_k] = ort.OrtValue.ortvalue_from_numpy(
                    np.array([top_k], dtype=np.int64)
                )
            binding.bind_ortvalue_input(spec.TOP_K, k)
        for name, buffer in zip(self.state_names, self._states[parity], strict=True):
            binding.bind_ortvalue_input(name, buffer)
        width = pool[2].shape()[1]
        out_key = (bucket, top_k, parity, width)
        outputs = self._outputs.get(out_key)
        n_host = self._n_host
        if outputs is None:
            if self.steps > 1:  # tokens, log-probs, attention of every step
                shapes = ([bucket, self.steps], [bucket, self.steps], [bucket, self.steps, width])
            else:  # top-k values and ids, EOS, attention
                shapes = ([bucket, top_k], [bucket, top_k], [bucket], [bucket, width])
            outputs = self._outputs[out_key] = [
                ort.OrtValue.ortvalue_from_shape_and_type(
                    shape, self._output_types[name], self.device, DEVICE_ID
                )
                for shape, name in zip(shapes, self._output_names[:n_host], strict=True)
            ]
        for name, value in zip(self._output_names[:n_host], outputs, strict=True):
            binding.bind_ortvalue_output(name, value)
        for name, buffer in zip(self._output_names[n_host:], self._states[1 - parity], strict=True):
            bind_output(binding, name, DeviceSlice(buffer, bucket))
        # No run options when nothing is captured: ORT's Python looks the graph id up in
        # them on every run, raising and catching an error when it is missing.
        options = None
        if self.capture:
            options = ort.RunOptions()
            options.add_run_config_entry("gpu_graph_id", str(len(self._bindings) + 1))
        return binding, options, outputs
