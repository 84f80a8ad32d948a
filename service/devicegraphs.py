"""Two tiny ONNX graphs that move decode state around *on the execution device*, so the
memory pool and the decoder states never make a round trip through the host
(:mod:`service.devicepool`):

* ``reslot``: ``Pad(Slice(Gather(x, index), :width), width)`` of the pool's three arrays
  at once: memory ``(slots, W, D)``, keys ``(slots, W, K)``, mask ``(slots, W)`` ->
  ``(n, width, ...)``. Admitting sentences places their encodings into spare slots with
  it (index ``0..n-1``, padded to the pool's width); compacting or growing the pool
  gathers the live slots into new buffers (cropped or padded to the new width).
* ``concat``: two decoder states ``(rows_a, ...)``, ``(rows_b, ...)`` -> one, for the
  rows of newly admitted sentences.

The serving path does not depend on the ``onnx`` package: the graphs are committed as
files next to this module (``graphs/``), and ``python -m service.devicegraphs`` rewrites
them (needs ``onnx``, a dev dependency); ``tests/service/test_devicepool.py`` checks that
the files are what the builder makes. Every node has a CUDA kernel for the types used
(the mask is padded as float: CUDA's Pad has no bool or uint8 kernel, and a node ORT
hands to the CPU would copy the mask to the host and back).

Only float32 graphs exist: every bundle's graphs take and return float32 (the fp16
variant keeps float32 inputs and outputs, :mod:`export.variants`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

GRAPH_DIR = Path(__file__).with_name("graphs")
OPSET = 17
# numpy dtype name -> ONNX TensorProto element type (the float types a bundle's graphs
# take and return)
FLOAT_TYPES = {"float32": 1}
INT64, BOOL, FLOAT = 7, 9, 1

RESLOT_INPUTS = ("memory", "keys", "mask", "index", "width", "pads3", "pads2")
RESLOT_OUTPUTS = ("memory_out", "keys_out", "mask_out")
CONCAT_INPUTS = ("a", "b")
CONCAT_OUTPUTS = ("joined",)


def graph_path(kind: str, dtype: np.dtype | str) -> Path:
    """The committed graph ``kind`` ("reslot" or "concat") for float type ``dtype``."""
    name = np.dtype(dtype).name
    if name not in FLOAT_TYPES:
        raise ValueError(f"no device graph for {name} tensors (have {sorted(FLOAT_TYPES)})")
    return GRAPH_DIR / f"{kind}-{name}.onnx"


def reslot_feeds(index: np.ndarray, width: int, old_width: int) -> dict[str, np.ndarray]:
    """The small inputs of ``reslot``: gather slots ``index`` and fit them from
    ``old_width`` to ``width`` columns (crop or pad with zeros / False)."""
    grow = max(0, width - old_width)
    return {
        "index": np.ascontiguousarray(index, dtype=np.int64),
        "width": np.array([width], dtype=np.int64),
        "pads3": np.array([0, 0, 0, 0, grow, 0], dtype=np.int64),
        "pads2": np.array([0, 0, 0, grow], dtype=np.int64),
    }


def build(kind: str, dtype: str):
    """The ``onnx.ModelProto`` of graph ``kind`` for float type ``dtype``."""
    from onnx import TensorProto, helper

    elem = FLOAT_TYPES[dtype]
    if kind == "concat":
        nodes = [helper.make_node("Concat", ["a", "b"], ["joined"], axis=0)]
        inputs = [helper.make_tensor_value_info(n, elem, None) for n in CONCAT_INPUTS]
        outputs = [helper.make_tensor_value_info("joined", elem, None)]
    elif kind == "reslot":
        const = helper.make_tensor
        nodes = [
            helper.make_node(
                "Constant", [], ["zero"], value=const("zero", TensorProto.INT64, [1], [0])
            ),
            helper.make_node(
                "Constant", [], ["one"], value=const("one", TensorProto.INT64, [1], [1])
            ),
        ]
        for name, out, pads in (
            ("memory", "memory_out", "pads3"),
            ("keys", "keys_out", "pads3"),
            ("mask", "mask_out", "pads2"),
        ):
            nodes += [
                helper.make_node("Gather", [name, "index"], [f"{name}_g"], axis=0),
                # columns 0..width (Slice clamps an end past the old width)
                helper.make_node("Slice", [f"{name}_g", "zero", "width", "one"], [f"{name}_s"]),
            ]
            if name == "mask":  # CUDA's Pad has float kernels only
                nodes += [
                    helper.make_node("Cast", ["mask_s"], ["mask_f"], to=FLOAT),
                    helper.make_node("Pad", ["mask_f", pads], ["mask_p"]),
                    helper.make_node("Cast", ["mask_p"], [out], to=BOOL),
                ]
            else:
                nodes.append(helper.make_node("Pad", [f"{name}_s", pads], [out]))
        inputs = [
            helper.make_tensor_value_info("memory", elem, ["slots", "W", "D"]),
            helper.make_tensor_value_info("keys", elem, ["slots", "W", "K"]),
            helper.make_tensor_value_info("mask", BOOL, ["slots", "W"]),
            helper.make_tensor_value_info("index", INT64, ["n"]),
            helper.make_tensor_value_info("width", INT64, [1]),
            helper.make_tensor_value_info("pads3", INT64, [6]),
            helper.make_tensor_value_info("pads2", INT64, [4]),
        ]
        outputs = [
            helper.make_tensor_value_info("memory_out", elem, ["n", "width", "D"]),
            helper.make_tensor_value_info("keys_out", elem, ["n", "width", "K"]),
            helper.make_tensor_value_info("mask_out", BOOL, ["n", "width"]),
        ]
    else:
        raise ValueError(f"unknown device graph {kind!r}")
    graph = helper.make_graph(nodes, f"{kind}_{dtype}", inputs, outputs)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="service.devicegraphs",
    )
    model.ir_version = 8
    return model


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m service.devicegraphs",
        description="Rewrite the committed device graphs of service/graphs/.",
    )
    parser.parse_args(argv)
    import onnx

    GRAPH_DIR.mkdir(exist_ok=True)
    for kind in ("reslot", "concat"):
        for dtype in FLOAT_TYPES:
            model = build(kind, dtype)
            if kind == "reslot":  # concat's inputs have no fixed rank, which the checker wants
                onnx.checker.check_model(model)
            path = graph_path(kind, dtype)
            path.write_bytes(model.SerializeToString())
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
