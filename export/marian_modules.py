"""The modules of a Marian s2s model (:mod:`export.marian` reads and checks it): what
Marian's ``EncoderS2S`` and one step of ``DecoderS2S`` compute at inference time
(``src/models/s2s.h``, ``src/rnn/cells.h``, ``src/rnn/attention.h``), from its weights.

* cells: ``gru`` (``rnn::GRU`` with its ``final`` flag, the reset gate over the recurrent
  bias or not) and ``lstm`` (``rnn::FastLSTM``, gates f, i, c, o), stacked in depth
  (transition cells take no input), ``--skip`` connections, ``--layer-normalization``
  (Marian's: eps 1e-9, no beta except where the bias stands in);
* the decoder's base cell is the conditional one: cell 1, attention
  (``rnn::GlobalAttention``: additive, the source's projection computed once, here by
  the encoder), cell 2 on the attended context, then transitions; the deep output
  ``tanh(E y + S h + C c)``, then the output layer (tied to an embedding matrix or not);
* the target's first step embeds a zero vector (Marian has no BOS): the bundle's ``<s>``
  and ``<pad>`` get ids after the vocabulary's, zero embeddings and ``-inf`` logits.

A sentence's numbers do not depend on its batch mates, bit for bit (what lets the int8
graph pass the export gate): :func:`_recurrence`, :func:`_weighted_sum`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

MARIAN_EPS, NEMATUS_EPS = 1e-9, 1e-5  # Marian's layerNorm; NEMATUS_LN_EPS


def _layer_norm(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = MARIAN_EPS) -> Tensor:
    """Marian's ``layerNorm(x, gamma, beta, eps)`` over the last axis."""
    centred = x - x.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + eps)
    return gamma * centred / sigma + beta


def _norm(x: Tensor, gamma: Tensor, beta: Tensor, split: int, eps: float) -> Tensor:
    """Layer normalisation of a GRU's gates ``(.., G)``: over all of them (``split`` 0,
    Marian's cells), or the gates ``[:split]`` and the candidate ``[split:]`` apart
    (Nematus's, each with its own scale and bias)."""
    if split == 0:
        return _layer_norm(x, gamma, beta, eps)
    return torch.cat(
        [
            _layer_norm(x[..., :split], gamma[:split], beta[:split], eps),
            _layer_norm(x[..., split:], gamma[split:], beta[split:], eps),
        ],
        dim=-1,
    )


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
          beta: Tensor, lstm: bool, ln: bool, final: bool, split: int,
          eps: float) -> tuple[Tensor, Tensor]:  # fmt: skip
    """One step of a Marian cell (module docstring): ``xw`` ``(B,G)`` its input's
    projection (zeros for a transition), ``su`` ``(B,G)`` the state's (``h U``, plus the
    bias a Nematus cell normalises with it), layer-normalised here (:func:`_norm`);
    ``h``/``c`` ``(B,H)``, ``m`` ``(B,1)`` 1 at real positions (0 holds the state); a GRU's
    ``c`` passes through."""
    if ln:
        su = _norm(su, gamma, beta, split, eps)
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
def recur(xw: Tensor, mask: Tensor, {weights}, lstm: bool, ln: bool, split: int,
          eps: float) -> Tensor:
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
_RECUR_CELL = (
    "        h, c = _cell({x}, h @ u{k}, h, c, m, b{k}, g{k}, e{k}, lstm, ln, False, split, eps)"
)
_recurrences: dict[int, Any] = {}


def _recurrence(cells: int):
    """``recur(xw (B,S,G), mask (B,S,1), u0, b0, g0, e0, ..., lstm, ln, split, eps) ->
    (B,S,H)``: a stack
    of ``cells`` encoder cells (the first reads ``xw``, the rest are transitions) run
    over every position, forwards."""
    if cells not in _recurrences:
        weights = ", ".join(f"u{k}: Tensor, b{k}: Tensor, g{k}: Tensor, e{k}: Tensor"
                            for k in range(cells))  # fmt: skip
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
    :meth:`no_input`.

    ``nematus`` (``--type nematus``'s ``gru-nematus``): under layer normalisation the
    gates and the candidate are normalised apart, each with a scale and a bias
    (``_lns``/``_lnb``, eps 1e-5), and the cell's bias moves to where ``GRUNematus``
    adds it: into the input's projection (a first cell), into the state's (the
    decoder's second cell and transitions), or after (the encoder's transitions).
    Without layer normalisation it is Marian's GRU."""

    def __init__(self, w: dict[str, Tensor], prefix: str, kind: str, *, final: bool,
                 ln: bool, has_input: bool, nematus: bool = False,
                 encoder: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.lstm, self.final, self.ln = kind == "lstm", final, ln

        def weight(name: str) -> Tensor:  # a GRU keeps its candidate's weights apart
            parts = [w[prefix + name]] + ([] if self.lstm else [w[prefix + name + "x"]])
            return torch.cat(parts, dim=1)

        self.U = nn.Parameter(weight("_U"))
        bias = weight("_b")[0]
        size = self.U.shape[1]
        self.W = nn.Parameter(weight("_W")) if has_input else None
        ones, zeros = torch.ones(size), torch.zeros(size)
        nematus = nematus and ln
        self.split, self.eps = (2 * size // 3, NEMATUS_EPS) if nematus else (0, MARIAN_EPS)
        self.input_bias = self.state_bias = None
        if nematus:

            def norm(name: str, part: str) -> Tensor:
                pair = (f"{prefix}_{name}_{part}", f"{prefix}_{name}x_{part}")
                return torch.cat([w[pair[0]][0], w[pair[1]][0]])

            if has_input and not final:
                self.input_bias = nn.Parameter(bias)
            elif not encoder:
                self.state_bias = nn.Parameter(bias)
            self.b = nn.Parameter(bias if encoder and not has_input else zeros)
            self.gamma1 = nn.Parameter(norm("W", "lns") if has_input else ones)
            self.beta1 = nn.Parameter(norm("W", "lnb") if has_input else zeros)
            self.gamma2, self.beta2 = nn.Parameter(norm("U", "lns")), nn.Parameter(norm("U", "lnb"))
        else:
            self.b = nn.Parameter(bias)
            self.gamma1 = nn.Parameter(w[prefix + "_gamma1"][0] if ln and has_input else ones)
            self.gamma2 = nn.Parameter(w[prefix + "_gamma2"][0] if ln else ones)
            self.beta1, self.beta2 = nn.Parameter(zeros), nn.Parameter(zeros.clone())

    def project(self, x: Tensor) -> Tensor:
        xw = x @ self.W
        if self.input_bias is not None:
            xw = xw + self.input_bias
        return _norm(xw, self.gamma1, self.beta1, self.split, self.eps) if self.ln else xw

    def no_input(self, h: Tensor) -> Tensor:
        return torch.zeros(h.shape[0], self.U.shape[1], dtype=h.dtype)

    def forward(self, xw: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        ones = torch.ones(1, 1, dtype=h.dtype)
        su = h @ self.U
        if self.state_bias is not None:
            su = su + self.state_bias
        return _cell(xw, su, h, c, ones, self.b, self.gamma2, self.beta2, self.lstm, self.ln,
                     self.final, self.split, self.eps)  # fmt: skip


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
        # (the encoder's cells add no bias to the state's projection: Cell's docstring)
        weights = [t for k in cells for t in (k.U, k.b, k.gamma2, k.beta2)]
        first = cells[0]
        out = _recurrence(len(cells))(xw, mask, *weights, first.lstm, first.ln, first.split,
                                      first.eps)  # fmt: skip
        return out.flip([1]) if self.reverse else out


class Affine(nn.Module):
    """``x W`` with its bias and layer normalisation as the model has them: ``x W + b``
    (none), ``LN(x W, gamma, b)`` (Marian's: the bias is the normalisation's beta, which
    is 0 where there is no bias), or ``LN(x W + b, scale, shift, 1e-5)`` (Nematus's).
    ``forward(x (..,In)) -> (..,Out)``."""

    def __init__(self, weight: Tensor, bias: Tensor | None, gamma: Tensor | None = None,
                 shift: Tensor | None = None) -> None:  # fmt: skip
        super().__init__()
        self.W = nn.Parameter(weight)
        self.gamma = None if gamma is None else nn.Parameter(gamma)
        nematus = shift is not None
        self.inner = nn.Parameter(bias) if nematus and bias is not None else None
        outer = shift if nematus else bias
        if outer is None and gamma is not None:
            outer = torch.zeros_like(gamma)
        self.outer = None if outer is None else nn.Parameter(outer)
        self.eps = NEMATUS_EPS if nematus else MARIAN_EPS

    def forward(self, x: Tensor) -> Tensor:
        y = x @ self.W
        if self.inner is not None:
            y = y + self.inner
        if self.gamma is not None:
            return _layer_norm(y, self.gamma, self.outer, self.eps)
        return y if self.outer is None else y + self.outer


def _affine(w: dict[str, Tensor], weight: str, bias: str | None, norm: str,
            gamma: str, scale: str, shift: str) -> Affine:  # fmt: skip
    """The :class:`Affine` named ``weight`` (and ``bias``) in ``w``; ``norm``: ``""`` (no
    layer normalisation), ``"marian"`` (the scale ``gamma``) or ``"nematus"`` (``scale``,
    ``shift``)."""
    b = w[bias][0] if bias else None
    if norm == "marian":
        return Affine(w[weight], b, w[gamma][0])
    if norm == "nematus":
        return Affine(w[weight], b, w[scale][0], w[shift][0])
    return Affine(w[weight], b)


class Dense(nn.Module):
    """Marian's ``mlp::dense`` over several inputs: ``tanh(sum_i Affine_i(in_i))``."""

    def __init__(self, w: dict[str, Tensor], prefix: str, inputs: int, norm: str) -> None:
        super().__init__()
        nums = [""] if inputs == 1 else [str(i) for i in range(inputs)]
        self.terms = nn.ModuleList(
            _affine(w, f"{prefix}_W{n}", f"{prefix}_b{n}", norm, f"{prefix}_gamma{n}",
                    f"{prefix}_ln_s{n}", f"{prefix}_ln_b{n}")
            for n in nums
        )  # fmt: skip

    def forward(self, *inputs: Tensor) -> Tensor:
        total = 0
        for term, x in zip(self.terms, inputs, strict=True):
            total = total + term(x)
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
                 uni: list[Recurrence], start: Dense, att_map: Affine, layers: int, lstm: bool,
                 skip: bool) -> None:  # fmt: skip
        super().__init__()
        self.embed = nn.Parameter(embed)
        self.forward_layers = nn.ModuleList(forward)
        self.backward_layers = nn.ModuleList(backward)
        self.uni_layers = nn.ModuleList(uni)
        self.start = start
        self.att_map = att_map
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
        mapped = self.att_map(context)
        hidden = start.unsqueeze(0).expand(self.layers, -1, -1).contiguous()
        return torch.cat([context, mapped], dim=2), ((hidden, hidden) if self.lstm else hidden)


class MarianStep(nn.Module):
    """One step of ``DecoderS2S`` and its output layer.

    ``forward(token (B,), hidden (layers,B,H) or (h, c), memory (B,S,2D), mask (B,S)
    bool) -> (logits (B,V+2), hidden, attention (B,S))``: ``token`` past the vocabulary
    (the bundle's ``<s>``, ``<pad>``) embeds zeros; their two logits are -inf.
    """

    def __init__(self, embed: Tensor, base: list[Cell], high: list[Stack], query: Affine,
                 att_v: Tensor, deep: Dense, out_w: Tensor, out_b: Tensor | None,
                 skip: bool) -> None:  # fmt: skip
        super().__init__()
        zeros = torch.zeros(2, embed.shape[1])  # the bundle's pad and bos
        self.embed = nn.Parameter(torch.cat([embed, zeros]))
        self.base, self.high = nn.ModuleList(base), nn.ModuleList(high)
        self.att_query, self.att_v = query, nn.Parameter(att_v)  # v: (D,1)
        self.deep = deep
        self.out_W = nn.Parameter(out_w)  # (V, dim-emb)
        self.out_b = None if out_b is None else nn.Parameter(out_b)
        self.skip = skip
        # added to the logits: -inf at the bundle's pad and bos, and at what :meth:`block`
        # bans (Marian's suppressed control tokens)
        blocked = torch.zeros(out_w.shape[0] + 2)
        blocked[-2:] = float("-inf")
        self.register_buffer("blocked", blocked)

    def block(self, ids: list[int]) -> None:
        """Never produce the tokens ``ids``: their logits -10000 (not -inf, which would
        tie with pad's and bos's in the graph's top-k; exp(-10000) is 0 in float32, and
        a hypothesis with one never ranks above one without)."""
        self.blocked[ids] = -1e4

    def forward(self, token: Tensor, hidden, memory: Tensor, mask: Tensor):
        lstm = isinstance(hidden, (tuple, list))
        hs, cs = (hidden[0], hidden[1]) if lstm else (hidden, hidden)
        y = self.embed[token]
        # the conditional cell: cell 1, attention, cell 2 on the context, transitions
        h, c = self.base[0](self.base[0].project(y), hs[0], cs[0])
        width = memory.shape[2] // 2
        context, mapped = memory[:, :, :width], memory[:, :, width:]
        query = self.att_query(h)
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
        logits = torch.cat([logits, torch.zeros_like(logits[:, :2])], dim=1) + self.blocked
        hidden = (torch.stack(new_h), torch.stack(new_c)) if lstm else torch.stack(new_h)
        return logits, hidden, attention


def build_modules(o: dict[str, Any], w: dict[str, Tensor]) -> tuple[MarianEncoder, MarianStep]:
    """The encoder and step modules of a model whose options (``special:model.yml``) are
    ``o`` and weights ``w`` (Marian's names; sizes read off them); a missing weight raises
    KeyError. ``o["type"]`` ``nematus``: Nematus's cells and layer normalisation."""
    ln, skip = bool(o.get("layer-normalization")), bool(o.get("skip"))
    nematus = o.get("type") == "nematus"
    norm = ("nematus" if nematus else "marian") if ln else ""
    enc_cell, dec_cell = o.get("enc-cell", "gru"), o.get("dec-cell", "gru")
    depth, cell_depth = int(o.get("enc-depth", 1)), int(o.get("enc-cell-depth", 1))
    bi_layers = depth if o.get("enc-type", "bidirectional") == "bidirectional" else 1

    def recurrence(prefix: str, i: int, reverse: bool) -> Recurrence:
        names = [prefix + (f"_l{i}" if i > 1 else "") + (f"_cell{j}" if i > 1 or j > 1 else "")
                 for j in range(1, cell_depth + 1)]  # fmt: skip
        cells = [Cell(w, n, enc_cell, final=False, ln=ln, has_input=j == 0, nematus=nematus,
                      encoder=True) for j, n in enumerate(names)]  # fmt: skip
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
        forward, backward, uni, Dense(w, "decoder_ff_state", 1, norm),
        _affine(w, "decoder_Wc_att", "decoder_b_att", norm, "decoder_att_gamma1",
                "decoder_Wc_att_lns", "decoder_Wc_att_lnb"),
        layers, dec_cell == "lstm", skip,
    )  # fmt: skip

    base_depth = int(o.get("dec-cell-base-depth", 2))
    base = [Cell(w, f"decoder_cell{i}", dec_cell, final=i > 1, ln=ln, has_input=i <= 2,
                 nematus=nematus) for i in range(1, base_depth + 1)]  # fmt: skip
    high = []
    for i in range(2, layers + 1):
        cells = [Cell(w, f"decoder_l{i}_cell{j}", dec_cell, final=False, ln=ln, has_input=j == 1)
                 for j in range(1, int(o.get("dec-cell-high-depth", 1)) + 1)]  # fmt: skip
        high.append(Stack(cells[0], cells[1:]))
    query = _affine(w, "decoder_W_comb_att", None, norm, "decoder_att_gamma2",
                    "decoder_W_comb_att_lns", "decoder_W_comb_att_lnb")  # fmt: skip
    target_embed = w["decoder_Wemb"] if "decoder_Wemb" in w else w["Wemb"]
    if "decoder_ff_logit_l2_Wt" in w:
        out_w = w["decoder_ff_logit_l2_Wt"]
    elif "decoder_ff_logit_l2_W" in w:  # (dim-emb, V): Nematus's ff_logit_W
        out_w = w["decoder_ff_logit_l2_W"].t().contiguous()
    elif o.get("tied-embeddings-all") or o.get("tied-embeddings-src"):
        out_w = w["Wemb"]
    else:
        out_w = w["decoder_Wemb"]
    step = MarianStep(
        target_embed, base, high, query, w["decoder_U_att"],
        Dense(w, "decoder_ff_logit_l1", 3, norm), out_w,
        w["decoder_ff_logit_l2_b"][0] if "decoder_ff_logit_l2_b" in w else None, skip,
    )  # fmt: skip
    return encoder.eval(), step.eval()
