"""TensorFlow object graphs read without TensorFlow: variables by the path of the layer that
owns them, and the constants a SavedModel's lookup tables are built from.

A checkpoint names each tensor by the first path TensorFlow found to it. For
``model.save_weights`` that is the layer path (``encoder/embedding/embeddings``), but a
SavedModel of a Keras model reaches them first through the model's ``variables`` list
(``model/variables/8``). Both files also hold the *object graph* (the
``_CHECKPOINTABLE_OBJECT_GRAPH`` string tensor: every object's named children and which
tensor holds each of its attributes), so :func:`named_variables` walks it and names every
variable by its layer path, stepping around Keras' alias lists (:data:`ALIASES`).

A SavedModel's ``saved_model.pb`` holds what no checkpoint does, such as the vocabularies
of ``TextVectorization`` and ``StringLookup`` layers: their ``StaticHashTable``s are
restored by running an initializer function on constants of the graph.
:class:`SavedModelGraph` reads the protobufs by their wire format (``SavedModel`` →
``MetaGraphDef`` → ``SavedObjectGraph`` and the ``GraphDef``'s ``Const`` nodes; the function
library, most of the file, is skipped) and :meth:`SavedModelGraph.table` returns a table's
keys and values.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from export.tf_checkpoint import (
    _DTYPES,
    _STRING,
    CheckpointError,
    _fields,
    _varint,
    read_checkpoint,
    read_strings,
)

OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"
# children that are other names for objects reachable by their layer paths: Keras' lists of
# a model's variables and layers, the optimizer, a SavedModel's signatures
ALIASES = frozenset(
    {
        "variables",
        "trainable_variables",
        "non_trainable_variables",
        "regularization_losses",
        "keras_api",
        "optimizer",
        "signatures",
        # a Keras 3 optimizer's lists of the variables it updates, whatever it is saved as
        "_trainable_variables",
        "_variables",
        "_momentums",
        "_velocities",
    }
)
# what parsing a damaged protobuf raises besides CheckpointError (a field of another wire
# type than expected, bytes that are not UTF-8, a length past the end)
_DAMAGE = (struct.error, UnicodeDecodeError, ValueError, TypeError, AttributeError, IndexError,
           OverflowError)  # fmt: skip
# SavedObject's kinds by field number (tensorflow/core/protobuf/saved_object_graph.proto)
_KINDS = {4: "user_object", 5: "asset", 6: "function", 7: "variable", 8: "bare_concrete_function",
          9: "constant", 10: "resource", 12: "captured_tensor"}  # fmt: skip


@dataclass
class ObjectNode:
    """One object of an object graph: its children by local name; in a checkpoint's graph
    the checkpoint key of each attribute (``VARIABLE_VALUE``, ``table-keys``); in a
    SavedModel's, its kind and, for a constant, the name of its ``Const`` op."""

    children: dict[str, int] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    kind: str = ""
    operation: str = ""  # a constant's op in the graph
    function: str = ""  # a function's first concrete function


def _one(message: bytes, number: int, default: bytes = b"") -> bytes | int:
    values = [v for n, v in _fields(message) if n == number]
    return values[0] if values else default


def _children(reference: bytes) -> tuple[str, int]:
    """An ``ObjectReference``: ``(local_name 2, node_id 1)``."""
    f = dict(_fields(reference))
    return f.get(2, b"").decode("utf-8"), int(f.get(1, 0))


def _packed(value: bytes | int) -> list[int]:
    """A repeated varint field, packed (bytes) or not (one int per occurrence)."""
    if isinstance(value, int):
        return [value]
    out, pos = [], 0
    while pos < len(value):
        v, pos = _varint(value, pos)
        out.append(v)
    return out


def checkpoint_objects(prefix: Path | str) -> list[ObjectNode]:
    """The object graph a checkpoint keeps beside its tensors (a ``TrackableObjectGraph``:
    nodes 1, each with children 1 and attributes 2 = ``SerializedTensor`` name 1,
    checkpoint_key 3), node 0 the saved root."""
    graph = read_strings(prefix, [OBJECT_GRAPH])[OBJECT_GRAPH]
    if len(graph) != 1:
        raise CheckpointError(f"{prefix}: {OBJECT_GRAPH} holds {len(graph)} strings, not one")
    try:
        nodes = []
        for number, value in _fields(graph[0]):
            if number != 1:
                continue
            node = ObjectNode()
            for n, v in _fields(value):
                if n == 1:
                    name, target = _children(v)
                    node.children.setdefault(name, target)
                elif n == 2:
                    f = dict(_fields(v))
                    node.attributes[f.get(1, b"").decode("utf-8")] = f.get(3, b"").decode("utf-8")
            nodes.append(node)
    except (CheckpointError, *_DAMAGE) as exc:
        raise CheckpointError(f"{prefix}: a corrupt object graph ({exc})") from None
    return nodes


def paths(nodes: list[ObjectNode], root: int = 0) -> dict[int, str]:
    """Each node's shortest path from ``root`` by child names, not through :data:`ALIASES`
    (children in the order the graph lists them, so ties go as TensorFlow's own walk)."""
    found = {root: ""}
    queue = deque([root])
    while queue:
        i = queue.popleft()
        for name, j in nodes[i].children.items():
            if name in ALIASES or j in found or not 0 <= j < len(nodes):
                continue
            found[j] = f"{found[i]}/{name}" if found[i] else name
            queue.append(j)
    return found


def named_variables(prefix: Path | str) -> dict[str, np.ndarray]:
    """The numeric variables of the checkpoint at ``prefix`` by layer path (``model/encoder/
    embedding/embeddings``), whatever names TensorFlow saved them under; variables reached
    only through :data:`ALIASES` (an optimizer's) and a ``tf.train.Checkpoint``'s own
    ``save_counter`` are left out."""
    tensors = read_checkpoint(prefix)
    nodes = checkpoint_objects(prefix)
    out = {}
    for i, path in paths(nodes).items():
        key = nodes[i].attributes.get("VARIABLE_VALUE")
        if key is not None and key in tensors and path != "save_counter":
            out[path] = tensors[key]
    return out


def _tensor(proto: bytes, where: str) -> np.ndarray:
    """A ``TensorProto`` (dtype 1, tensor_shape 2, tensor_content 4, string_val 8,
    int_val 7, int64_val 10, float_val 5) as an array; strings as an object array of str."""
    dtype, shape, content, repeated = 0, [], None, []
    for n, v in _fields(proto):
        if n == 1:
            dtype = int(v)
        elif n == 2:
            shape = [int(dict(_fields(d)).get(1, 0)) for k, d in _fields(v) if k == 2]
        elif n == 4:
            content = v
        elif n == 8:
            repeated.append(v)
        elif n in (7, 10):  # int_val, int64_val: two's complement varints
            repeated.extend(i - (1 << 64) if i >= 1 << 63 else i for i in _packed(v))
        elif n == 5:  # float_val: packed, or one fixed32 (its bits) a value
            floats = np.frombuffer(v if isinstance(v, bytes) else struct.pack("<I", v), "<f4")
            repeated.extend(floats.tolist())
    count = int(np.prod(shape, dtype=np.int64))
    if dtype == _STRING:
        if len(repeated) != count:
            raise CheckpointError(f"{where}: {len(repeated)} strings for shape {shape}")
        return np.array([s.decode("utf-8") for s in repeated], dtype=object).reshape(shape)
    if dtype not in _DTYPES or _DTYPES[dtype] == "bfloat16":
        raise CheckpointError(f"{where}: a constant of TensorFlow dtype {dtype}")
    np_type = np.dtype(_DTYPES[dtype])
    if content is not None:
        values = np.frombuffer(content, np_type.newbyteorder("<"))
    else:
        values = np.array(repeated, dtype=np_type)
        if values.size == 1 and count > 1:  # TensorFlow writes a splat as one value
            values = np.full(count, values[0], dtype=np_type)
    if values.size != count:
        raise CheckpointError(f"{where}: {values.size} values for shape {shape}")
    return values.astype(np_type).reshape(shape)


@contextmanager
def _naming(pb: Path, damaged: str) -> Iterator[None]:
    """Errors of reading ``pb`` as CheckpointError naming it: this reader's own, and what
    parsing damaged bytes raises (said to be ``damaged``)."""
    try:
        yield
    except CheckpointError as exc:
        raise CheckpointError(f"{pb}: {exc}") from None
    except _DAMAGE as exc:
        raise CheckpointError(f"{pb}: {damaged} ({exc})") from None


class SavedModelGraph:
    """``saved_model.pb`` of the SavedModel in ``directory``: its object graph
    (:attr:`objects`, node 0 the object given to ``tf.saved_model.save``) and the
    ``Const`` nodes of its graph, read on demand."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        pb = self.directory / "saved_model.pb"
        try:
            data = pb.read_bytes()
        except FileNotFoundError:
            raise CheckpointError(f"{pb}: not found") from None
        with _naming(pb, "not a SavedModel this reader understands"):
            self._read(data)

    def _read(self, data: bytes) -> None:
        metas = [v for n, v in _fields(data) if n == 2]
        if len(metas) != 1:
            raise CheckpointError(f"{len(metas)} meta graphs (one expected: tf.saved_model.save)")
        meta = _fields(metas[0])
        graph = [v for n, v in meta if n == 2]
        objects = [v for n, v in meta if n == 7]
        if not graph or not objects:
            raise CheckpointError("no graph or no object graph: a TensorFlow 1 SavedModel")
        self._consts: dict[str, bytes] = {}
        for n, v in _fields(graph[0]):
            if n != 1:  # the function library, versions
                continue
            node = _fields(v)
            if any(k == 2 and op == b"Const" for k, op in node):
                name = next(val for k, val in node if k == 1).decode("utf-8")
                self._consts[name] = v
        functions: dict[str, bytes] = {}
        self.objects: list[ObjectNode] = []
        for n, v in _fields(objects[0]):
            if n == 2:  # concrete_functions: map<string, SavedConcreteFunction>
                entry = dict(_fields(v))
                functions[entry.get(1, b"").decode("utf-8")] = entry.get(2, b"")
            elif n == 1:
                self.objects.append(self._object(v))
        self._bound: dict[str, list[int]] = {
            name: [i for k, v in _fields(f) if k == 2 for i in _packed(v)]
            for name, f in functions.items()
        }

    @staticmethod
    def _object(message: bytes) -> ObjectNode:
        node = ObjectNode()
        for n, v in _fields(message):
            if n == 1:
                name, target = _children(v)
                node.children.setdefault(name, target)
            elif n in _KINDS:
                node.kind = _KINDS[n]
                if n == 9:  # SavedConstant: operation 1
                    node.operation = _one(v, 1).decode("utf-8")
                elif n == 6:  # SavedFunction: concrete_functions 1
                    node.function = _one(v, 1).decode("utf-8")
        return node

    def find(self, path: str) -> int | None:
        """The node at ``path`` (child names joined by ``/``) from the root, or None."""
        i = 0
        for name in filter(None, path.split("/")):
            j = self.objects[i].children.get(name)
            if j is None or not 0 <= j < len(self.objects):
                return None
            i = j
        return i

    def constant(self, node: int) -> np.ndarray:
        """The value of the constant object ``node``."""
        op = self.objects[node].operation
        if op not in self._consts:
            raise CheckpointError(f"the graph has no Const {op!r}")
        for n, v in _fields(self._consts[op]):
            if n == 5:  # attr: map<string, AttrValue>
                entry = dict(_fields(v))
                if entry.get(1) == b"value":
                    return _tensor(_one(entry.get(2, b""), 8), f"Const {op!r}")
        raise CheckpointError(f"Const {op!r} has no value")

    def table(self, path: str) -> dict[str, int] | None:
        with _naming(self.directory / "saved_model.pb", f"{path}: a damaged table"):
            return self._table(path)

    def _table(self, path: str) -> dict[str, int] | None:
        """The words and ids a ``StaticHashTable`` at ``path`` is initialised with (a
        ``KeyValueTensorInitializer``'s two constants, as its ``_initialize`` function
        captured them) as ``{word: id}``, whichever way the table maps them (``StringLookup
        (invert=True)`` maps ids to words); None when there is no table there."""
        node = self.find(path)
        if node is None or self.objects[node].kind != "resource":
            return None
        init = self.find(f"{path}/_initialize")
        if init is None or self.objects[init].function not in self._bound:
            raise CheckpointError(f"{path}: a table without its initializer function")
        bound = [i for i in self._bound[self.objects[init].function] if 0 <= i < len(self.objects)]
        captured = [self.constant(i) for i in bound if self.objects[i].kind == "constant"]
        if not captured:
            raise CheckpointError(
                f"{path}: a table initialised from a file (an asset, as StringLookup("
                "vocabulary='vocab.txt') makes), not from constants in the graph"
            )
        keys = [c for c in captured if c.dtype == object]
        values = [c for c in captured if c.dtype != object]
        if len(keys) != 1 or len(values) != 1 or keys[0].shape != values[0].shape:
            raise CheckpointError(
                f"{path}: not a table initialised from one list of keys and one of values "
                f"(captured {[(c.dtype.name, c.shape) for c in captured]})"
            )
        if values[0].dtype.kind not in "iu":
            raise CheckpointError(f"{path}: a table of {values[0].dtype} values, not ids")
        words, ids = keys[0].reshape(-1).tolist(), values[0].reshape(-1).tolist()
        if len(set(words)) != len(words):
            raise CheckpointError(f"{path}: a table that lists a word twice")
        return dict(zip(words, ids, strict=True))
