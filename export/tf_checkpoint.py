"""TensorFlow checkpoints read without TensorFlow: ``read_checkpoint(prefix) -> {name: array}``.

``tf.train.Checkpoint.save`` writes a *tensor bundle*: ``PREFIX.index``, a LevelDB-format
table mapping each variable's name to where its bytes lie, and
``PREFIX.data-0000N-of-0000M``, the raw little-endian tensors. This module reads the
table (blocks of prefix-compressed keys, the 48-byte footer with its magic number),
decodes the ``BundleEntryProto`` values by their protobuf wire format, and maps the
numeric tensors out of the data files. String tensors (the object graph TensorFlow keeps
beside the variables) are read by :func:`read_strings` only. Every CRC-32C TensorFlow
wrote is checked: each index block's, each tensor's (at numpy speed, :func:`_lanes_crc`),
each string tensor's lengths'; a tensor must also fill exactly the bytes its entry gives.

Names are the checkpoint keys TensorFlow wrote, e.g.
``encoder/gru/cell/kernel/.ATTRIBUTES/VARIABLE_VALUE`` (the first path it found to each
variable: :func:`export.tf_saved_model.named_variables` names them by layer path).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_MAGIC = 0xDB4775248B80FB57  # LevelDB's table magic number, as TensorFlow's tables end
_FOOTER = 48
_TRAILER = 5  # a block's compression byte and masked crc32c
# TensorFlow DataType enum -> numpy dtype (the numeric types a model's weights use)
_DTYPES = {
    1: np.float32,
    2: np.float64,
    3: np.int32,
    4: np.uint8,
    5: np.int16,
    6: np.int8,
    9: np.int64,
    10: np.bool_,
    14: "bfloat16",
    17: np.uint16,
    19: np.float16,
    22: np.uint32,
    23: np.uint64,
}
_STRING = 7


class CheckpointError(ValueError):
    """A file that is not a TensorFlow checkpoint this reader understands; the message
    names the file and what is wrong."""


@dataclass(frozen=True)
class Entry:
    """Where one tensor lies: ``shape``, numpy ``dtype`` (None for strings), the data
    shard and the byte range in it."""

    dtype: object
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    crc: int | None = None  # the masked CRC-32C of the bytes, when the entry has one


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def _raw_crc(crc: int, data: bytes) -> int:
    """The CRC-32C register after ``data`` from ``crc`` (no pre- or post-inversion)."""
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def _mask(crc: int) -> int:
    """LevelDB's (and TensorFlow's) masking of a stored CRC-32C."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C (Castagnoli) of ``data``, as a table block's trailer and a
    tensor's entry hold it. Large inputs go through :func:`_lanes_crc`."""
    if len(data) >= 1 << 16:
        return _mask(_lanes_crc(data))
    return _mask(_raw_crc(0xFFFFFFFF, data) ^ 0xFFFFFFFF)


def _lanes_crc(data: bytes, lanes: int = 4096) -> int:
    """CRC-32C of ``data`` at numpy speed (a 100 MB tensor in about a second): the bytes
    are cut into ``lanes`` chunks of one length L whose registers advance side by side
    from 0, then chained in order, a chunk's register carried across the next chunk's L
    bytes by the linear map "L zero bytes" (CRC is linear in its register: crc(s, B) =
    crc(s, zeros(L)) xor crc(0, B)), applied through four 256-entry tables."""
    table = np.array(_CRC32C, dtype=np.uint32)
    length = len(data) // lanes
    body = np.frombuffer(data, dtype=np.uint8, count=length * lanes).reshape(lanes, length)
    columns = np.ascontiguousarray(body.T)
    regs = np.zeros(lanes, dtype=np.uint32)
    # the map "L zero bytes" on the 32 basis registers, advanced with the chunks
    basis = (np.uint32(1) << np.arange(32, dtype=np.uint32)).astype(np.uint32)
    for column in columns:
        regs = table[(regs ^ column) & 0xFF] ^ (regs >> 8)
        basis = table[basis & 0xFF] ^ (basis >> 8)
    images = [int(b) for b in basis]
    shift = [[0] * 256 for _ in range(4)]
    for j in range(4):
        for byte in range(256):
            value = 0
            for bit in range(8):
                if byte >> bit & 1:
                    value ^= images[8 * j + bit]
            shift[j][byte] = value
    t0, t1, t2, t3 = shift
    crc = 0xFFFFFFFF
    for reg in regs.tolist():
        crc = t0[crc & 0xFF] ^ t1[crc >> 8 & 0xFF] ^ t2[crc >> 16 & 0xFF] ^ t3[crc >> 24] ^ reg
    return _raw_crc(crc, data[length * lanes :]) ^ 0xFFFFFFFF


def _widths(lengths: list[int]) -> bytes:
    """A string tensor's element lengths as TensorFlow checksums them: 4 little-endian
    bytes each (8 for one over 4 GiB)."""
    return b"".join(struct.pack("<I" if n <= 0xFFFFFFFF else "<Q", n) for n in lengths)


def _lengths_checksum(lengths: list[int]) -> int:
    """What a bundle stores after a string tensor's lengths: their masked CRC-32C."""
    return _masked_crc32c(_widths(lengths))


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise CheckpointError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise CheckpointError("varint longer than 64 bits")


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """A protobuf message's ``(field number, value)`` pairs: varints as ints, fixed32/64
    as ints, length-delimited fields as bytes."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = struct.unpack_from("<Q", buf, pos)[0], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise CheckpointError(f"a field of {n} bytes runs past the message's end")
            value, pos = buf[pos : pos + n], pos + n
        elif wire == 5:
            value, pos = struct.unpack_from("<I", buf, pos)[0], pos + 4
        else:
            raise CheckpointError(f"protobuf wire type {wire}: not a message this reader knows")
        out.append((number, value))
    return out


def _entry(name: str, value: bytes) -> Entry:
    """A ``BundleEntryProto``: dtype 1, shape 2 (dims 2, each size 1), shard_id 3, offset
    4, size 5, crc32c 6, slices 7."""
    dtype, shape, shard, offset, size, crc = 0, (), 0, 0, 0, None
    for number, v in _fields(value):
        if number == 2:
            dims = []
            for n, dim in _fields(_as(bytes, v, name)):
                if n == 3 and dim:
                    raise CheckpointError(f"{name}: a tensor of unknown rank")
                if n == 2:
                    sizes = [_as(int, s, name) for k, s in _fields(_as(bytes, dim, name)) if k == 1]
                    dims.append(sizes[0] if sizes else 0)
            shape = tuple(dims)
        elif number == 7:
            raise CheckpointError(f"{name}: a partitioned (sliced) variable; save it whole")
        elif number in (1, 3, 4, 5, 6):
            v = _as(int, v, name)
            if number == 1:
                dtype = v
            elif number == 3:
                shard = v
            elif number == 4:
                offset = v
            elif number == 5:
                size = v
            else:
                crc = v
    if any(d < 0 or d > 1 << 40 for d in shape):
        raise CheckpointError(f"{name}: a shape {shape} no tensor has")
    if dtype == _STRING:
        return Entry(None, shape, shard, offset, size, crc)
    if dtype not in _DTYPES:
        raise CheckpointError(f"{name}: TensorFlow dtype {dtype} is not supported")
    return Entry(_DTYPES[dtype], shape, shard, offset, size, crc)


def _as(kind: type, value: object, name: str):
    """``value`` when it is a ``kind`` (an int or bytes field), else a corrupt entry."""
    if not isinstance(value, kind):
        raise CheckpointError(f"{name}: a corrupt entry (a field of the wrong type)")
    return value


def _block(data: bytes, offset: int, size: int) -> list[tuple[bytes, bytes]]:
    """The key/value pairs of the table block at ``offset`` (``size`` bytes + trailer)."""
    if offset + size + _TRAILER > len(data):
        raise CheckpointError("a block runs past the end of the file")
    kind = data[offset + size]
    stored = struct.unpack_from("<I", data, offset + size + 1)[0]
    if _masked_crc32c(data[offset : offset + size + 1]) != stored:
        raise CheckpointError("a table block fails its checksum: a corrupt index")
    if kind != 0:
        raise CheckpointError(
            f"block compression {kind} (snappy?) is not supported; TensorFlow writes "
            "checkpoint indexes uncompressed"
        )
    block = data[offset : offset + size]
    if len(block) < 4:
        raise CheckpointError("a block too short to hold its restart count")
    restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
    end = len(block) - 4 - 4 * restarts
    if end < 0:
        raise CheckpointError("a block's restart array is larger than the block")
    pairs, pos, key = [], 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        length, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        pairs.append((key, block[pos : pos + length]))
        pos += length
    return pairs


def _handle(buf: bytes, pos: int = 0) -> tuple[int, int, int]:
    offset, pos = _varint(buf, pos)
    size, pos = _varint(buf, pos)
    return offset, size, pos


def _prefix(path: Path | str) -> Path:
    """The checkpoint prefix of ``path``: the prefix itself, its ``.index`` or a data
    shard, or a directory holding TensorFlow's ``checkpoint`` file (its latest save) or
    a single ``*.index``."""
    path = Path(path)
    if path.suffix in (".h5", ".hdf5", ".keras"):
        raise CheckpointError(
            f"{path}: a Keras {path.suffix} file (Keras 3's save_weights writes only these), not "
            "a TensorFlow checkpoint; give the SavedModel tf.saved_model.save wrote, or save "
            "with tf.train.Checkpoint(...).save(prefix) and give that prefix or its directory"
        )
    if path.name == "checkpoint" and path.is_file():
        path = path.parent  # TensorFlow's record of the latest save: its directory
    named = path.suffix == ".index" or ".data-" in path.name
    if not path.exists() and not path.with_name(path.name + ".index").exists() and not named:
        saves = sorted(
            (p.name[: -len(".index")] for p in path.parent.glob(f"{path.name}-*.index")),
            key=lambda n: (len(n), n),  # ckpt-9 before ckpt-10
        )
        if saves:
            raise CheckpointError(
                f"{path}: not found; the saves of this prefix are {', '.join(saves[-5:])}: "
                f"give one (e.g. {path.parent / saves[-1]}), or the directory for its latest"
            )
        raise CheckpointError(f"{path}: not found (a TensorFlow checkpoint or its directory)")
    if path.is_dir():
        state = path / "checkpoint"
        if state.is_file():
            for line in state.read_text(encoding="utf-8").splitlines():
                if line.startswith("model_checkpoint_path:"):
                    name = line.split(":", 1)[1].strip().strip('"')
                    return path / name if not Path(name).is_absolute() else Path(name)
        if (path / "variables" / "variables.index").is_file():  # a SavedModel
            return path / "variables" / "variables"
        if (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file():
            raise CheckpointError(
                f"{path}: a SavedModel without its variables/variables.index (copy the whole "
                "directory tf.saved_model.save wrote)"
            )
        indexes = sorted(path.glob("*.index"))
        if len(indexes) == 1:
            return indexes[0].with_suffix("")
        raise CheckpointError(
            f"{path}: no TensorFlow checkpoint here (no 'checkpoint' file, no single "
            f"*.index: found {len(indexes)}); give the checkpoint prefix, e.g. {path}/ckpt-1"
        )
    if path.suffix == ".index":
        return path.with_suffix("")
    if ".data-" in path.name:
        return path.with_name(path.name.split(".data-")[0])
    return path


def read_index(prefix: Path | str) -> tuple[Path, dict[str, Entry], int]:
    """``(prefix, {name: Entry}, number of data shards)`` of a checkpoint."""
    prefix = _prefix(prefix)
    index = prefix.with_name(prefix.name + ".index")
    try:
        data = index.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{index}: not found (a TensorFlow checkpoint's index)") from None
    if len(data) < _FOOTER or struct.unpack_from("<Q", data, len(data) - 8)[0] != _MAGIC:
        raise CheckpointError(f"{index}: not a TensorFlow checkpoint index (no table magic)")
    try:
        entries, shards = _entries(data)
    except CheckpointError as exc:
        raise CheckpointError(f"{index}: {exc}") from None
    except (struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError) as exc:
        # a field of the wrong wire type or length: what a flipped byte makes of it
        raise CheckpointError(f"{index}: a corrupt checkpoint index ({exc})") from None
    return prefix, entries, shards


def _entries(data: bytes) -> tuple[dict[str, Entry], int]:
    """The entries of the index table ``data`` and the bundle's shard count."""
    footer = data[-_FOOTER:]
    _, _, pos = _handle(footer)  # the metaindex: empty in a bundle
    offset, size, _ = _handle(footer, pos)
    entries: dict[str, Entry] = {}
    shards = 1
    for _, handle in _block(data, offset, size):
        b_offset, b_size, _ = _handle(handle)
        for key, value in _block(data, b_offset, b_size):
            if key == b"":  # the BundleHeaderProto: num_shards 1, endianness 2
                for number, v in _fields(value):
                    if number == 1:
                        shards = int(v)
                    elif number == 2 and v != 0:
                        raise CheckpointError("a big-endian checkpoint")
                continue
            name = key.decode("utf-8")
            entries[name] = _entry(name, value)
    if shards < 1:
        raise CheckpointError(f"the header says {shards} data shards")
    return entries, shards


def read_checkpoint(path: Path | str) -> dict[str, np.ndarray]:
    """Every numeric tensor of the checkpoint at ``path`` (see :func:`_prefix`), by name."""
    prefix, entries, shards = read_index(path)
    files: dict[int, bytes] = {}
    out: dict[str, np.ndarray] = {}
    for name, e in entries.items():
        if e.dtype is None:
            continue
        if e.dtype == "bfloat16":
            raise CheckpointError(f"{name}: bfloat16 weights are not supported; save float32")
        if e.shard not in files:
            shard = prefix.with_name(f"{prefix.name}.data-{e.shard:05d}-of-{shards:05d}")
            try:
                files[e.shard] = shard.read_bytes()
            except FileNotFoundError:
                raise CheckpointError(f"{shard}: not found (a data shard of {prefix})") from None
        dtype = np.dtype(e.dtype).newbyteorder("<")
        count = int(np.prod(e.shape, dtype=np.int64))
        if count * dtype.itemsize != e.size or e.offset + e.size > len(files[e.shard]):
            raise CheckpointError(
                f"{name}: {e.size} bytes at {e.offset} do not hold a {dtype} tensor of shape "
                f"{e.shape} in its shard: a truncated or mismatched checkpoint"
            )
        buf = files[e.shard]
        if e.crc is not None and _masked_crc32c(buf[e.offset : e.offset + e.size]) != e.crc:
            raise CheckpointError(
                f"{name}: its bytes fail their checksum: a corrupt checkpoint "
                "(TensorFlow refuses it too)"
            )
        array = np.frombuffer(buf, dtype=dtype, count=count, offset=e.offset)
        out[name] = array.reshape(e.shape).astype(dtype.newbyteorder("="))
    return out


def read_strings(path: Path | str, names: list[str]) -> dict[str, list[bytes]]:
    """The string tensors ``names`` of the checkpoint at ``path``, each flattened to a list
    of byte strings (e.g. a Keras lookup table's keys). A bundle stores one as the varint64
    length of every element, a 4-byte masked CRC-32C of those lengths, then the bytes."""
    prefix, entries, shards = read_index(path)
    out: dict[str, list[bytes]] = {}
    for name in names:
        e = entries.get(name)
        if e is None or e.dtype is not None:
            raise CheckpointError(f"{prefix}: no string tensor {name!r}")
        shard = prefix.with_name(f"{prefix.name}.data-{e.shard:05d}-of-{shards:05d}")
        try:
            with open(shard, "rb") as fh:
                fh.seek(e.offset)
                buf = fh.read(e.size)
        except FileNotFoundError:
            raise CheckpointError(f"{shard}: not found (a data shard of {prefix})") from None
        count = int(np.prod(e.shape, dtype=np.int64))
        try:
            lengths, pos = [], 0
            for _ in range(count):
                n, pos = _varint(buf, pos)
                lengths.append(n)
            if _lengths_checksum(lengths) != struct.unpack_from("<I", buf, pos)[0]:
                raise CheckpointError(f"{shard}: {name}: its element lengths fail their checksum")
            start = pos + 4
            values, pos = [], start
            for n in lengths:
                values.append(bytes(buf[pos : pos + n]))
                pos += n
        except struct.error:
            raise CheckpointError(f"{shard}: {name}: a truncated string tensor") from None
        if pos != len(buf):
            raise CheckpointError(f"{shard}: {name}: {len(buf)} bytes hold {pos} of strings")
        # the entry's checksum covers the lengths as fixed-width words, their checksum and
        # the bytes (TensorFlow's WriteStringTensor): an object graph read unchecked could
        # name one variable by another's path
        whole = _widths(lengths) + buf[start - 4 : start] + buf[start:]
        if e.crc is not None and _masked_crc32c(whole) != e.crc:
            raise CheckpointError(
                f"{shard}: {name}: its bytes fail their checksum: a corrupt checkpoint "
                "(TensorFlow refuses it too)"
            )
        out[name] = values
    return out
