"""Trace the encoder and one decoder step of a model into ONNX.

The model is a :class:`models.seq2seq.Seq2Seq` or anything with its interface (a
``config`` with the vocabulary sizes, special ids and ``state_names``; ``encode``; a
``decoder`` step), such as :class:`export.modules.AdaptedModel` over a user's modules.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import onnx
import torch
from torch import Tensor, nn

from export import spec
from models.seq2seq import Seq2Seq


class EncoderGraph(nn.Module):
    """``(src_ids, src_lengths) -> (memory, keys, src_mask, *init_state)``."""

    def __init__(self, model: Seq2Seq) -> None:
        super().__init__()
        self.model = model

    def forward(self, src_ids: Tensor, src_lengths: Tensor) -> tuple[Tensor, ...]:
        enc = self.model.encode(src_ids, src_lengths)
        return (enc.memory, enc.keys, enc.mask, *enc.state)


class DecoderStepGraph(nn.Module):
    """One step over ``rows`` hypotheses that share per-sentence encoder memory.

    The state inputs are gathered by ``parent_rows`` first, so a server can feed the
    previous step's state outputs back unchanged (even on the GPU) and express
    beam reordering, retired rows and newly admitted rows as one index vector.
    """

    def __init__(self, model: Seq2Seq) -> None:
        super().__init__()
        self.decoder = model.decoder
        cfg = model.config
        self.eos_id = cfg.eos_id
        names = cfg.state_names
        self.coverage_at = names.index(spec.COVERAGE) if spec.COVERAGE in names else None
        blocked = torch.zeros(cfg.tgt_vocab_size)
        blocked[[cfg.pad_id, cfg.bos_id, cfg.eos_id]] = float("-inf")
        self.register_buffer("blocked", blocked)

    def forward(
        self,
        prev_tokens: Tensor,
        parent_rows: Tensor,
        row_sentence: Tensor,
        memory: Tensor,
        keys: Tensor,
        src_mask: Tensor,
        top_k: Tensor,
        *state: Tensor,
    ) -> tuple[Tensor, ...]:
        """Shapes as documented in :mod:`export.spec`."""
        state = tuple(s.index_select(0, parent_rows) for s in state)
        mask = src_mask.index_select(0, row_sentence)
        if self.coverage_at is not None:
            state = list(state)
            state[self.coverage_at] = _fit_width(state[self.coverage_at], mask)
            state = tuple(state)
        logits, new_state, weights = self.decoder(
            prev_tokens,
            state,
            keys.index_select(0, row_sentence),
            memory.index_select(0, row_sentence),
            mask,
        )
        log_probs = torch.log_softmax(logits, dim=-1)
        eos = log_probs[:, self.eos_id]
        # ``top_k`` is rewired to the K input of TopK after tracing (see _make_k_dynamic);
        # tracing needs a Python int here.
        ranked = log_probs + self.blocked
        if torch.jit.is_tracing():
            values, ids = torch.topk(ranked, int(top_k[0]), dim=-1)
        else:
            # Eager torch.topk leaves the order of equal values unspecified; ONNX TopK puts
            # the lower index first. Run eagerly, this module follows the ONNX rule.
            values, ids = torch.sort(ranked, dim=-1, descending=True, stable=True)
            values, ids = values[:, : int(top_k[0])], ids[:, : int(top_k[0])]
        return (values, ids, eos, weights, *new_state)


def _fit_width(coverage: Tensor, mask: Tensor) -> Tensor:
    """``coverage`` ``(rows, width)`` cut or zero-padded to ``mask``'s ``(rows, src_len)``:
    the server feeds it back at the width its memory pool had (see :mod:`export.spec`)."""
    padded = torch.cat([coverage, torch.zeros_like(mask, dtype=coverage.dtype)], dim=1)
    return padded[:, : mask.size(1)]


def _dummy_inputs(model: Seq2Seq, batch: int, src_len: int):
    cfg = model.config
    specials = {cfg.pad_id, cfg.unk_id, cfg.bos_id, cfg.eos_id}
    pool = torch.tensor([i for i in range(cfg.src_vocab_size) if i not in specials])
    src = pool[torch.randint(len(pool), (batch, src_len))]
    lengths = torch.tensor([src_len] + [max(1, src_len - 2)] * (batch - 1))
    return src, lengths


def _make_k_dynamic(graph_path: Path) -> None:
    """Replace TopK's constant K by the ``top_k`` graph input."""
    m = onnx.load(str(graph_path))
    g = m.graph
    topk = [n for n in g.node if n.op_type == "TopK"]
    if len(topk) != 1:
        raise RuntimeError(f"expected one TopK node in the decoder graph, found {len(topk)}")
    old = topk[0].input[1]
    topk[0].input[1] = spec.TOP_K
    still_used = any(old in n.input for n in g.node)
    if not still_used:
        for container in (g.initializer,):
            for item in list(container):
                if item.name == old:
                    container.remove(item)
        for n in list(g.node):
            if old in n.output and n.op_type == "Constant":
                g.node.remove(n)
    onnx.save(m, str(graph_path))


def _restore_inputs(graph_path: Path, names: list[str], args: tuple[Tensor, ...], axes: dict):
    """Declare again the contract's inputs the tracer dropped because the graph does not
    read them (``top_k`` before it is rewired; ``keys`` of a user's decoder, which
    computes its attention keys itself): the service feeds every contract input."""
    m = onnx.load(str(graph_path))
    present = {i.name for i in m.graph.input}
    for name, tensor in zip(names, args, strict=True):
        if name in present:
            continue
        dims = [axes.get(name, {}).get(d, size) for d, size in enumerate(tensor.shape)]
        elem = onnx.helper.np_dtype_to_tensor_dtype(tensor.numpy().dtype)
        m.graph.input.append(onnx.helper.make_tensor_value_info(name, elem, dims))
    onnx.save(m, str(graph_path))


def _fix_static_dims(graph_path: Path, outputs: tuple[Tensor, ...], axes: dict) -> None:
    """Give output dims that are not dynamic axes their traced size: the tracer names
    some it could not infer (e.g. ``Mulmemory_dim_2``), which would reach the manifest."""
    m = onnx.load(str(graph_path))
    for value, tensor in zip(m.graph.output, outputs, strict=True):
        dynamic = axes.get(value.name, {})
        for d, dim in enumerate(value.type.tensor_type.shape.dim):
            if d not in dynamic and dim.dim_param:
                dim.dim_value = tensor.shape[d]
    onnx.save(m, str(graph_path))


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """File descriptor 2 into a temporary file while torch traces: its C++ ONNX shape
    inference prints warnings there itself, past Python's warning filters (``[W... shape_
    type_inference.cpp] The shape inference of prim::PackPadded type is missing``, for
    every packed RNN: an Eole or Joey NMT encoder), which a redirected stderr would
    collect although the export succeeded. Whether the graph is right is the parity
    gate's to say. What was written comes back to stderr when the tracing fails (what
    a native error or the user's own modules said), and is dropped when it succeeds."""
    sys.stderr.flush()
    saved = os.dup(2)
    failed = False
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if failed:
                caught.seek(0)
                sys.stderr.write(caught.read().decode(errors="replace"))
                sys.stderr.flush()


def export_graphs(model: Seq2Seq, out_dir: Path) -> tuple[Path, Path]:
    """Write ``encoder.onnx`` and ``decoder.onnx`` (fp32) into ``out_dir``."""
    model = model.eval().float()
    cfg = model.config
    names = cfg.state_names
    enc_path, dec_path = out_dir / spec.ENCODER_FILE, out_dir / spec.DECODER_FILE
    # Trace sizes: a user's model picks some no weight has (export.modules.SourceMask).
    src_len, rows = model.trace_sizes() if hasattr(model, "trace_sizes") else (5, 3)
    batch = 2
    src, lengths = _dummy_inputs(model, batch, src_len)
    enc_graph = EncoderGraph(model).eval()
    enc_axes = {spec.SRC_IDS: {0: "batch", 1: "src_len"}, spec.SRC_LENGTHS: {0: "batch"}}
    enc_axes |= {spec.MEMORY: {0: "batch", 1: "src_len"}, spec.KEYS: {0: "batch", 1: "src_len"}}
    enc_axes |= {spec.SRC_MASK: {0: "batch", 1: "src_len"}}
    enc_axes |= {spec.INIT_PREFIX + s: {0: "batch"} for s in names}
    if spec.COVERAGE in names:
        enc_axes[spec.INIT_PREFIX + spec.COVERAGE] = {0: "batch", 1: "src_len"}
    with torch.no_grad(), warnings.catch_warnings(), native_stderr_silenced():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            enc_graph,
            (src, lengths),
            str(enc_path),
            input_names=spec.encoder_inputs(),
            output_names=spec.encoder_outputs(names),
            dynamic_axes=enc_axes,
            opset_version=spec.OPSET,
            dynamo=False,
        )
        enc_outputs = enc_graph(src, lengths)
        memory, keys, mask, *state = enc_outputs
        dec_graph = DecoderStepGraph(model).eval()
        traced_k = 2
        parents = torch.arange(rows).clamp(max=batch - 1)
        dec_args = (
            torch.full((rows,), cfg.bos_id, dtype=torch.long),
            parents,
            parents,
            memory,
            keys,
            mask,
            torch.tensor([traced_k]),
            *state,
        )
        dec_axes = {
            spec.PREV_TOKENS: {0: "rows"},
            spec.PARENT_ROWS: {0: "rows"},
            spec.ROW_SENTENCE: {0: "rows"},
            spec.MEMORY: {0: "sentences", 1: "src_len"},
            spec.KEYS: {0: "sentences", 1: "src_len"},
            spec.SRC_MASK: {0: "sentences", 1: "src_len"},
            spec.TOPK_LOG_PROBS: {0: "rows", 1: "k"},
            spec.TOPK_IDS: {0: "rows", 1: "k"},
            spec.EOS_LOG_PROBS: {0: "rows"},
            spec.ATTENTION: {0: "rows", 1: "src_len"},
        }
        dec_axes |= {s: {0: "prev_rows"} for s in names}
        dec_axes |= {s + spec.STATE_OUT_SUFFIX: {0: "rows"} for s in names}
        if spec.COVERAGE in names:
            dec_axes[spec.COVERAGE] = {0: "prev_rows", 1: "coverage_width"}
            dec_axes[spec.COVERAGE + spec.STATE_OUT_SUFFIX] = {0: "rows", 1: "src_len"}
        torch.onnx.export(
            dec_graph,
            dec_args,
            str(dec_path),
            input_names=spec.decoder_inputs(names),
            output_names=spec.decoder_outputs(names),
            dynamic_axes=dec_axes,
            opset_version=spec.OPSET,
            dynamo=False,
        )
        dec_outputs = dec_graph(*dec_args)
    _fix_static_dims(enc_path, enc_outputs, enc_axes)
    _fix_static_dims(dec_path, dec_outputs, dec_axes)
    _restore_inputs(dec_path, spec.decoder_inputs(names), dec_args, dec_axes)
    _make_k_dynamic(dec_path)
    for path in (enc_path, dec_path):
        onnx.checker.check_model(str(path), full_check=True)
    return enc_path, dec_path
