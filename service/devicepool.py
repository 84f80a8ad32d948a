"""Decode state that stays on the execution device (IO binding mode of
:class:`service.runtime.OnnxModel`; on CUDA by default).

A :class:`DevicePool` is the :class:`service.pool.MemoryPool` of a loop whose model runs
with IO binding: the same slots and the same rules (:class:`service.loop.DecodeLoop`
compacts it exactly as the host pool), but the buffers are ONNX Runtime values on the
device and every change is made there by a tiny graph (:mod:`service.devicegraphs`):

* admitting sentences writes *only their slots*: the encoder's outputs, already on the
  device, are padded to the pool's width straight into the spare slots (the decoder
  binds the pool's first ``slots`` slots by address, so nothing else moves);
* growing or compacting gathers the live slots into new device buffers;
* the rows of new sentences are joined to the decoder states on the device.

So per step only the small index inputs go up and top-k, EOS log-probs and attention
come down (an admission also reads the new sentences' mask back, for their lengths, and
a coverage state of another width is joined on the host); before, the host pool was
uploaded whole whenever an admission changed it, which on an H100 cost 1.4-2.9x a plain
step (``python -m loadtest.stepbench``).

Every graph runs in its own session, each with its own CUDA stream: the buffers one
session writes are complete when another reads them because ONNX Runtime waits for a
session's stream at the end of every ``run`` (never set the run option
``disable_synchronize_execution_providers``). Old buffers are dropped only after their
live slots were copied out, and a :class:`DeviceSlice` keeps its buffer alive.

The CPU provider runs the same code (its "device" is host memory), which is how CI
checks that the decoded output is exactly the host pool's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnxruntime as ort

from service.devicegraphs import RESLOT_OUTPUTS, graph_path, reslot_feeds
from service.pool import grown_capacity, join_rows, rebuilt_capacity

# The device everything is bound on: sessions run on the provider's default device (the
# runtime configures no other; CUDA_VISIBLE_DEVICES picks the GPU).
DEVICE_ID = 0
# ONNX Runtime's type names of the tensors kept or bound on the device -> numpy types
ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(bool)": np.bool_,
    "tensor(int64)": np.int64,
}


def _host(host: np.ndarray, dtype, copy) -> np.ndarray:
    """``__array__``'s answer for a device tensor read into ``host``: of ``dtype``, and a
    copy when asked (on the CPU provider ``numpy()`` is the buffer itself, which
    ``np.array(x)`` must not alias)."""
    host = host if dtype is None else host.astype(dtype, copy=False)
    return host.copy() if copy else host


class DeviceState:
    """A tensor that ONNX Runtime keeps on its device (a decoder state between steps, an
    encoder output on its way into the pool).

    The decode loop treats states as arrays; ``shape``, ``dtype`` and ``__array__`` (a
    device-to-host copy) cover what it reads, so they come to the host only when
    something really needs their values.
    """

    __slots__ = ("value",)

    def __init__(self, value: ort.OrtValue) -> None:
        self.value = value

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape())

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(ORT_TYPES[self.value.data_type()])

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if copy is False:
            raise ValueError("a device tensor can only be read by copying it to the host")
        return _host(self.value.numpy(), dtype, copy)


class DeviceSlice:
    """The first ``shape[0]`` slots (from ``first``) of a pool buffer, bound by address."""

    __slots__ = ("buffer", "shape", "dtype", "first")

    def __init__(self, buffer: ort.OrtValue, rows: int, first: int = 0) -> None:
        self.buffer = buffer
        self.shape = (rows, *buffer.shape()[1:])
        self.dtype = np.dtype(ORT_TYPES[buffer.data_type()])
        self.first = first

    @property
    def address(self) -> int:
        row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        return self.buffer.data_ptr() + self.first * row_bytes

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if copy is False:
            raise ValueError("a device tensor can only be read by copying it to the host")
        return _host(self.buffer.numpy()[self.first : self.first + self.shape[0]], dtype, copy)


def bind_input(binding: ort.IOBinding, name: str, x) -> None:
    """Bind ``x``: a pool slice by address, a device tensor as it is, a host array (ORT
    copies it to the device)."""
    if isinstance(x, DeviceSlice):
        buffer = x.buffer
        binding.bind_input(
            name, buffer.device_name(), DEVICE_ID, x.dtype.type, list(x.shape), x.address
        )
    elif isinstance(x, DeviceState):
        binding.bind_ortvalue_input(name, x.value)
    else:
        binding.bind_cpu_input(name, np.ascontiguousarray(x))


def bind_output(binding: ort.IOBinding, name: str, target: DeviceSlice) -> None:
    """Have ``name`` written straight into ``target``'s slots."""
    binding.bind_output(
        name,
        target.buffer.device_name(),
        DEVICE_ID,
        target.dtype.type,
        list(target.shape),
        target.address,
    )


class DeviceGraphs:
    """The sessions of the device graphs, per float type (:meth:`prepare`)."""

    def __init__(self, device: str, make_session: Callable[[str], ort.InferenceSession]):
        """``make_session(path)``: a session on the model's provider (the runtime's
        options, one thread: these graphs only copy memory)."""
        self.device = device
        self._make = make_session
        self._sessions: dict[tuple[str, str], ort.InferenceSession] = {}

    def prepare(self, dtype: np.dtype) -> None:
        """Make every graph's session for ``dtype`` now: made on first use, a session
        would be set up (on CUDA: its provider, cuBLAS) in the middle of serving."""
        for kind in ("reslot", "concat"):
            self.session(kind, dtype)

    def session(self, kind: str, dtype: np.dtype) -> ort.InferenceSession:
        key = (kind, np.dtype(dtype).name)
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = self._make(str(graph_path(kind, dtype)))
        return session

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> ort.OrtValue:
        return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, self.device, DEVICE_ID)

    def reslot(self, arrays: tuple, index: np.ndarray, width: int, targets: tuple) -> None:
        """Write ``arrays`` (memory, keys, mask: slices, device tensors or host arrays)
        gathered at ``index`` and fitted to ``width`` columns into ``targets``."""
        session = self.session("reslot", arrays[0].dtype)
        binding = session.io_binding()
        for name, x in zip(("memory", "keys", "mask"), arrays, strict=True):
            bind_input(binding, name, x)
        for name, value in reslot_feeds(index, width, arrays[2].shape[1]).items():
            binding.bind_cpu_input(name, value)
        for name, target in zip(RESLOT_OUTPUTS, targets, strict=True):
            bind_output(binding, name, target)
        session.run_with_iobinding(binding)

    def copy_rows(self, x, target: DeviceSlice) -> None:
        """Write ``x`` (a state: device tensor or slice) into ``target``'s rows (the
        fixed state buffers of :class:`service.cudagraphs.GraphSteps`): ``x`` joined to
        no rows."""
        self.concat(np.zeros((0, *x.shape[1:]), dtype=x.dtype), x, into=target)

    def concat(self, a, b, *, into: DeviceSlice | None = None) -> DeviceState | None:
        """Rows of ``a`` then rows of ``b`` (same trailing shape), left on the device:
        written into ``into``'s rows when given, else returned as a new tensor."""
        session = self.session("concat", b.dtype)
        binding = session.io_binding()
        bind_input(binding, "a", a)
        bind_input(binding, "b", b)
        if into is not None:
            bind_output(binding, "joined", into)
        else:
            binding.bind_output("joined", self.device)
        session.run_with_iobinding(binding)
        return None if into is not None else DeviceState(binding.get_outputs()[0])


def bucketed(capacity: int, width: int) -> tuple[int, int]:
    """The shape a fixed-buffer pool allocates for ``capacity`` slots of ``width``
    columns: each a power of two, at least :data:`MIN_BUCKET_SLOTS` slots and
    :data:`MIN_BUCKET_WIDTH` columns (few shapes, so few graphs to capture)."""
    cap = max(MIN_BUCKET_SLOTS, 1 << (capacity - 1).bit_length())
    return cap, max(MIN_BUCKET_WIDTH, 1 << (width - 1).bit_length())


# Fixed-buffer pools (CUDA graphs, :mod:`service.cudagraphs`): shapes come in buckets and
# each shape has two buffer sets (a compaction moves from one to the other), kept for the
# pool's life, so a graph always finds its pool where it was captured.
MIN_BUCKET_SLOTS = 64
MIN_BUCKET_WIDTH = 16


class DevicePool:
    """:class:`service.pool.MemoryPool`'s interface over device buffers; ``memory``,
    ``keys`` and ``mask`` are :class:`DeviceSlice` views of the first ``slots`` slots
    (``None`` while empty).

    ``fixed``: buffers come in bucketed shapes (:func:`bucketed`), two sets per shape,
    never freed, so a decoder step replayed from a CUDA graph finds its pool at an
    address it was captured with. The extra columns are padding (mask false), as a
    wider pool's always are.
    """

    def __init__(self, graphs: DeviceGraphs, *, fixed: bool = False) -> None:
        self.graphs = graphs
        self.fixed = fixed
        self._buffers: tuple[ort.OrtValue, ...] = ()
        self._sets: dict[tuple, list[tuple[ort.OrtValue, ...]]] = {}
        self.slots = 0
        self._views: tuple[DeviceSlice | None, ...] = (None, None, None)

    @property
    def memory(self) -> DeviceSlice | None:
        return self._views[0]

    @property
    def keys(self) -> DeviceSlice | None:
        return self._views[1]

    @property
    def mask(self) -> DeviceSlice | None:
        return self._views[2]

    @property
    def width(self) -> int:
        return self._buffers[2].shape()[1] if self._buffers else 0

    @property
    def capacity(self) -> int:
        return self._buffers[2].shape()[0] if self._buffers else 0

    def rebuilt_width(self, needed: int) -> int:
        """The width :meth:`compact` gives a pool whose longest sentence has ``needed``
        tokens: its bucket when ``fixed``, so that the loop does not rebuild a pool
        into a pool just as wide (it did, nearly every step: 823 rebuilds in 880 steps
        of 128 greedy clients on the tiny test model, each a move of every live slot)."""
        return bucketed(1, needed)[1] if self.fixed else needed

    def _refresh(self) -> None:
        if self._buffers:
            self._views = tuple(DeviceSlice(b, self.slots) for b in self._buffers)
        else:
            self._views = (None, None, None)

    def _allocate(self, cap: int, width: int, memory, keys) -> tuple[ort.OrtValue, ...]:
        """Device buffers for ``cap`` slots of ``width`` (bucketed when ``fixed``), typed
        like ``memory``/``keys``. Left uninitialised: every slot is written whole
        (padding included) before the decoder reads it."""
        if self.fixed:
            cap, width = bucketed(cap, width)
        shapes = (
            ((cap, width, memory.shape[2]), memory.dtype),
            ((cap, width, keys.shape[2]), keys.dtype),
            ((cap, width), np.dtype(np.bool_)),
        )
        if not self.fixed:
            return tuple(self.graphs.empty(shape, dtype) for shape, dtype in shapes)
        # the set of this shape not in use (a compaction within one shape alternates)
        sets = self._sets.setdefault(tuple(shapes), [])
        free = [b for b in sets if not self._buffers or b[0] is not self._buffers[0]]
        if len(sets) < 2 and not free:
            sets.append(tuple(self.graphs.empty(shape, dtype) for shape, dtype in shapes))
            free = sets[-1:]
        return free[0]

    def _move(self, index: np.ndarray, buffers: tuple[ort.OrtValue, ...]) -> None:
        """Gather the current slots ``index`` into the start of ``buffers``."""
        targets = tuple(DeviceSlice(b, len(index)) for b in buffers)
        self.graphs.reslot(self._views, index, buffers[2].shape()[1], targets)

    def append(self, memory, keys, mask) -> int:
        """Add sentences (``memory`` ``(n, src_len, D)``, ``keys`` ``(n, src_len, K)``,
        ``mask`` ``(n, src_len)``: device tensors or host arrays); returns the slot of the
        first one. Only the new slots are written."""
        n, src_len = mask.shape
        first = self.slots
        if first + n > self.capacity or src_len > self.width:  # (capacity 0 while empty)
            width = max(src_len, self.width)
            buffers = self._allocate(grown_capacity(first + n), width, memory, keys)
            if first:
                self._move(np.arange(first, dtype=np.int64), buffers)
            self._buffers = buffers
        targets = tuple(DeviceSlice(b, n, first) for b in self._buffers)
        self.graphs.reslot((memory, keys, mask), np.arange(n, dtype=np.int64), self.width, targets)
        self.slots = first + n
        self._refresh()
        return first

    def compact(self, keep: list[int], width: int) -> None:
        """Keep only slots ``keep`` (in that order, renumbered 0..) and ``width`` columns,
        with as many spare slots again (see :meth:`service.pool.MemoryPool.compact`)."""
        n = len(keep)
        memory, keys = self._views[0], self._views[1]
        buffers = self._allocate(rebuilt_capacity(n), width, memory, keys)
        self._move(np.asarray(keep, dtype=np.int64), buffers)
        self._buffers = buffers
        self.slots = n
        self._refresh()

    def clear(self) -> None:
        self._buffers = ()
        self.slots = 0
        self._refresh()

    def join_states(self, old: tuple, new: tuple) -> tuple:
        """Decoder states with the rows of ``new`` after those of ``old``, joined on the
        device; a coverage state of another width goes through the host
        (:func:`service.pool.join_rows` pads it)."""
        return tuple(
            self.graphs.concat(a, b) if a.shape[1:] == b.shape[1:] else join_rows(a, b)
            for a, b in zip(old, new, strict=True)
        )
