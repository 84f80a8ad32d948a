"""The modules of a Marian s2s model (:mod:`export.marian` reads and checks it): what
Marian's ``EncoderS2S`` and one step of ``DecoderS2S`` compute at inference time
(``src/models/s2s.h``, ``src/rnn/cells.h``, ``src/rnn/attention.h``), from its weights.

* the encoder: bidirectional (or bi-unidirectional) stacks of cells
  (:mod:`export.marian_cells`), ``--skip`` connections, the decoder's start state
  ``tanh(mean(context) W + b)``;
* the decoder's base cell is the conditional one: cell 1, attention
  (``rnn::GlobalAttention``: additive, the source's projection computed once, here by
  the encoder), cell 2 on the attended context, then transitions; the deep output
  ``tanh(E y + S h + C c)``, then the output layer (tied to an embedding matrix or not);
* the target's first step embeds a zero vector (Marian has no BOS): the bundle's ``<s>``
  and ``<pad>`` get ids after the vocabulary's, zero embeddings and ``-inf`` logits.

A sentence's numbers do not depend on its batch mates, bit for bit (what lets the int8
graph pass the export gate): :func:`export.marian_cells._recurrence`,
:func:`models.attention.weighted_sum`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from export.marian_cells import Affine, Cell, Dense, Recurrence, Stack, affine
from models.attention import weighted_sum


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
        mean = weighted_sum(mask.squeeze(2), context) / mask.sum(dim=1)
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
        attended = weighted_sum(attention, context)
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
        affine(w, "decoder_Wc_att", "decoder_b_att", norm, "decoder_att_gamma1",
                "decoder_Wc_att_lns", "decoder_Wc_att_lnb"),
        layers, dec_cell == "lstm", skip,
    )  # fmt: skip

    base_depth = int(o.get("dec-cell-base-depth", 2))
    base = [Cell(w, f"decoder_cell{i}", dec_cell, final=i > 1, ln=ln, has_input=i <= 2,
                 nematus=nematus) for i in range(1, base_depth + 1)]  # fmt: skip
    high = []
    for i in range(2, layers + 1):
        cells = [Cell(w, f"decoder_l{i}_cell{j}", dec_cell, final=False, ln=ln, has_input=j == 1,
                      nematus=nematus)
                 for j in range(1, int(o.get("dec-cell-high-depth", 1)) + 1)]  # fmt: skip
        high.append(Stack(cells[0], cells[1:]))
    query = affine(w, "decoder_W_comb_att", None, norm, "decoder_att_gamma2",
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
