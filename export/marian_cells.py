"""The recurrent and feed-forward pieces of Marian's RNN models (and of Nematus's, as
Marian reads them), from their weights: :mod:`export.marian_modules` assembles them into
the encoder and the decoder step (``src/rnn/cells.h``, ``src/layers/generic.cpp``).

* cells: ``gru`` (``rnn::GRU`` with its ``final`` flag, the reset gate over the recurrent
  bias or not), ``lstm`` (``rnn::FastLSTM``, gates f, i, c, o) and ``gru-nematus``
  (``rnn::GRUNematus``: :class:`Cell`), stacked in depth (transition cells take no
  input), ``--layer-normalization`` (Marian's: eps 1e-9, no beta except where the bias
  stands in; Nematus's: a scale and a bias each, eps 1e-5);
* :class:`Affine` and :class:`Dense`: ``mlp::dense`` with either normalisation.

The encoder's recurrence (:func:`_recurrence`) keeps a sentence's numbers independent of
its batch mates, bit for bit.
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


def affine(w: dict[str, Tensor], weight: str, bias: str | None, norm: str,
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
            affine(w, f"{prefix}_W{n}", f"{prefix}_b{n}", norm, f"{prefix}_gamma{n}",
                    f"{prefix}_ln_s{n}", f"{prefix}_ln_b{n}")
            for n in nums
        )  # fmt: skip

    def forward(self, *inputs: Tensor) -> Tensor:
        total = 0
        for term, x in zip(self.terms, inputs, strict=True):
            total = total + term(x)
        return torch.tanh(total)
