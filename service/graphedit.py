"""Builders shared by the load-time rewrites of a bundle's decoder graph
(:mod:`service.greedysteps`, :mod:`service.topk`): ONNX protos through the service's own
generated module (:mod:`service.onnx_graph_pb2`), so serving never imports ``onnx``."""

from __future__ import annotations

import numpy as np

from service import onnx_graph_pb2 as pb

_TYPES = {
    "float32": pb.TensorProto.FLOAT,
    "int64": pb.TensorProto.INT64,
    "bool": pb.TensorProto.BOOL,
}


def default_opset(model: pb.ModelProto) -> int:
    """The model's opset of the default (ONNX) domain; 0 when it imports none."""
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


def initializer(graph: pb.GraphProto, name: str, value: np.ndarray) -> str:
    """Add ``value`` (float32, int64 or bool) to ``graph`` as the initializer ``name``;
    returns the name."""
    tensor = graph.initializer.add()
    tensor.name = name
    tensor.dims.extend(value.shape)
    tensor.data_type = _TYPES[value.dtype.name]
    tensor.raw_data = np.ascontiguousarray(value).tobytes()
    return name


def make_node(op: str, inputs: list[str], outputs: list[str], **attrs: int | list[int]):
    """A default-domain node named after its first output, with integer (or list of
    integers) attributes."""
    made = pb.NodeProto(op_type=op, name=outputs[0], input=inputs, output=outputs)
    for key, value in attrs.items():
        if isinstance(value, list):
            made.attribute.add(name=key, type=pb.AttributeProto.INTS, ints=value)
        else:
            made.attribute.add(name=key, type=pb.AttributeProto.INT, i=value)
    return made
