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
sentences (binding off and on): an admission's cost by its batch size.

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


def main(argv: Sequence[str] | None = None) -> int:
    from export import spec
    from service.bundle import load_bundle
    from service.runtime import RuntimeConfig
    from service.server import find_bundles

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
        for mode in ("off", "on", *(("graphs",) if args.device == "cuda" else ()))
    }
    cfg = models["off"].config
    rng = np.random.default_rng(0)
    results = []
    graphs = args.device == "cuda"
    print(
        "| rows | binding off ms | binding on ms | binding on, an admission per step ms "
        "| runtime graphs ms | CUDA graph ms | encoder off ms | encoder on ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
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
            1e3 * time_steps(models["graphs"].model, feeds, runs=args.runs)
            if "graphs" in models
            else None
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
        results.append(row)
        cells = (
            row["off_ms"],
            row["on_ms"],
            row["on_admitting_ms"],
            row["runtime_graphs_ms"],
            graph,
            row["encoder_off_ms"],
            row["encoder_on_ms"],
        )
        print(f"| {rows} | " + " | ".join("–" if c is None else f"{c:.3f}" for c in cells) + " |")
    if args.json:
        meta = {"device": args.device, "bundle": str(bundle_dir), "src_len": args.src_len}
        args.json.write_text(json.dumps({"settings": meta, "rows": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
