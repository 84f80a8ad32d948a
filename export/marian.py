"""Marian RNN models: ``nmt-convert marian model.npz --vocabs SRC TGT --out DIR``.

Load -> validate -> declare, as the other converters: the ``model.npz`` Marian's trainer
wrote for ``--type s2s`` (numpy arrays and the ``special:model.yml`` entry holding the
model's options; read with ``allow_pickle=False``) and its vocabularies (Marian's ``.yml``
/ ``.json`` token -> id maps, or its SentencePiece ``.spm``) become two modules that
compute what Marian's ``EncoderS2S`` and one step of ``DecoderS2S`` compute at inference
time (``src/models/s2s.h``, ``src/rnn/*``); every option they cannot express is refused
by name.

What Marian does that the bundle reproduces (``marian-decoder``, one sentence a batch):

* the source is split on spaces (or by the ``.spm`` model), ``</s>`` appended; the
  target's first step embeds a zero vector (Marian has no BOS): the bundle's ``<s>`` and
  ``<pad>`` get ids after the vocabulary's and zero embeddings, and never win a step;
* cells: ``gru`` (``rnn::GRU`` with its ``final`` flag, the reset gate over the recurrent
  bias or not) and ``lstm`` (``rnn::FastLSTM``, gates f, i, c, o), stacked in depth
  (transition cells take no input), ``--skip`` connections, ``--layer-normalization``
  (Marian's: eps 1e-9, no beta except where the bias stands in); the decoder's base cell
  is the conditional one: cell 1, attention (``rnn::GlobalAttention``: additive, the
  source's projection computed once, here by the encoder), cell 2 on the attended context,
  then transitions; the deep output ``tanh(E y + S h + C c)`` then the output layer
  (tied to an embedding matrix or not);
* its beam search (``src/translator/beam_search.cpp``): the beam shrinks by each
  hypothesis that ends (``search="marian"``); a hypothesis's score is ``log_prob /
  length ** normalize`` (length counting EOS); after ``max-length-factor x source
  tokens`` (EOS counted) target tokens every live hypothesis ends without EOS; ``<unk>``
  is never produced (``--allow-unk`` off).
"""

from __future__ import annotations

import json
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from torch import Tensor, nn

from export.signature import Signature
from export.user import UserModel
from models.pieces import PieceTokenizer
from models.tokenizer import TokenizerError, sentencepiece_processor
from models.words import WordTokenizer

CELLS = ("gru", "lstm")
ENC_TYPES = ("bidirectional", "bi-unidirectional")
# marian-decoder's defaults (src/common/config_parser.cpp)
DECODER = {"normalize": 0.0, "word-penalty": 0.0, "max-length-factor": 3.0}
# Marian checks no source longer than --max-length (1000) at translation time; the
# bundle's limit needs a number: this many target tokens at most, whatever the source
MAX_TARGET = 3001


class MarianError(ValueError):
    """A Marian model that cannot be read or that uses an option the bundle lacks."""


def _layer_norm(x: Tensor, gamma: Tensor, beta: Tensor) -> Tensor:
    """Marian's ``layerNorm(x, gamma, beta, 1e-9)`` over the last axis."""
    centred = x - x.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + 1e-9)
    return gamma * centred / sigma + beta


def _weighted_sum(weights: Tensor, values: Tensor) -> Tensor:
    """``sum_s weights[b, s] values[b, s]``: ``(B,S)``, ``(B,S,D)`` -> ``(B,D)``, each
    row's sum in the same order whatever the batch and its padding. A batched product
    of two rows (the same row twice): ONNX Runtime multiplies a single row by a
    non-constant matrix in an order that changes with the padding (1e-7 apart, which an
    int8 graph's per-row scales turn into 1e-4), and sums over ``(B,S,D)`` in an order
    that changes with B."""
    return torch.bmm(weights.unsqueeze(1).expand(-1, 2, -1), values)[:, 0]


@torch.jit.script
def _cell(xw: Tensor, su: Tensor, h: Tensor, c: Tensor, m: Tensor, b: Tensor, gamma: Tensor,
          lstm: bool, ln: bool, final: bool) -> tuple[Tensor, Tensor]:  # fmt: skip
    """One step of a Marian cell (module docstring): ``xw`` ``(B,G)`` its input's
    projection (zeros for a transition), ``su`` ``(B,G)`` the state's (``h U``), ``h``/``c``
    ``(B,H)``, ``m`` ``(B,1)`` 1 at real positions (0 holds the state); a GRU's ``c``
    passes through."""
    if ln:
        su = _layer_norm(su, gamma, torch.zeros_like(gamma))
    n = h.shape[-1]
    if lstm:  # FastLSTM: gates f, i, candidate, o; the mask holds the cell
        g = xw + su + b
        cell = torch.sigmoid(g[:, :n]) * c + torch.sigmoid(g[:, n : 2 * n]) * torch.tanh(
            g[:, 2 * n : 3 * n]
        )
        cell = m * cell + (1.0 - m) * c
        return torch.sigmoid(g[:, 3 * n :]) * torch.tanh(cell), cell
    r = torch.sigmoid(xw[:, :n] + su[:, :n] + b[:n])
    z = torch.sigmoid(xw[:, n : 2 * n] + su[:, n : 2 * n] + b[n : 2 * n])
    if final:  # the reset gate also scales the candidate's bias
        cand = torch.tanh(xw[:, 2 * n :] + (su[:, 2 * n :] + b[2 * n :]) * r)
    else:
        cand = torch.tanh(xw[:, 2 * n :] + su[:, 2 * n :] * r + b[2 * n :])
    out = (1.0 - z) * cand + z * h
    return m * out + (1.0 - m) * h, c


# The encoder's loop over the source, scripted (the source length is the graph's: an ONNX
# Loop), one function per number of cells in a stack. Generated, not a loop over a list
# of weights: a list reaches ONNX as a sequence, whose items are no constants in the
# loop's body, and ONNX Runtime multiplies one row by a non-constant matrix in another
# order than several (1e-6 apart: a sentence's states would depend on its batch mates).
_RECUR = """
def recur(xw: Tensor, mask: Tensor, {weights}, lstm: bool, ln: bool) -> Tensor:
    batch, size = xw.shape[0], u0.shape[0]
    h = torch.zeros(batch, size, dtype=xw.dtype)
    c = torch.zeros(batch, size, dtype=xw.dtype)
    outs: list[Tensor] = []
    for t in range(xw.shape[1]):
        m = mask[:, t]
        x = xw[:, t]
{cells}
        outs.append(h)
    return torch.stack(outs, dim=1)
"""
_RECUR_CELL = "        h, c = _cell({x}, h @ u{k}, h, c, m, b{k}, g{k}, lstm, ln, False)"
_recurrences: dict[int, Any] = {}


def _recurrence(cells: int):
    """``recur(xw (B,S,G), mask (B,S,1), u0, b0, g0, ..., lstm, ln) -> (B,S,H)``: a stack
    of ``cells`` encoder cells (the first reads ``xw``, the rest are transitions) run
    over every position, forwards."""
    if cells not in _recurrences:
        weights = ", ".join(f"u{k}: Tensor, b{k}: Tensor, g{k}: Tensor" for k in range(cells))
        zeros = "torch.zeros(batch, u{k}.shape[1], dtype=xw.dtype)"
        body = "\n".join(
            _RECUR_CELL.format(x="x" if k == 0 else zeros.format(k=k), k=k) for k in range(cells)
        )
        unit = torch.jit.CompilationUnit(_RECUR.format(weights=weights, cells=body))
        _recurrences[cells] = unit.recur
    return _recurrences[cells]


class Cell(nn.Module):
    """One Marian RNN cell (its weights and flags; :func:`_cell` computes it).
    ``project(x (B,..,In)) -> xw (B,..,G)``; ``forward(xw (B,G), h (B,H), c (B,H)) ->
    (h, c)`` (no mask: the decoder's); a transition cell (no input) takes
    :meth:`no_input`."""

    def __init__(self, w: dict[str, Tensor], prefix: str, kind: str, *, final: bool,
                 ln: bool, has_input: bool) -> None:  # fmt: skip
        super().__init__()
        self.lstm, self.final, self.ln = kind == "lstm", final, ln

        def weight(name: str) -> Tensor:  # a GRU keeps its candidate's weights apart
            parts = [w[prefix + name]] + ([] if self.lstm else [w[prefix + name + "x"]])
            return torch.cat(parts, dim=1)

        self.U = nn.Parameter(weight("_U"))
        self.b = nn.Parameter(weight("_b")[0])
        size = self.U.shape[1]
        self.W = nn.Parameter(weight("_W")) if has_input else None
        ones = torch.ones(size)
        self.gamma1 = nn.Parameter(w[prefix + "_gamma1"][0] if ln and has_input else ones)
        self.gamma2 = nn.Parameter(w[prefix + "_gamma2"][0] if ln else ones)

    def project(self, x: Tensor) -> Tensor:
        xw = x @ self.W
        return _layer_norm(xw, self.gamma1, torch.zeros_like(self.gamma1)) if self.ln else xw

    def no_input(self, h: Tensor) -> Tensor:
        return torch.zeros(h.shape[0], self.U.shape[1], dtype=h.dtype)

    def forward(self, xw: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        ones = torch.ones(1, 1, dtype=h.dtype)
        su = h @ self.U
        return _cell(xw, su, h, c, ones, self.b, self.gamma2, self.lstm, self.ln, self.final)


class Stack(nn.Module):
    """Marian's ``StackedCell`` without attention: ``first`` reads the input, each of
    ``rest`` is a transition. ``forward(x (B,In), h, c) -> (h, c)``."""

    def __init__(self, first: Cell, rest: list[Cell]) -> None:
        super().__init__()
        self.first, self.rest = first, nn.ModuleList(rest)

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        h, c = self.first(self.first.project(x), h, c)
        for cell in self.rest:
            h, c = cell(cell.no_input(h), h, c)
        return h, c


class Recurrence(nn.Module):
    """One encoder layer in one direction over a whole source (:func:`_recurrence`).
    ``forward(x (B,S,In), mask (B,S,1)) -> (B,S,H)``; a reversed layer runs from the last
    position, its state held at zero over the padding (the mask), so a sentence's states
    do not depend on its batch mates."""

    def __init__(self, stack: Stack, reverse: bool) -> None:
        super().__init__()
        self.stack, self.reverse = stack, reverse

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        cells = [self.stack.first, *self.stack.rest]
        xw = self.stack.first.project(x)
        if self.reverse:
            xw, mask = xw.flip([1]), mask.flip([1])
        weights = [t for k in cells for t in (k.U, k.b, k.gamma2)]
        out = _recurrence(len(cells))(xw, mask, *weights, cells[0].lstm, cells[0].ln)
        return out.flip([1]) if self.reverse else out


class Dense(nn.Module):
    """Marian's ``mlp::dense`` over several inputs: ``tanh(sum_i in_i W_i + b_i)``, each
    term layer-normalised (gamma, with ``b_i`` as beta) under ``--layer-normalization``."""

    def __init__(self, w: dict[str, Tensor], prefix: str, inputs: int, ln: bool) -> None:
        super().__init__()
        nums = [""] if inputs == 1 else [str(i) for i in range(inputs)]
        self.W = nn.ParameterList([nn.Parameter(w[f"{prefix}_W{n}"]) for n in nums])
        self.b = nn.ParameterList([nn.Parameter(w[f"{prefix}_b{n}"][0]) for n in nums])
        self.gamma = (
            nn.ParameterList([nn.Parameter(w[f"{prefix}_gamma{n}"][0]) for n in nums])
            if ln else None
        )  # fmt: skip

    def forward(self, *inputs: Tensor) -> Tensor:
        total = 0
        for i, x in enumerate(inputs):
            y = x @ self.W[i]
            total = total + (
                _layer_norm(y, self.gamma[i], self.b[i]) if self.gamma is not None
                else y + self.b[i]
            )  # fmt: skip
        return torch.tanh(total)


class MarianEncoder(nn.Module):
    """``EncoderS2S`` and the decoder's start state.

    ``forward(src (B,S) int64, lengths (B,)) -> (memory (B,S,2D), hidden)``: ``memory``
    is the context ``(B,S,D)`` (``D`` = 2 x dim-rnn) followed by its projection for the
    attention (``context Wc_att + b_att``, computed once here rather than at every step);
    ``hidden`` ``(layers,B,H)`` (``(h, c)`` for LSTM) the start state ``tanh(mean(context)
    W + b)`` of every decoder layer. Ids past the vocabulary (the bundle's pad, markers)
    read as ``<unk>``; padding never reaches a real position (the mask).
    """

    def __init__(self, embed: Tensor, forward: list[Recurrence], backward: list[Recurrence],
                 uni: list[Recurrence], start: Dense, att_w: Tensor, att_b: Tensor,
                 att_gamma: Tensor | None, layers: int, lstm: bool,
                 skip: bool) -> None:  # fmt: skip
        super().__init__()
        self.embed = nn.Parameter(embed)
        self.forward_layers = nn.ModuleList(forward)
        self.backward_layers = nn.ModuleList(backward)
        self.uni_layers = nn.ModuleList(uni)
        self.start = start
        self.att_W, self.att_b = nn.Parameter(att_w), nn.Parameter(att_b)
        self.att_gamma = None if att_gamma is None else nn.Parameter(att_gamma)
        self.layers, self.lstm, self.skip = layers, lstm, skip

    def _stack(self, layers: nn.ModuleList, x: Tensor, mask: Tensor) -> Tensor:
        for i, layer in enumerate(layers):
            out = layer(x, mask)
            x = out + x if self.skip and i > 0 else out
        return x

    def forward(self, src: Tensor, lengths: Tensor):
        vocab = self.embed.shape[0]
        src = torch.where(src < vocab, src, torch.ones_like(src))  # <unk>
        x = self.embed[src]
        positions = torch.arange(src.shape[1], device=src.device).unsqueeze(0)
        mask = (positions < lengths.unsqueeze(1)).to(x.dtype).unsqueeze(2)  # (B,S,1)
        context = torch.cat(
            [self._stack(self.forward_layers, x, mask), self._stack(self.backward_layers, x, mask)],
            dim=2,
        )
        # the unidirectional layers above a bi-unidirectional encoder's first: no mask
        context = self._stack(self.uni_layers, context, torch.ones_like(mask))
        mean = _weighted_sum(mask.squeeze(2), context) / mask.sum(dim=1)
        start = self.start(mean)  # (B,H)
        mapped = context @ self.att_W
        mapped = (
            _layer_norm(mapped, self.att_gamma, self.att_b) if self.att_gamma is not None
            else mapped + self.att_b
        )  # fmt: skip
        hidden = start.unsqueeze(0).expand(self.layers, -1, -1).contiguous()
        return torch.cat([context, mapped], dim=2), ((hidden, hidden) if self.lstm else hidden)


class MarianStep(nn.Module):
    """One step of ``DecoderS2S`` and its output layer.

    ``forward(token (B,), hidden (layers,B,H) or (h, c), memory (B,S,2D), mask (B,S)
    bool) -> (logits (B,V+2), hidden, attention (B,S))``: ``token`` past the vocabulary
    (the bundle's ``<s>``, ``<pad>``) embeds zeros; their two logits are -inf.
    """

    def __init__(self, embed: Tensor, base: list[Cell], high: list[Stack], att: dict[str, Tensor],
                 deep: Dense, out_w: Tensor, out_b: Tensor | None, skip: bool) -> None:  # fmt: skip
        super().__init__()
        zeros = torch.zeros(2, embed.shape[1])  # the bundle's pad and bos
        self.embed = nn.Parameter(torch.cat([embed, zeros]))
        self.base, self.high = nn.ModuleList(base), nn.ModuleList(high)
        self.att_W, self.att_v = nn.Parameter(att["W"]), nn.Parameter(att["v"])  # v: (D,1)
        self.att_gamma = None if att.get("gamma") is None else nn.Parameter(att["gamma"])
        self.deep = deep
        self.out_W = nn.Parameter(out_w)  # (V, dim-emb)
        self.out_b = None if out_b is None else nn.Parameter(out_b)
        self.skip = skip

    def forward(self, token: Tensor, hidden, memory: Tensor, mask: Tensor):
        lstm = isinstance(hidden, (tuple, list))
        hs, cs = (hidden[0], hidden[1]) if lstm else (hidden, hidden)
        y = self.embed[token]
        # the conditional cell: cell 1, attention, cell 2 on the context, transitions
        h, c = self.base[0](self.base[0].project(y), hs[0], cs[0])
        width = memory.shape[2] // 2
        context, mapped = memory[:, :, :width], memory[:, :, width:]
        query = h @ self.att_W
        if self.att_gamma is not None:
            query = _layer_norm(query, self.att_gamma, torch.zeros_like(self.att_gamma))
        energy = (torch.tanh(mapped + query.unsqueeze(1)) @ self.att_v).squeeze(2)  # (B,S)
        attention = torch.softmax(energy.masked_fill(~mask, float("-inf")), dim=1)
        attended = _weighted_sum(attention, context)
        h, c = self.base[1](self.base[1].project(attended), h, c)
        for cell in self.base[2:]:
            h, c = cell(cell.no_input(h), h, c)
        new_h, new_c, out = [h], [c], h
        for i, stack in enumerate(self.high, start=1):
            h, c = stack(out, hs[i], cs[i])
            new_h.append(h)
            new_c.append(c)
            out = h + out if self.skip else h
        logits = self.deep(y, out, attended) @ self.out_W.t()
        if self.out_b is not None:
            logits = logits + self.out_b
        logits = torch.cat([logits, torch.full_like(logits[:, :2], float("-inf"))], dim=1)
        hidden = (torch.stack(new_h), torch.stack(new_c)) if lstm else torch.stack(new_h)
        return logits, hidden, attention


@dataclass
class MarianModel:
    """What the converter reads of a ``model.npz``."""

    path: Path
    options: dict[str, Any]  # special:model.yml
    weights: dict[str, Tensor]

    @classmethod
    def read(cls, path: Path) -> MarianModel:
        if path.suffix == ".bin":
            raise MarianError(f"{path}: Marian's binary format is not read: give the .npz")
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except FileNotFoundError:
            raise MarianError(f"model not found: {path}") from None
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise MarianError(f"{path}: not a readable Marian .npz model ({exc})") from None
        spec = arrays.pop("special:model.yml", None)
        if spec is None:
            raise MarianError(f"{path} holds no special:model.yml: not a Marian model")
        try:
            options = yaml.safe_load(spec.tobytes().rstrip(b"\0").decode("utf-8"))
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            raise MarianError(f"{path}: its special:model.yml is not YAML ({exc})") from None
        weights = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in arrays.items()}
        return cls(path, options if isinstance(options, dict) else {}, weights)


def _refuse(what: str, value: Any, supported: str) -> MarianError:
    return MarianError(f"{what}: {value!r} is not supported (supported: {supported})")


def check_options(model: MarianModel) -> None:
    """Refuse, by name, what the modules above do not compute."""
    o = model.options
    kind = o.get("type")
    if kind != "s2s":
        hint = " (Transformers: CTranslate2 converts Marian's)" if kind == "transformer" else ""
        raise _refuse("--type", kind, "s2s, Marian's RNN encoder-decoder" + hint)
    if o.get("original-type") not in (None, "s2s"):
        raise _refuse("original-type", o.get("original-type"), "s2s")
    for flag in ("enc-cell", "dec-cell"):
        if o.get(flag, "gru") not in CELLS:
            raise _refuse(f"--{flag}", o.get(flag), ", ".join(CELLS))
    if o.get("enc-type", "bidirectional") not in ENC_TYPES:
        raise _refuse("--enc-type", o.get("enc-type"), ", ".join(ENC_TYPES))
    if int(o.get("dec-cell-base-depth", 2)) < 2:
        raise _refuse("--dec-cell-base-depth", o.get("dec-cell-base-depth"), ">= 2")
    if o.get("right-left"):
        raise _refuse("--right-left", True, "left-to-right models")
    vocabs = [str(v) for v in o.get("vocabs") or []]
    if any(v.endswith(".fsv") for v in vocabs):
        raise _refuse("factored vocabulary", vocabs, ".yml, .json or .spm vocabularies")
    if len(o.get("dim-vocabs") or []) != 2:
        raise _refuse("inputs", len(o.get("dim-vocabs") or []), "one source and one target")


def build_modules(model: MarianModel) -> tuple[MarianEncoder, MarianStep]:
    """The encoder and step modules (sizes read off the options and the weights)."""
    o, w = model.options, model.weights
    ln, skip = bool(o.get("layer-normalization")), bool(o.get("skip"))
    enc_cell, dec_cell = o.get("enc-cell", "gru"), o.get("dec-cell", "gru")
    depth, cell_depth = int(o.get("enc-depth", 1)), int(o.get("enc-cell-depth", 1))
    bi_layers = depth if o.get("enc-type", "bidirectional") == "bidirectional" else 1

    def recurrence(prefix: str, i: int, reverse: bool) -> Recurrence:
        names = [prefix + (f"_l{i}" if i > 1 else "") + (f"_cell{j}" if i > 1 or j > 1 else "")
                 for j in range(1, cell_depth + 1)]  # fmt: skip
        cells = [Cell(w, n, enc_cell, final=False, ln=ln, has_input=j == 0)
                 for j, n in enumerate(names)]  # fmt: skip
        return Recurrence(Stack(cells[0], cells[1:]), reverse)

    forward = [recurrence("encoder_bi", i, False) for i in range(1, bi_layers + 1)]
    backward = [recurrence("encoder_bi_r", i, True) for i in range(1, bi_layers + 1)]
    uni = []
    for i in range(bi_layers + 1, depth + 1):
        names = [f"encoder_l{i}_cell{j}" for j in range(1, cell_depth + 1)]
        cells = [Cell(w, n, enc_cell, final=False, ln=ln, has_input=j == 0)
                 for j, n in enumerate(names)]  # fmt: skip
        uni.append(Recurrence(Stack(cells[0], cells[1:]), False))
    layers = int(o.get("dec-depth", 1))
    encoder = MarianEncoder(
        w["encoder_Wemb"] if "encoder_Wemb" in w else w["Wemb"],
        forward, backward, uni, Dense(w, "decoder_ff_state", 1, ln),
        w["decoder_Wc_att"], w["decoder_b_att"][0],
        w["decoder_att_gamma1"][0] if ln else None, layers, dec_cell == "lstm", skip,
    )  # fmt: skip

    base = [Cell(w, f"decoder_cell{i}", dec_cell, final=i > 1, ln=ln, has_input=i <= 2)
            for i in range(1, int(o.get("dec-cell-base-depth", 2)) + 1)]  # fmt: skip
    high = []
    for i in range(2, layers + 1):
        cells = [Cell(w, f"decoder_l{i}_cell{j}", dec_cell, final=False, ln=ln, has_input=j == 1)
                 for j in range(1, int(o.get("dec-cell-high-depth", 1)) + 1)]  # fmt: skip
        high.append(Stack(cells[0], cells[1:]))
    att = {"W": w["decoder_W_comb_att"], "v": w["decoder_U_att"],
           "gamma": w["decoder_att_gamma2"][0] if ln else None}  # fmt: skip
    target_embed = w["decoder_Wemb"] if "decoder_Wemb" in w else w["Wemb"]
    if "decoder_ff_logit_l2_Wt" in w:
        out_w = w["decoder_ff_logit_l2_Wt"]
    elif o.get("tied-embeddings-all") or o.get("tied-embeddings-src"):
        out_w = w["Wemb"]
    else:
        out_w = w["decoder_Wemb"]
    step = MarianStep(
        target_embed, base, high, att, Dense(w, "decoder_ff_logit_l1", 3, ln), out_w,
        w["decoder_ff_logit_l2_b"][0] if "decoder_ff_logit_l2_b" in w else None, skip,
    )  # fmt: skip
    return encoder.eval(), step.eval()


def read_vocabulary(path: Path) -> tuple[list[str], bytes | None]:
    """A Marian vocabulary as its tokens by id, and the SentencePiece model's bytes for an
    ``.spm`` one (Marian's ids are SentencePiece's: ``</s>`` 0, ``<unk>`` 1). A ``.yml``
    or ``.json`` one maps each token to its id (read as strings: ``yes`` and ``010`` are
    tokens, not a boolean and eight)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MarianError(f"vocabulary {path}: {exc.strerror or exc}") from None
    if path.suffix == ".spm":
        try:
            sp = sentencepiece_processor(raw)
        except (TokenizerError, RuntimeError, OSError) as exc:
            raise MarianError(f"vocabulary {path}: not a SentencePiece model ({exc})") from None
        return [sp.id_to_piece(i) for i in range(sp.get_piece_size())], raw
    try:
        text = raw.decode("utf-8")
        entries = json.loads(text) if path.suffix == ".json" else yaml.load(text, yaml.BaseLoader)
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise MarianError(f"vocabulary {path}: not a Marian vocabulary ({exc})") from None
    if not isinstance(entries, dict) or not entries:
        raise MarianError(f"vocabulary {path}: not a 'token: id' map (.yml, .json or .spm)")
    tokens: list[str | None] = [None] * len(entries)
    for token, value in entries.items():
        number = int(value) if str(value).isdigit() else -1
        if not 0 <= number < len(tokens) or tokens[number] is not None:
            raise MarianError(
                f"vocabulary {path}: {token!r} has id {value!r}; ids must be 0..{len(tokens) - 1}"
                ", each once"
            )
        tokens[number] = str(token)
    return tokens, None  # type: ignore[return-value]


def decoder_yml(model: MarianModel) -> dict[str, Any]:
    """The ``model.npz.decoder.yml`` Marian's trainer writes beside the model ({} if none):
    its vocabularies and decoding options."""
    found = model.path.with_name(model.path.name + ".decoder.yml")
    if not found.is_file():
        return {}
    try:
        loaded = yaml.safe_load(found.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MarianError(f"{found}: not readable YAML ({exc})") from None
    return loaded if isinstance(loaded, dict) else {}


def _vocab_paths(model: MarianModel, given: list[Path] | None) -> list[Path]:
    """The two vocabularies: given, else those the model was trained with, found as
    recorded or beside the model."""
    if given:
        if len(given) != 2:
            raise MarianError(f"--vocabs takes a source and a target vocabulary, not {len(given)}")
        return given
    paths = []
    recorded_vocabs = model.options.get("vocabs") or decoder_yml(model).get("vocabs") or []
    for recorded in recorded_vocabs:
        path = Path(str(recorded))
        beside = model.path.parent / path.name
        paths.append(path if path.is_file() else beside)
    if len(paths) != 2 or not all(p.is_file() for p in paths):
        raise MarianError(
            f"the vocabularies {recorded_vocabs} the model was trained with are "
            f"not found (nor beside {model.path.name}): give --vocabs SRC TGT"
        )
    return paths


def _tokenizer(tokens: list[str], proto: bytes | None, side: str, extra: list[str]):
    if tokens[:2] != ["</s>", "<unk>"]:
        raise MarianError(
            f"the {side} vocabulary starts {tokens[:2]}, not Marian's </s> (0), <unk> (1)"
        )
    end = ["</s>"] if side == "source" else []
    if proto is None:
        return WordTokenizer(tokens + extra, unk_id=1, lowercase=False,
                             split_punctuation=False, end_tokens=end)  # fmt: skip
    return PieceTokenizer(proto, tokens + extra, unk_id=1, end_tokens=end)


def decoding(model: MarianModel, given: dict[str, Any]) -> dict[str, Any]:
    """Marian's decoding rules as the bundle's defaults: ``given`` (flags), else the
    model's ``decoder.yml``, else ``marian-decoder``'s defaults (module docstring)."""
    loaded = decoder_yml(model)
    from_file = {k: loaded[k] for k in (*DECODER, "allow-unk") if k in loaded}
    o = DECODER | from_file | {k: v for k, v in given.items() if v is not None}
    factor, normalize = float(o["max-length-factor"]), float(o["normalize"])
    if not math.isfinite(factor) or factor < 1 or factor != int(factor):
        raise MarianError(
            f"--max-length-factor {factor:g}: the bundle takes a whole number >= 1 (Marian "
            "rounds factor x source tokens up; the bundle's limit is a whole multiple)"
        )
    if not math.isfinite(normalize) or normalize < 0:
        raise MarianError(f"--normalize {normalize:g}: give a number >= 0")
    if float(o["word-penalty"]) != 0:
        raise _refuse("--word-penalty", o["word-penalty"], "0")
    return {
        "max_length": MAX_TARGET,
        "max_length_ratio": factor,
        "max_length_offset": 1,  # the limit counts an EOS Marian never adds at its limit
        "min_length": 0,
        "length_penalty": normalize,
        "ban_unk": not o.get("allow-unk", False),
        "search": "marian",
    }


def marian_user_model(
    path: Path, *, vocabs: list[Path] | None = None, options: dict[str, Any] | None = None
) -> UserModel:
    """Load and validate a Marian s2s ``model.npz``; its modules with their declaration.

    ``vocabs``: the source and target vocabularies (``-v`` of marian-decoder; default:
    those the model was trained with); ``options``: ``normalize``, ``max-length-factor``,
    ``word-penalty``, ``allow-unk`` when not the model's ``decoder.yml``'s or Marian's."""
    model = MarianModel.read(path)
    check_options(model)
    vocab = [read_vocabulary(p) for p in _vocab_paths(model, vocabs)]
    sizes = [int(v) for v in model.options["dim-vocabs"]]
    try:
        encoder, step = build_modules(model)
    except KeyError as exc:
        raise MarianError(f"{path}: weight {exc} missing: not a Marian s2s model") from None
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise MarianError(f"{path}: weights do not fit an s2s model: {first}") from None
    rows = (encoder.embed.shape[0], step.embed.shape[0] - 2)
    for side, (tokens, _), size, row in zip(("source", "target"), vocab, sizes, rows, strict=True):
        if len(tokens) != size or row != size:
            raise MarianError(
                f"the {side} vocabulary has {len(tokens)} tokens, the model {size} ({row} "
                f"embedding rows): is it this model's vocabulary?"
            )
    # the bundle's pad and bos: ids past the target vocabulary, names it does not hold;
    # the source's ids must reach the pad id too (markers the encoder reads as <unk>)
    names = ("<pad>", "<s>", "<marian:pad>", "<marian:bos>")
    extra = [n for n in names if n not in vocab[1][0]][:2]
    unused = [f"<marian:unused:{i}>" for i in range(sizes[0], sizes[1] + 1)]
    source = _tokenizer(*vocab[0], "source", unused)
    target = _tokenizer(*vocab[1], "target", extra)
    ids = {"eos": 0, "unk": 1, "pad": sizes[1], "bos": sizes[1] + 1}
    lstm = model.options.get("dec-cell", "gru") == "lstm"
    signature = Signature(
        encoder_args=("src", "lengths"),
        rnn="lstm" if lstm else "gru",
        decoder_args=("token", "hidden", "memory", "mask"),
        token_shape="B",
        decoder_returns=("logits", "hidden", "attention"),
    )
    origin = {"converter": "marian", "model": str(path),
              "vocabs": [str(p) for p in _vocab_paths(model, vocabs)]}  # fmt: skip
    return UserModel(
        encoder, step, source, target, ids, signature, origin=origin,
        decoding=decoding(model, options or {}),
    )  # fmt: skip
