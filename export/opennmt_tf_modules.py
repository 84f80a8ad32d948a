"""The computation of OpenNMT-tf 2.x's RNN sequence-to-sequence models at inference time, as
two torch modules (built from the checkpoint's arrays by :mod:`export.opennmt_tf`):

* :class:`TfEncoder`: the source ``WordEmbedder`` and ``RNNEncoder``: a
  ``tf.keras.layers.RNN`` over ``StackedRNNCells`` of ``LSTMCell``s or ``GRUCell``s,
  bidirectional as Keras' ``Bidirectional`` wraps it: the backward direction is a *stack
  of its own* over the reversed source (its second layer reads its first layer's outputs
  only), and the two stacks' outputs and final states are joined by the reducer
  (concatenated, or summed);
* :class:`TfDecoder`: one step of ``AttentionalRNNDecoder``: tfa's ``AttentionWrapper``
  over the stacked cells (input ``[embedding; previous attention]``), ``LuongAttention``
  (keys ``memory_layer(memory)``, score ``h · key``) or ``BahdanauAttention`` (score
  ``v · tanh(key + query_layer(h))``), softmax over the source, the attention layer
  ``Dense(units, no bias)`` over ``[cell output; context]`` (with or without tanh), and
  the output layer.

Keras' ``LSTMCell`` orders its gates i, f, c, o, as torch's ``LSTMCell`` does (i, f, g, o),
with one bias where torch has two; its ``GRUCell`` (``reset_after``) is torch's GRU with
the gates reordered (:func:`export.keras.gru_weights`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from export.keras import gru_weights
from models.attention import weighted_sum

Hidden = tuple[Tensor, Tensor] | Tensor  # LSTM (h, c), GRU h; each (layers, B, units)


def rnn_cell(kernel: np.ndarray, recurrent: np.ndarray, bias: np.ndarray) -> nn.RNNCellBase:
    """A Keras ``LSTMCell`` (``kernel (in, 4u)``, ``recurrent_kernel (u, 4u)``, ``bias
    (4u,)``) or ``GRUCell`` (``3u`` wide, ``bias (2, 3u)``: ``reset_after``, TF 2's
    default) as a torch cell."""
    if recurrent.shape[1] == 3 * recurrent.shape[0]:
        gru = gru_weights(
            {"c/kernel": kernel, "c/recurrent_kernel": recurrent, "c/bias": bias}, "c"
        )
        cell = nn.GRUCell(kernel.shape[0], recurrent.shape[0])
        cell.load_state_dict(gru)
        return cell
    return lstm_cell(kernel, recurrent, bias)


def lstm_cell(kernel: np.ndarray, recurrent: np.ndarray, bias: np.ndarray) -> nn.LSTMCell:
    """A Keras ``LSTMCell``'s ``kernel (in, 4u)``, ``recurrent_kernel (u, 4u)``, ``bias
    (4u,)`` as a torch cell."""
    units = recurrent.shape[0]
    if (
        kernel.shape[1] != 4 * units
        or recurrent.shape != (units, 4 * units)
        or bias.shape != (4 * units,)
    ):
        raise ValueError(
            f"LSTM weights of shapes {kernel.shape}, {recurrent.shape}, {bias.shape} "
            "are not one Keras LSTMCell's"
        )
    cell = nn.LSTMCell(kernel.shape[0], units)
    cell.load_state_dict(
        {
            "weight_ih": torch.from_numpy(np.ascontiguousarray(kernel.T)),
            "weight_hh": torch.from_numpy(np.ascontiguousarray(recurrent.T)),
            "bias_ih": torch.from_numpy(bias),
            "bias_hh": torch.zeros(4 * units),
        }
    )
    return cell


def dense(kernel: np.ndarray, bias: np.ndarray | None = None) -> nn.Linear:
    """A Keras ``Dense`` (``kernel (in, out)``) as ``nn.Linear``."""
    layer = nn.Linear(kernel.shape[0], kernel.shape[1], bias=bias is not None)
    state = {"weight": torch.from_numpy(np.ascontiguousarray(kernel.T))}
    if bias is not None:
        state["bias"] = torch.from_numpy(bias)
    layer.load_state_dict(state)
    return layer


def stacked_rnn(cells: list[nn.RNNCellBase]) -> nn.RNNBase:
    """Keras' ``StackedRNNCells`` (each layer reads the one below) as one multi-layer
    ``nn.LSTM`` or ``nn.GRU`` (batch first), which traces with the source length dynamic."""
    units = cells[0].hidden_size
    if any(c.hidden_size != units or type(c) is not type(cells[0]) for c in cells):
        raise ValueError(f"stacked layers of {[c.hidden_size for c in cells]} units, mixed kinds")
    kind = nn.GRU if isinstance(cells[0], nn.GRUCell) else nn.LSTM
    rnn = kind(cells[0].input_size, units, num_layers=len(cells), batch_first=True)
    state = {}
    for i, cell in enumerate(cells):
        for name, value in cell.state_dict().items():
            state[f"{name}_l{i}"] = value
    rnn.load_state_dict(state)
    return rnn


class TfEncoder(nn.Module):
    """``forward(src (B,S)) -> (memory (B,S,D), (h, c) each (layers,B,Hd))``: sources of one
    length (the bundle encodes equal lengths together, so no padding reaches the cells;
    the backward stack reads the source reversed, as Keras' ``go_backwards`` does);
    ``Hd`` the decoder's units, the reduced final states ``CopyBridge`` hands over."""

    def __init__(
        self,
        embedding: np.ndarray,
        forward_cells: list[nn.RNNCellBase],
        backward_cells: list[nn.RNNCellBase] | None,
        reducer: str,
        zero_state: tuple[int, int] | None = None,
    ) -> None:
        """``zero_state``: ``(layers, units)`` of a decoder that starts from zeros
        (``ZeroBridge``), instead of the encoder's final states (``CopyBridge``)."""
        super().__init__()
        self.embedding = nn.Embedding.from_pretrained(torch.from_numpy(embedding), freeze=True)
        self.zero_state = zero_state
        self.forward_rnn = stacked_rnn(forward_cells)
        self.backward_rnn = stacked_rnn(backward_cells) if backward_cells else None
        self.lstm = isinstance(self.forward_rnn, nn.LSTM)
        self.reducer = reducer  # "concat" or "sum" (for a bidirectional encoder)

    def _join(self, a: Tensor, b: Tensor) -> Tensor:
        return torch.cat([a, b], -1) if self.reducer == "concat" else a + b

    def forward(self, src: Tensor) -> tuple[Tensor, Hidden]:
        x = self.embedding(src)
        memory, state = self.forward_rnn(x)
        if self.backward_rnn is not None:
            back, back_state = self.backward_rnn(torch.flip(x, [1]))
            memory = self._join(memory, torch.flip(back, [1]))
            if self.lstm:
                state = (self._join(state[0], back_state[0]), self._join(state[1], back_state[1]))
            else:
                state = self._join(state, back_state)
        if self.zero_state is not None:
            layers, units = self.zero_state
            zeros = memory.new_zeros(layers, memory.shape[0], units)
            return memory, ((zeros, zeros) if self.lstm else zeros)
        return memory, state


class TfDecoder(nn.Module):
    """One step: ``forward(token (B,), (h, c) (layers,B,U), memory (B,S,D), feed (B,U))
    -> (logits (B,V), (h, c), attention (B,S), feed)``; ``feed`` is the previous step's
    attention vector (zeros before the first), the ``AttentionWrapper``'s ``attention``
    state, fed back with the next token's embedding."""

    def __init__(
        self,
        embedding: np.ndarray,
        cells: list[nn.RNNCellBase],
        memory_layer: nn.Linear,
        attention_layer: nn.Linear,
        tanh: bool,
        output_layer: nn.Linear,
        bahdanau: dict[str, np.ndarray] | None = None,
    ) -> None:
        """``bahdanau``: tfa's ``BahdanauAttention`` instead of ``LuongAttention``: its
        ``query_layer`` kernel, ``attention_v``, and with ``normalize=True``
        ``attention_g`` and ``attention_b``."""
        super().__init__()
        self.lstm = isinstance(cells[0], nn.LSTMCell)
        self.query_layer = dense(bahdanau["query_layer"]) if bahdanau else None
        v = torch.from_numpy(bahdanau["attention_v"]) if bahdanau else torch.zeros(0)
        if bahdanau and "attention_g" in bahdanau:  # weight-normalised v, and a bias
            g = float(np.asarray(bahdanau["attention_g"]).reshape(-1)[0])
            v = g * v / torch.sqrt((v * v).sum())
        self.register_buffer("attention_v", v)
        b = bahdanau.get("attention_b") if bahdanau else None
        self.register_buffer("attention_b", torch.from_numpy(b) if b is not None else None)
        self.embedding = nn.Embedding.from_pretrained(torch.from_numpy(embedding), freeze=True)
        self.cells = nn.ModuleList(cells)
        self.memory_layer, self.attention_layer = memory_layer, attention_layer
        self.tanh, self.output_layer = tanh, output_layer

    def forward(
        self, token: Tensor, hidden: Hidden, memory: Tensor, feed: Tensor
    ) -> tuple[Tensor, Hidden, Tensor, Tensor]:
        x = torch.cat([self.embedding(token), feed], -1)
        hs, cs = [], []
        for i, cell in enumerate(self.cells):
            if self.lstm:
                h, c = cell(x, (hidden[0][i], hidden[1][i]))
                cs.append(c)
            else:
                h = cell(x, hidden[i])
            hs.append(h)
            x = h
        keys = self.memory_layer(memory)  # (B,S,U)
        if self.query_layer is None:  # Luong: h · key
            scores = (keys * x.unsqueeze(1)).sum(-1)  # (B,S); a bmm's sum varies with S
        else:  # Bahdanau: v · tanh(key + W h (+ b))
            energy = keys + self.query_layer(x).unsqueeze(1)
            if self.attention_b is not None:
                energy = energy + self.attention_b
            scores = (torch.tanh(energy) * self.attention_v).sum(-1)
        weights = torch.softmax(scores, dim=1)
        context = weighted_sum(weights, memory)  # the values are the memory itself
        attention = self.attention_layer(torch.cat([x, context], -1))
        if self.tanh:
            attention = torch.tanh(attention)
        state = (torch.stack(hs), torch.stack(cs)) if self.lstm else torch.stack(hs)
        return self.output_layer(attention), state, weights, attention
