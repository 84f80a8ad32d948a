"""Encoder calls on fixed-shape sessions, replayed from CUDA graphs on CUDA
(:class:`EncoderGraphs`; with :mod:`service.cudagraphs`' decoder steps, ``--cuda-graphs``).

Why: on an H100 an encoder call is host-bound. ``python -m loadtest.stepbench --device
cuda`` measured 1.36-2.36 ms a call at 8-128 sentences for 0.22-0.38 ms of kernels (101-134
of them: cuDNN's GRU cell and GEMV kernels step by step), and at 256 greedy clients the
encoder thread spent 1.41 s in ONNX Runtime against the decoder's 0.82 s: the encoder, not
the decoder, bounded the service. A CUDA graph launches all of a call's kernels at once.

ONNX Runtime captures no graph that has an ``If`` node or shape ops on the CPU, and the
exported encoder has both (the trace of the bidirectional reversal). They depend on the
input's shape only: with both axes of ``src_ids`` fixed (ONNX Runtime's free-dimension
overrides) they fold into constants. So there is one session per shape bucket:

* a call of ``n`` sentences of up to ``length`` tokens runs on the session of the
  smallest batch bucket (:data:`BATCH_BUCKETS`) and width bucket (the pool's widths:
  :func:`service.devicepool.bucketed`) that hold it; the extra rows are one pad token
  long, the extra columns padding. On the CPU this gives exactly the outputs of an
  unpadded call (``tests/service/test_encodergraphs.py``), and a fixed pool is as wide
  either way (its width is the same bucket);
* the outputs are views (:class:`service.devicepool.DeviceSlice`) of the first ``n``
  rows of fixed device buffers. A bucket keeps a few output sets, each captured as a
  graph of its own: a set is used again only once nothing outside refers to its
  buffers (the pool has copied the memory, the decode loop's states have moved on), so
  outputs an admission has not yet joined are never overwritten;
* the buffers belong to the first thread that encodes (an engine's encoder thread, in
  the server's warm-up): ONNX Runtime keeps CUDA graphs per thread. On CUDA that first
  call makes and captures every bucket up to 128 tokens, two sets each
  (:meth:`EncoderGraphs.prepare`), checks each replay against a plain call on random
  lengths, and nothing is made after: a call that fits no prepared bucket, finds both
  its sets in use or comes from another thread runs the plain way. A bundle whose
  decoder states are as wide as the source (coverage), or whose encoder reads padding
  as input (``exact_lengths``), never comes here.

On the CPU provider the same sessions and buffers run without capturing, made on first
use, up to :data:`MAX_SETS` sets a bucket (how CI tests that the fixed shapes encode
exactly what the plain session does).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import onnxruntime as ort

from export import spec
from service.cudagraphs import CAPTURE_RUNS, FirstThread
from service.decoding import Encoded
from service.devicepool import DEVICE_ID, ORT_TYPES, DeviceSlice, bucketed

if TYPE_CHECKING:
    from service.sessions import RunStats

log = logging.getLogger(__name__)

# Sentences an encoder call is padded up to. Few buckets: each is a session (the
# encoder's weights once more on the device) and a set of captured graphs; on a GPU a
# call of 32 sentences cost about what one of 8 did (stepbench: 1.56 against 1.36 ms).
BATCH_BUCKETS = (8, 32, 128)
# Widths (source tokens) past this run the plain way: longer sentences are rare, and
# each width doubles the buckets' device memory.
MAX_WIDTH = 256
# Widths prepared at start-up on CUDA (:meth:`EncoderGraphs.prepare`): up to the server's
# default longest source (128 tokens); calls of longer sentences run the plain way.
PREPARED_WIDTHS = (16, 32, 64, 128)
# Output sets prepared a bucket: the engine has at most two encoded batches in hand at
# once (the one being encoded, the one being joined; tests/service/test_cudagraphs.py).
PREPARED_SETS = 2
# Seconds preparing may take (in the server's warm-up, whose translation waits 60 s):
# past them the shapes made so far serve, the smallest first.
PREPARE_SECONDS = 20.0
# How far a checked replay may be from a plain call (padding changes cuDNN's shapes, which
# rounds the last bits differently; a graph that baked its capture in is off by far more).
CHECK_ATOL = 1e-4
# Output sets a bucket keeps: one admission may encode in several length groups, all of
# them joined to the decode loop only once the last one is encoded.
MAX_SETS = 4


class _View(DeviceSlice):
    """A view of an output set's buffer, as an :class:`Encoded` carries it; the set is in
    use while any of its views is alive (in the engine's hands, or the decode loop's
    states when it took them as they were)."""

    __slots__ = ("__weakref__",)


class _OutputSet:
    """Fixed output buffers of one bucket, the binding that writes them and the run
    options naming the graph that replays it."""

    def __init__(self, values: tuple[ort.OrtValue, ...], binding, options) -> None:
        self.values = values
        self.binding = binding
        self.options = options
        self._views: weakref.WeakSet[_View] = weakref.WeakSet()

    def views(self, rows: int) -> list[_View]:
        """Views of the first ``rows`` rows of each buffer, tracked."""
        views = [_View(v, rows) for v in self.values]
        self._views.update(views)
        return views

    def in_use(self) -> bool:
        """Whether a view of an earlier call is still alive."""
        return len(self._views) > 0


class _Bucket:
    """One (batch, width) shape: its session, its input buffers and its output sets."""

    def __init__(self, session: ort.InferenceSession, batch: int, width: int, device: str):
        self.session = session
        self.batch = batch
        self.width = width
        self.ids_host = np.zeros((batch, width), dtype=np.int64)
        self.lengths_host = np.ones(batch, dtype=np.int64)
        self.ids = ort.OrtValue.ortvalue_from_numpy(self.ids_host, device, DEVICE_ID)
        self.lengths = ort.OrtValue.ortvalue_from_numpy(self.lengths_host, device, DEVICE_ID)
        self.sets: list[_OutputSet] = []


class EncoderGraphs:
    """Fixed-shape encoder calls of one bundle (see the module docstring)."""

    def __init__(
        self,
        make_session: Callable[[dict[str, int], bool], ort.InferenceSession],
        plain: Callable[[np.ndarray, np.ndarray], list[np.ndarray]],
        layout: EncoderLayout,
        device: str,
        pad_id: int,
        stats: RunStats,
        *,
        capture: bool,
    ) -> None:
        """``make_session(dims, capture)``: an encoder session with the free dimensions
        ``dims`` fixed (made with ``enable_cuda_graph`` when ``capture``); ``plain(ids,
        lengths)``: the outputs of a plain call, on the host (what :meth:`prepare` checks
        each captured bucket against); ``layout``: the encoder's axes and outputs
        (:func:`encoder_layout`)."""
        self._make = make_session
        self._plain = plain
        self.layout = layout
        self.device = device
        self.pad_id = pad_id
        self.stats = stats
        self.capture = capture
        self._buckets: dict[tuple[int, int], _Bucket] = {}
        self._owner = FirstThread()
        self.enabled = True
        self.prepared = False  # (see prepare: nothing is made after it)

    def bucket(self, sentences: int, length: int) -> tuple[int, int] | None:
        """The (batch, width) bucket of a call, None when it fits none."""
        batch = next((b for b in BATCH_BUCKETS if b >= sentences), None)
        width = bucketed(1, length)[1]
        if batch is None or width > MAX_WIDTH:
            return None
        return batch, width

    def run(self, src_ids: np.ndarray, src_lengths: np.ndarray) -> Encoded | None:
        """Encode ``src_ids`` ``(n, length)`` (true ``src_lengths`` ``(n,)``) on its
        bucket's session; the outputs are views of the first ``n`` rows of a fixed output
        set (memory, keys and mask as wide as the bucket). None when the call does not
        fit: encode it the plain way. The caller holds the device lock.

        The buffers and graphs belong to the first thread that calls (an engine's
        encoder thread, in its warm-up): ONNX Runtime keeps a CUDA graph per thread, so
        another thread would capture its own while serving, and lanes sharing the
        model would race on the buffers. Other threads' calls run the plain way, as
        :class:`service.cudagraphs.GraphSteps` does other threads' steps. On CUDA the
        owner's first call prepares every bucket (:meth:`prepare`)."""
        if not self.enabled:
            return None
        if not self._owner.mine():
            return None
        if self.capture and not self.prepared:
            self.prepare()
            if not self.enabled:
                return None
        n, length = src_ids.shape
        key = self.bucket(n, length)
        if key is None:
            return None
        try:
            bucket = self._buckets.get(key)
            if bucket is None:
                if self.prepared:
                    return None
                bucket = self._new_bucket(*key)
            out = next((s for s in bucket.sets if not s.in_use()), None)
            if out is None:
                if self.prepared or len(bucket.sets) >= MAX_SETS:
                    return None
                out = self._new_set(bucket)
            self._replay(bucket, out, src_ids, src_lengths)
        except Exception as exc:  # noqa: BLE001 - ORT's own error types (a capture refused)
            self._off(f"a fixed-shape encoder call failed: {exc}")
            return None
        self.stats.graph_encodes += 1
        memory, keys, mask, *states = out.views(n)
        return Encoded(memory, keys, mask, tuple(states))

    def _replay(self, bucket: _Bucket, out: _OutputSet, ids: np.ndarray, lengths: np.ndarray):
        n, length = ids.shape
        bucket.ids_host.fill(self.pad_id)
        bucket.ids_host[:n, :length] = ids
        bucket.lengths_host.fill(1)
        bucket.lengths_host[:n] = lengths
        bucket.ids.update_inplace(bucket.ids_host)
        bucket.lengths.update_inplace(bucket.lengths_host)
        bucket.session.run_with_iobinding(out.binding, out.options)

    def _off(self, why: str) -> None:
        log.warning("encoder graphs off: %s", why)
        self.enabled = False
        self._buckets.clear()  # their sessions and buffers go

    def prepare(self, widths: tuple[int, ...] = PREPARED_WIDTHS, sets: int = PREPARED_SETS) -> None:
        """Make (and on CUDA capture) a session and ``sets`` output sets for every batch
        bucket at each of ``widths`` now, as vLLM captures its graphs at start-up; from
        then on nothing more is made, and a call they do not hold runs the plain way.
        Made while serving, a session would stall the encoder thread, and a capture
        could collide with the decoder thread's device calls (CUDA refuses a copy or an
        allocation while another stream captures: :data:`service.cudagraphs.DEVICE_LOCK`
        keeps the encoder's calls apart, not the decoder's replays).

        Each set is then replayed on random sentences and compared with a plain call
        (:meth:`_check`): a graph that baked in something of its capture (an encoder
        whose RNN reads ``sequence_lens`` on the host, as Eole's and OpenNMT-py's
        converted bundles do) would answer the capture's lengths. A failure or a
        mismatch turns the graphs off (calls run the plain way). Preparing stops after
        :data:`PREPARE_SECONDS`, with the shapes made so far (the warm-up it runs in
        waits a minute). The caller holds the device lock."""
        start = time.perf_counter()
        rng = np.random.default_rng(0)
        shapes = [(batch, width) for width in widths for batch in BATCH_BUCKETS]
        try:
            for batch, width in shapes:
                if self._buckets and time.perf_counter() - start > PREPARE_SECONDS:
                    log.warning(
                        "encoder graphs: stopped preparing after %.0f s, %d of %d shapes "
                        "made; calls of the others run the plain way",
                        PREPARE_SECONDS,
                        len(self._buckets),
                        len(shapes),
                    )
                    break
                bucket = self._buckets.get((batch, width)) or self._new_bucket(batch, width)
                while len(bucket.sets) < sets:
                    out = self._new_set(bucket)
                    mismatch = self._check(bucket, out, rng)
                    if mismatch:
                        self._off(f"{mismatch} ({batch} sentences of {width} tokens)")
                        return
        except Exception as exc:  # noqa: BLE001 - ORT's own error types (a capture refused)
            self._off(f"preparing the fixed-shape encoder failed: {exc}")
            return
        self.prepared = True
        log.info(
            "encoder graphs: %d shapes prepared in %.1f s",
            len(self._buckets),
            time.perf_counter() - start,
        )

    def _check(self, bucket: _Bucket, out: _OutputSet, rng: np.random.Generator) -> str | None:
        """Replay ``out`` on random sentences of random lengths (ids 4-7: in every
        vocabulary) and compare it with a plain call of the same padded batch: what
        differs, or None."""
        lengths = rng.integers(1, bucket.width + 1, bucket.batch).astype(np.int64)
        ids = rng.integers(4, 8, (bucket.batch, bucket.width)).astype(np.int64)
        ids[np.arange(bucket.width) >= lengths[:, None]] = self.pad_id
        self._replay(bucket, out, ids, lengths)
        want = self._plain(ids, lengths)
        for (name, _, _), value, w in zip(self.layout.outputs, out.values, want, strict=True):
            got = value.numpy()
            if got.shape != w.shape or not np.allclose(got, w, atol=CHECK_ATOL):
                return f"a replay's {name} differs from a plain call's"
        return None

    def _new_bucket(self, batch: int, width: int) -> _Bucket:
        dims = dict(zip(self.layout.axes, (batch, width), strict=True))
        bucket = self._buckets[(batch, width)] = _Bucket(
            self._make(dims, self.capture), batch, width, self.device
        )
        log.debug("encoder session for %d sentences of up to %d tokens", batch, width)
        return bucket

    def _new_set(self, bucket: _Bucket) -> _OutputSet:
        binding = bucket.session.io_binding()
        binding.bind_ortvalue_input(spec.SRC_IDS, bucket.ids)
        binding.bind_ortvalue_input(spec.SRC_LENGTHS, bucket.lengths)
        values = []
        for name, dtype, trailing in self.layout.outputs:
            dims = [bucket.width if d is None else d for d in trailing]
            value = ort.OrtValue.ortvalue_from_shape_and_type(
                [bucket.batch, *dims], dtype, self.device, DEVICE_ID
            )
            binding.bind_ortvalue_output(name, value)
            values.append(value)
        options = None
        if self.capture:  # one graph per set, each with an id of its own
            options = ort.RunOptions()
            options.add_run_config_entry("gpu_graph_id", str(len(bucket.sets) + 1))
        out = _OutputSet(tuple(values), binding, options)
        bucket.sets.append(out)
        # ONNX Runtime runs a graph id plainly a few times before it captures it: do that
        # now, not while serving a request
        for _ in range(CAPTURE_RUNS + 1 if self.capture else 0):
            bucket.session.run_with_iobinding(binding, options)
        return out


@dataclass(frozen=True)
class EncoderLayout:
    """What fixed buffers an encoder needs: the names of ``src_ids``' (batch, src_len)
    axes, and each output's name, numpy type and dimensions past the batch (None where
    it is as long as the source)."""

    axes: tuple[str, str]
    outputs: tuple[tuple[str, type, tuple[int | None, ...]], ...]


def encoder_layout(session: ort.InferenceSession, names: list[str]) -> EncoderLayout | None:
    """``session``'s layout, its outputs in the order ``names`` (memory, keys, mask,
    states), None when its axes are not both symbolic or an output has a
    dimension a free-dimension override would not fix (nothing fixed buffers can hold)."""
    shape = next(i.shape for i in session.get_inputs() if i.name == spec.SRC_IDS)
    if len(shape) != 2 or not all(isinstance(d, str) for d in shape) or shape[0] == shape[1]:
        return None
    batch, src_len = shape
    by_name = {o.name: o for o in session.get_outputs()}
    outputs = []
    for o in (by_name[name] for name in names):
        if o.type not in ORT_TYPES or not o.shape or o.shape[0] != batch:
            return None
        trailing = tuple(None if d == src_len else d for d in o.shape[1:])
        if not all(d is None or isinstance(d, int) for d in trailing):
            return None
        outputs.append((o.name, ORT_TYPES[o.type], trailing))
    return EncoderLayout((batch, src_len), tuple(outputs))
