"""Time one decoder step of a bundle by batch size, the way the decode loop calls it.

``python -m loadtest.stepbench [--device cuda] [--rows 1,8,64,256]``

For each row count it reports the mean wall time of :meth:`OnnxModel.step` with IO
binding off (host arrays in, as the CPU service runs) and on (the memory pool on the
device, :mod:`service.devicepool`, bound where it lies; states left on the device),
and with IO binding on when one sentence is admitted before every step (its encoding
written into the pool's spare slots on the device; the pool compacted as the decode
loop does once half its slots are dead). This separates the per-call cost a device
pays whatever the batch (kernel launches, framework) from the per-row work and from
the cost of admissions. The encoder columns time one encoder call over that many
sentences (binding off and on): an admission's cost by its batch size; "encoder graphs"
the same call the way the runtime makes it beside fixed decoder buffers (on a session of
the call's shape bucket, :mod:`service.encodergraphs`: replayed from a CUDA graph on
CUDA); the "encoder fixed shape" column times the same call on a session whose axes are
fixed at that very shape (:func:`fixed_encoder_session`), on CUDA replayed from a CUDA
graph, and the JSON lists the shape and control-flow ops left in it once folded
(``encoder_dynamic_ops``: none, or ONNX Runtime cannot capture it).

On CUDA it also times the step the way the service runs it by default, replayed from a
CUDA graph on fixed, bucketed buffers (``--cuda-graphs auto``, :mod:`service.cudagraphs`;
the ``runtime graphs`` column; the "binding on" columns are plain steps), and the bare
ONNX Runtime replay (``enable_cuda_graph``; the ``graph`` column): one session per row
count, every input and output bound once to a fixed device buffer, each step uploading
its token ids and reading its top-k back: the floor the runtime's graphs approach.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def time_steps(model, feeds: dict, *, runs: int, admit=None) -> float:
    """Mean seconds of ``model.step(**feeds)`` with the pool and states the model keeps
    (a device pool under IO binding); ``admit``: an encoding of one sentence to add to
    the pool before every step."""
    pool = model.new_pool()
    pool.append(feeds["memory"], feeds["keys"], feeds["mask"])
    rows = feeds["prev_tokens"].shape[0]

    def step(states):
        if admit is not None:
            pool.append(admit.memory, admit.keys, admit.mask)
            if pool.slots >= 2 * rows:
                pool.compact(list(range(rows)), pool.width)
        views = dict(memory=pool.memory, keys=pool.keys, mask=pool.mask)
        # states stay wherever the runtime keeps them
        return model.step(**dict(feeds, states=states, **views)).states

    states = feeds["states"]
    for _ in range(6):  # (a CUDA graph is captured within its first runs)
        states = step(states)
    start = time.perf_counter()
    for _ in range(runs):
        states = step(states)
    return (time.perf_counter() - start) / runs


def time_encoder(model, ids: np.ndarray, lengths: np.ndarray, *, runs: int) -> float:
    """Mean seconds of one :meth:`OnnxModel.encode` call over the sentences ``ids``
    ``(sentences, src_len)``: what an admission of that many sentences costs the encoder
    (under IO binding its outputs stay on the device, as the service keeps them)."""
    for _ in range(3):
        model.encode(ids, lengths)
    start = time.perf_counter()
    for _ in range(runs):
        model.encode(ids, lengths)
    return (time.perf_counter() - start) / runs


def time_graph_steps(path: Path, feeds: dict, *, runs: int) -> float | None:
    """Mean seconds of the decoder ``path`` replayed from a CUDA graph for ``feeds``
    (graph input name -> host array or :class:`service.devicepool.DeviceState`); None
    when ONNX Runtime cannot capture it (its reason is printed)."""
    import onnxruntime as ort

    from export import spec

    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(
            str(path),
            options,
            providers=[("CUDAExecutionProvider", {"enable_cuda_graph": "1"})],
        )
        binding = session.io_binding()
        inputs = {}
        for name, value in feeds.items():
            if hasattr(value, "value"):  # a DeviceState: already on the device
                inputs[name] = value.value
            else:  # TopK's k is read on the host; the rest lives on the device
                where = "cpu" if name == spec.TOP_K else "cuda"
                inputs[name] = ort.OrtValue.ortvalue_from_numpy(value, where, 0)
            binding.bind_ortvalue_input(name, inputs[name])
        # a plain session gives the outputs' shapes and types and the reference result:
        # the graph's session only ever runs with the buffers it is captured with
        plain = ort.InferenceSession(str(path), options, providers=["CUDAExecutionProvider"])
        probe = plain.io_binding()
        for name, value in inputs.items():
            probe.bind_ortvalue_input(name, value)
        names = [o.name for o in session.get_outputs()]
        for name in names:
            probe.bind_output(name, "cuda")
        plain.run_with_iobinding(probe)
        types = {"tensor(float)": np.float32, "tensor(int64)": np.int64}
        outputs = [
            ort.OrtValue.ortvalue_from_shape_and_type(o.shape(), types[o.data_type()], "cuda", 0)
            for o in probe.get_outputs()
        ]
        for name, value in zip(names, outputs, strict=True):
            binding.bind_ortvalue_output(name, value)
        tokens = feeds[spec.PREV_TOKENS]

        def step() -> None:
            inputs[spec.PREV_TOKENS].update_inplace(tokens)
            session.run_with_iobinding(binding)
            outputs[0].numpy(), outputs[1].numpy()  # top-k values and ids to the host

        for _ in range(3):  # the first run captures the graph
            step()
        start = time.perf_counter()
        for _ in range(runs):
            step()
        seconds = (time.perf_counter() - start) / runs
        # the replayed graph computes what the plain session did
        if not np.array_equal(outputs[1].numpy(), probe.get_outputs()[1].numpy()):
            print("no CUDA graph: its top-k ids differ from the plain step's", file=sys.stderr)
            return None
        return seconds
    except Exception as exc:  # noqa: BLE001 - ORT refuses graphs with nodes off the GPU
        print(f"no CUDA graph: {str(exc).strip().splitlines()[0][:300]}", file=sys.stderr)
        return None


# Ops that make a graph dynamic: shape computations (which ONNX Runtime's CUDA provider
# leaves on the CPU) and control flow. A CUDA graph can hold none of them.
DYNAMIC_OPS = ("Shape", "Size", "If", "Loop", "Range", "ConstantOfShape", "NonZero")


def fixed_encoder_session(path: Path, batch: int, src_len: int, device: str, *, optimized=None):
    """An encoder session whose ``batch`` and ``src_len`` axes are fixed (ONNX Runtime's
    free-dimension overrides): its shape computations, the ``If`` the trace of the
    bidirectional reversal left and every op they feed fold into constants, so on CUDA it
    may be captured (``enable_cuda_graph``) like a decoder step. ``optimized``: where
    ONNX Runtime writes the folded graph."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    probe = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    axes = probe.get_inputs()[0].shape  # the names of src_ids' (batch, src_len) axes
    for name, size in zip(axes, (batch, src_len), strict=True):
        options.add_free_dimension_override_by_name(name, size)
    if optimized is not None:
        options.optimized_model_filepath = str(optimized)
    if device == "cuda":
        providers = [("CUDAExecutionProvider", {"enable_cuda_graph": "1"})]
    else:
        providers = ["CPUExecutionProvider"]
    return ort.InferenceSession(str(path), options, providers=providers)


def dynamic_ops(path: Path, batch: int, src_len: int) -> list[str]:
    """The :data:`DYNAMIC_OPS` left in the encoder ``path`` once its axes are fixed at
    ``batch`` x ``src_len`` and ONNX Runtime has optimised it (none: it can be captured)."""
    import tempfile

    import onnx

    with tempfile.TemporaryDirectory() as tmp:
        folded = Path(tmp) / "encoder.onnx"
        fixed_encoder_session(path, batch, src_len, "cpu", optimized=folded)
        graph = onnx.load(str(folded)).graph
    return sorted({n.op_type for n in graph.node if n.op_type in DYNAMIC_OPS})


def time_encoder_graph(
    path: Path, ids: np.ndarray, lengths: np.ndarray, device: str, *, runs: int
) -> float | None:
    """Mean seconds of one call of the encoder ``path`` over ``ids`` ``(sentences,
    src_len)`` on a session with both axes fixed (:func:`fixed_encoder_session`), inputs
    and outputs bound once to fixed buffers, the ids and lengths written in place each
    call: on CUDA a replay of a captured graph, on the CPU plain runs of the folded graph.
    None (the reason printed) when ONNX Runtime cannot run it so, or its memory differs
    from a plain session's."""
    import onnxruntime as ort

    from export import spec

    try:
        session = fixed_encoder_session(path, *ids.shape, device)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        plain = ort.InferenceSession(str(path), options, providers=session.get_providers())
        feeds = {spec.SRC_IDS: ids, spec.SRC_LENGTHS: lengths}
        want = plain.run(None, feeds)
        binding = session.io_binding()
        inputs = {n: ort.OrtValue.ortvalue_from_numpy(v, device, 0) for n, v in feeds.items()}
        for name, value in inputs.items():
            binding.bind_ortvalue_input(name, value)
        outputs = [ort.OrtValue.ortvalue_from_numpy(np.zeros_like(w), device, 0) for w in want]
        for out, value in zip(session.get_outputs(), outputs, strict=True):
            binding.bind_ortvalue_output(out.name, value)

        def call() -> None:
            for name, value in inputs.items():
                value.update_inplace(feeds[name])
            session.run_with_iobinding(binding)

        for _ in range(3):  # (on CUDA the first run captures the graph)
            call()
        start = time.perf_counter()
        for _ in range(runs):
            call()
        seconds = (time.perf_counter() - start) / runs
        if not np.allclose(outputs[0].numpy(), want[0], atol=1e-5):
            print("no fixed-shape encoder: its memory differs from a plain call's", file=sys.stderr)
            return None
        return seconds
    except Exception as exc:  # noqa: BLE001 - ORT's own error types (a capture refused)
        print(f"no fixed-shape encoder: {str(exc).strip().splitlines()[0][:300]}", file=sys.stderr)
        return None


def main(argv: Sequence[str] | None = None) -> int:
    from export import spec
    from service.bundle import load_bundle
    from service.server import find_bundles
    from service.sessions import RuntimeConfig

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    p.add_argument("--model", default="en-es")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--rows", default="1,8,64,256")
    p.add_argument("--src-len", type=int, default=16, help="source positions per sentence")
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    providers = ("cuda",) if args.device == "cuda" else ("cpu",)
    bundle_dir = find_bundles(args.model_repository, gpu=args.device == "cuda")[args.model]
    models = {
        mode: load_bundle(
            bundle_dir,
            RuntimeConfig(
                providers=providers,
                require_gpu=args.device == "cuda",
                io_binding="on" if mode == "graphs" else mode,
                cuda_graphs="on" if mode == "graphs" else "off",
            ),
        )
        for mode in ("off", "on", "graphs")
    }
    cfg = models["off"].config
    rng = np.random.default_rng(0)
    results = []
    graphs = args.device == "cuda"
    print(
        "| rows | binding off ms | binding on ms | binding on, an admission per step ms "
        "| runtime graphs ms | CUDA graph ms | encoder off ms | encoder on ms "
        "| encoder graphs ms | encoder fixed shape ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rows in [int(r) for r in args.rows.split(",") if r.strip()]:
        ids = rng.integers(4, cfg.src_vocab_size, (rows + 1, args.src_len)).astype(np.int64)
        lengths = np.full(rows, args.src_len, dtype=np.int64)
        enc = models["off"].model.encode(ids[:rows], lengths)
        one = models["on"].model.encode(ids[rows:], lengths[:1])
        index = np.arange(rows, dtype=np.int64)
        feeds = dict(
            prev_tokens=rng.integers(4, cfg.tgt_vocab_size, rows).astype(np.int64),
            parent_rows=index,
            row_sentence=index,
            memory=enc.memory,
            keys=enc.keys,
            mask=enc.mask,
            states=enc.states,
            top_k=1,
        )
        row = {
            "rows": rows,
            "off_ms": 1e3 * time_steps(models["off"].model, feeds, runs=args.runs),
            "on_ms": 1e3 * time_steps(models["on"].model, feeds, runs=args.runs),
            "on_admitting_ms": 1e3
            * time_steps(models["on"].model, feeds, runs=args.runs, admit=one),
        }
        row["runtime_graphs_ms"] = (
            1e3 * time_steps(models["graphs"].model, feeds, runs=args.runs) if graphs else None
        )
        graph = None
        if graphs:
            graph_feeds = {
                spec.PREV_TOKENS: feeds["prev_tokens"],
                spec.PARENT_ROWS: index,
                spec.ROW_SENTENCE: index,
                spec.TOP_K: np.array([1], dtype=np.int64),
            }
            on = models["on"].model.encode(ids[:rows], lengths)
            graph_feeds |= {spec.MEMORY: on.memory, spec.KEYS: on.keys, spec.SRC_MASK: on.mask}
            graph_feeds |= dict(zip(models["on"].model.state_names, on.states, strict=True))
            seconds = time_graph_steps(bundle_dir / spec.DECODER_FILE, graph_feeds, runs=args.runs)
            graph = None if seconds is None else 1e3 * seconds
        row["graph_ms"] = graph
        encoder_runs = max(2, args.runs // 4)
        for mode in ("off", "on"):
            row[f"encoder_{mode}_ms"] = 1e3 * time_encoder(
                models[mode].model, ids[:rows], lengths, runs=encoder_runs
            )
        # the runtime's fixed-shape encoder calls (service.encodergraphs; replayed on CUDA;
        # none past its buckets, where the runtime encodes the plain way)
        fixed = models["graphs"].model
        fits = fixed.encoder_graphs is not None and fixed.encoder_graphs.bucket(rows, args.src_len)
        row["encoder_graphs_ms"] = (
            1e3 * time_encoder(fixed, ids[:rows], lengths, runs=encoder_runs) if fits else None
        )
        encoder_path = bundle_dir / spec.ENCODER_FILE
        seconds = time_encoder_graph(
            encoder_path, ids[:rows], lengths, args.device, runs=encoder_runs
        )
        row["encoder_fixed_ms"] = None if seconds is None else 1e3 * seconds
        row["encoder_dynamic_ops"] = dynamic_ops(encoder_path, rows, args.src_len)
        results.append(row)
        cells = (
            row["off_ms"],
            row["on_ms"],
            row["on_admitting_ms"],
            row["runtime_graphs_ms"],
            graph,
            row["encoder_off_ms"],
            row["encoder_on_ms"],
            row["encoder_graphs_ms"],
            row["encoder_fixed_ms"],
        )
        print(f"| {rows} | " + " | ".join("–" if c is None else f"{c:.3f}" for c in cells) + " |")
    if args.json:
        meta = {"device": args.device, "bundle": str(bundle_dir), "src_len": args.src_len}
        args.json.write_text(json.dumps({"settings": meta, "rows": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
