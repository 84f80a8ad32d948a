"""Your own encoder and one-step decoder modules, as they are, behind the bundle contract.

Most attention RNN models follow the tutorial shape: an encoder that returns every
hidden state, ``encoder(src) -> (outputs [B,S,H], hidden)``, and a decoder module that
runs one step, ``decoder(token [B,1], hidden, encoder_outputs) -> (logits [B,V], hidden,
attention [B,S])``, batch-first or, with ``Signature(time_major=True)``,
sequence-first. :class:`export.signature.Signature` (importable from here too) says,
declaratively, how yours are called;
:class:`AdaptedModel` wraps them (unchanged) into the interface the exporter, the parity
gate and the PyTorch reference searches use (that of :class:`models.seq2seq.Seq2Seq`).

Padding. A sentence must translate the same whatever else is in the batch:

* an encoder that takes no lengths reads padding as input, so the bundle is marked
  ``exact_lengths`` and sentences are encoded in groups of equal length (here when run
  eagerly, by ONNX Runtime's wrapper when served);
* a decoder step that takes no source mask attends over padding, so every softmax it
  takes over the source positions gets the mask applied (-inf at padding) by a
  :class:`torch.overrides.TorchFunctionMode` while it runs and while it is traced. The
  gate then checks that each sentence decodes exactly as it does alone; a decoder whose
  attention is not a softmax over the source fails it with a message that says so;
* an encoder trained on sources padded to a fixed width (``Signature.source_width``)
  gets each source padded so, as in training, and the step attends only over the
  source's own tokens.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from export.signature import AdapterError, Signature
from export.spec import BundleConfig
from models.seq2seq import Encoded, length_mask


def _widen(src: Tensor, width: int, pad: int | None) -> Tensor:
    """``src`` ``(B,S)`` -> ``(B, max(S, width))``, ``pad`` after each row's ids; the
    traced graph keeps S dynamic (no Python ``max`` on a traced size)."""
    s = torch.ones_like(src[0]).sum()  # S as a tensor
    both = torch.nn.functional.pad(src, (0, width), value=pad)
    return both.index_select(1, torch.arange(torch.clamp(s, min=width)))


_SOFTMAXES = {torch.softmax, torch.nn.functional.softmax, Tensor.softmax}


class SourceMask(TorchFunctionMode):
    """Puts -inf at padded source positions into every softmax taken over them.

    A softmax counts when the size of its ``dim`` is ``src_len`` and another dimension
    has the batch size; the mask ``(rows, src_len)`` is laid out along those two.
    Tracing uses sizes no weight matrix has (see :meth:`AdaptedModel.trace_sizes`), so
    no other softmax can be taken for one.
    """

    def __init__(self, mask: Tensor) -> None:
        super().__init__()
        self.mask = mask
        self.rows, self.src_len = int(mask.shape[0]), int(mask.shape[1])
        self.hits = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _SOFTMAXES and args and isinstance(args[0], Tensor):
            x = args[0]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            if dim is not None and x.dim() >= 2 and x.shape[dim] == self.src_len:
                d = dim % x.dim()
                row_dims = [i for i in range(x.dim()) if i != d and x.shape[i] == self.rows]
                if row_dims:
                    r = row_dims[0]
                    keep = self.mask if r < d else self.mask.t()
                    # unsqueeze, not reshape: a traced reshape would fix rows and src_len
                    for i in range(x.dim()):
                        if i not in (r, d):
                            keep = keep.unsqueeze(i)
                    x = x.masked_fill(~keep, float("-inf"))
                    self.hits += 1
                    args = (x, *args[1:])
        return func(*args, **kwargs)


class _Step(nn.Module):
    """``(prev (rows,), state, keys, memory, mask) -> (logits, state, attention)``: the
    decoder interface of :class:`models.decoder.Decoder`, over the user's module."""

    def __init__(self, decoder: nn.Module, signature: Signature, vocab_size: int) -> None:
        super().__init__()
        self.user = decoder
        self.sig = signature
        self.vocab_size = vocab_size
        self.method = getattr(decoder, signature.decoder_method, None)
        if signature.decoder_method == "forward" and type(decoder).forward is nn.Module.forward:
            steps = [n for n in dir(type(decoder)) if "step" in n.lower() and not n.startswith("_")]
            raise AdapterError(
                f"the decoder {type(decoder).__name__} defines no forward; name the method "
                "that runs one step with Signature(decoder_method=...)"
                + (f": {', '.join(repr(n) for n in steps)}?" if steps else "")
            )
        if not callable(self.method):
            raise AdapterError(
                f"the decoder {type(decoder).__name__} has no method "
                f"{signature.decoder_method!r}; set Signature(decoder_method=...)"
            )

    def forward(
        self, prev: Tensor, state: tuple[Tensor, ...], keys: Tensor, memory: Tensor, mask: Tensor
    ) -> tuple[Tensor, tuple[Tensor, ...], Tensor]:
        """``prev`` ``(rows,)``; ``state`` batch-first; ``memory`` ``(rows,S,D)``; ``mask``
        ``(rows,S)``. Returns logits ``(rows,V)``, new state, attention ``(rows,S)``."""
        sig = self.sig
        n_hidden = 2 if sig.rnn == "lstm" else 1
        hidden = tuple(_from_batch_first(s, sig.hidden_layout) for s in state[:n_hidden])
        values: dict[str, Any] = {
            "token": prev.unsqueeze(1) if sig.token_shape == "B1" else prev,
            "hidden": hidden if sig.rnn == "lstm" else hidden[0],
            # contiguous: a step that calls .view on it works as in the user's own loop
            "memory": (
                memory.transpose(0, 1).contiguous()
                if "step_memory" in sig.sequence_first
                else memory
            ),
            "mask": mask if sig.mask_true_at == "token" else ~mask,
            "lengths": mask.sum(1),
        }
        values.update(zip(sig.extra_state, state[n_hidden:], strict=True))
        args = [
            values[part] if isinstance(part, str) else [values[n] for n in part]
            for part in sig.decoder_args
        ]
        if sig.masks_softmax:
            with SourceMask(mask) as masking:
                out = call_user("decoder step", self.method, *args)
            if masking.hits == 0 and not bool(mask.all()):
                raise AdapterError(
                    "the decoder step takes no source mask and no softmax over the source "
                    "positions was seen in it, so padding would change its attention; add a "
                    "mask argument and list 'mask' in Signature.decoder_args"
                )
        else:
            out = call_user("decoder step", self.method, *args)
        got = _named(out, sig.decoder_returns, "decoder")
        scores = got["logits"] if "logits" in got else got["log_probs"]
        logits = _squeeze_middle(scores, "logits").float()
        if logits.shape[-1] != self.vocab_size:
            raise AdapterError(
                f"the decoder scores {int(logits.shape[-1])} tokens but the target tokenizer "
                f"has {self.vocab_size}: give the vocabulary the model was trained with"
            )
        attention = _squeeze_middle(self._attention(got), "attention").float()
        new_hidden = _hidden_parts(got["hidden"], sig.rnn, "decoder step")
        new_state = tuple(_to_batch_first(h, sig.hidden_layout) for h in new_hidden)
        new_state += tuple(got[name] for name in sig.extra_state)
        return logits, new_state, attention

    def _attention(self, got: dict[str, Any]) -> Tensor:
        """The step's attention: returned, or read from ``Signature.attention_from``."""
        attr = self.sig.attention_from
        if attr is None:
            return got["attention"]
        value = getattr(self.user, attr, None)
        if isinstance(value, list | tuple) and value:
            value = value[-1]  # d2l keeps one per step of the call
        if not isinstance(value, Tensor):
            raise AdapterError(
                f"after a step the decoder's {attr!r} is {type(value).__name__}, not the "
                "step's attention: check Signature.attention_from"
            )
        return value


def call_user(what: str, func: Callable, *args: Any) -> Any:
    """Call the user's code; what it raises becomes one :class:`AdapterError` saying
    which part failed (an AdapterError of ours passes through)."""
    try:
        return func(*args)
    except AdapterError:
        raise
    except Exception as exc:
        text = re.sub(r"tensor\((\d+)\)", r"\1", str(exc).strip())  # traced sizes
        first = text.splitlines()[0] if text else ""
        fix = "check that export.modules.Signature describes how it is called"
        if "enforce_sorted" in text:
            fix = "it packs with enforce_sorted=True: declare Signature(sorted_lengths=True)"
        raise AdapterError(
            f"your {what} raised {type(exc).__name__}: {first[:300]}; {fix}"
        ) from exc


def _named(out: Any, names: tuple, who: str) -> dict[str, Any]:
    """What ``who`` returned, by the names of ``Signature.<who>_returns`` (a tuple among
    them: a returned list or tuple, named part by part)."""
    if isinstance(out, Tensor):
        out = (out,)
    if not isinstance(out, tuple | list) or len(out) != len(names):
        n = len(out) if isinstance(out, tuple | list) else type(out).__name__
        raise AdapterError(
            f"the {who} returned {n} values but Signature.{who}_returns names {len(names)}: "
            f"{list(names)}"
        )
    got: dict[str, Any] = {}
    for name, value in zip(names, out, strict=True):
        if isinstance(name, tuple):
            if not isinstance(value, tuple | list):
                raise AdapterError(
                    f"the {who} returned a {type(value).__name__} where Signature.{who}_returns "
                    f"names a list {list(name)}"
                )
            got.update(_named(value, name, who))
        elif name != "_":
            got[name] = value
    return got


def _squeeze_middle(x: Tensor, what: str) -> Tensor:
    """``(B,1,N)`` or ``(B,N,1)`` -> ``(B,N)`` (a traced reshape would fix B and N)."""
    if x.dim() == 3 and x.shape[1] == 1:
        return x.squeeze(1)
    if x.dim() == 3 and x.shape[2] == 1:
        return x.squeeze(2)
    if x.dim() != 2:
        raise AdapterError(
            f"the decoder's {what} has shape {tuple(int(d) for d in x.shape)}; expected "
            "(B, N): does Signature.decoder_returns name its returns in the order it returns them?"
        )
    return x


LAYOUTS = {"layers_first": "(layers, B, H)", "batch_first": "(B, layers, H)", "flat": "(B, H)"}


def _hidden_parts(hidden: Any, rnn: str, who: str) -> tuple[Tensor, ...]:
    """The hidden ``who`` returned as a tuple: ``(h,)`` for a GRU, ``(h, c)`` for an
    LSTM, refusing the other RNN's shape with the Signature fix."""
    pair = isinstance(hidden, tuple | list)
    if rnn == "lstm" and not (pair and len(hidden) == 2):
        raise AdapterError(
            f"Signature(rnn='lstm') but the {who}'s hidden is "
            + (f"{len(hidden)} tensors" if pair else "one tensor")
            + ", not an (h, c) pair: a GRU? set Signature(rnn='gru')"
        )
    if rnn == "gru" and pair:
        raise AdapterError(
            f"the {who}'s hidden is a tuple of {len(hidden)} (an LSTM's (h, c)?): "
            "set Signature(rnn='lstm')"
        )
    return tuple(hidden) if pair else (hidden,)


def _to_batch_first(h: Tensor, layout: str) -> Tensor:
    if layout == "layers_first":
        return h.transpose(0, 1)
    return h


def _from_batch_first(h: Tensor, layout: str) -> Tensor:
    if layout == "layers_first":
        return h.transpose(0, 1).contiguous()
    return h


class AdaptedModel(nn.Module):
    """The user's modules behind :class:`models.seq2seq.Seq2Seq`'s interface:
    ``config`` (a :class:`BundleConfig`), ``encode(src, lengths)`` and ``decoder``."""

    def __init__(
        self,
        encoder: nn.Module,
        decoder: nn.Module,
        *,
        config: BundleConfig,
        signature: Signature,
    ) -> None:
        super().__init__()
        for name, module in (("encoder", encoder), ("decoder", decoder)):
            if not isinstance(module, nn.Module):
                raise AdapterError(f"{name} must be a torch.nn.Module, got {type(module).__name__}")
        if config.state_names != signature.state_names:
            raise AdapterError(f"state names {config.state_names} != {signature.state_names}")
        self.encoder = encoder
        self.decoder = _Step(decoder, signature, config.tgt_vocab_size)
        # The decoder's own RNN, when it has one: its layer count checks the bridge.
        rnns = [m for m in decoder.modules() if isinstance(m, nn.RNNBase)]
        self._decoder_layers = rnns[0].num_layers if len(rnns) == 1 else None
        self.bridge = signature.bridge if isinstance(signature.bridge, nn.Module) else None
        self.signature = signature
        self.config = config
        params = inspect.signature(encoder.forward).parameters
        if len(params) < len(signature.encoder_args) and not any(
            p.kind is p.VAR_POSITIONAL for p in params.values()
        ):
            raise AdapterError(
                f"the encoder's forward takes {len(params)} arguments but "
                f"Signature.encoder_args names {list(signature.encoder_args)}"
            )

    def encode(self, src: Tensor, lengths: Tensor) -> Encoded:
        """Encode ``src`` ``(batch, src_len)`` with true ``lengths`` ``(batch,)``: each
        sentence as if alone (see the module docstring)."""
        if (
            self.config.exact_lengths
            and not torch.jit.is_tracing()
            and (int(lengths.min()) != src.size(1) or int(lengths.max()) != src.size(1))
        ):
            return self._encode_by_length(src, lengths)
        return self._encode(src, lengths)

    def _encode(self, src: Tensor, lengths: Tensor) -> Encoded:
        if not self.signature.sorted_lengths:
            return self._encode_in_order(src, lengths)
        # torch.sort, traced as a TopK: any order of equal lengths will do
        order = torch.sort(lengths, descending=True).indices
        back = torch.sort(order).indices
        enc = self._encode_in_order(src[order], lengths[order])
        return Encoded(
            enc.memory[back], enc.keys[back], enc.mask[back], tuple(s[back] for s in enc.state)
        )

    def _encode_in_order(self, src: Tensor, lengths: Tensor) -> Encoded:
        sig = self.signature
        fed = _widen(src, sig.source_width, sig.source_pad) if sig.source_width else src
        seq_first = sig.sequence_first
        values = {"src": fed.t() if "src" in seq_first else fed, "lengths": lengths}
        got = _named(
            call_user("encoder", self.encoder, *[values[a] for a in sig.encoder_args]),
            sig.encoder_returns,
            "encoder",
        )
        memory = got["memory"].float()
        if "memory" in seq_first and memory.dim() == 3:
            memory = memory.transpose(0, 1)  # (S,B,D) -> the contract's (B,S,D)
        if (
            not torch.jit.is_tracing()
            and memory.dim() == 3
            and memory.shape[0] == fed.shape[0]
            and memory.shape[1] < fed.shape[1]
        ):
            # pad_packed_sequence without total_length stops at the longest length; the
            # traced graph keeps the batch's width (zeros past each sentence's end)
            memory = torch.nn.functional.pad(memory, (0, 0, 0, fed.shape[1] - memory.shape[1]))
        if memory.dim() != 3 or memory.shape[:2] != fed.shape:
            shape = tuple(int(d) for d in got["memory"].shape)
            b, n = int(fed.shape[0]), int(fed.shape[1])
            raise AdapterError(
                f"the encoder's memory has shape {shape}; expected "
                + (
                    f"(src_len, batch, D) = ({n}, {b}, D) with Signature(time_major=True): "
                    "a sequence-first RNN (no batch_first)"
                    if "memory" in seq_first
                    else f"(batch, src_len, D) = ({b}, {n}, D): a batch-first RNN "
                    "(batch_first=True), or Signature(time_major=True) for a sequence-first one"
                )
            )
        if sig.source_width:
            memory = memory.narrow(1, 0, src.size(1))  # the attention reads the source only
        hidden = got.get("hidden")
        if sig.bridge is not None:
            hidden = call_user("bridge", sig.bridge, hidden)
        if hidden is None:
            raise AdapterError(
                "no decoder hidden: return 'hidden' from the encoder or give a bridge"
            )
        hidden = _hidden_parts(hidden, sig.rnn, "encoder" if sig.bridge is None else "bridge")
        state = tuple(_to_batch_first(h, sig.hidden_layout).float() for h in hidden)
        self._check_hidden(state[0], src.size(0))
        zero = torch.zeros_like(memory[:, 0, :1])  # (batch, 1); traced with a dynamic batch
        state += tuple(zero.expand(-1, size) for size in sig.extra_state.values())
        mask = length_mask(lengths, src.size(1))
        keys = mask.unsqueeze(-1).to(memory.dtype)  # the contract's keys: unused by the step
        return Encoded(memory * keys, keys, mask, state)

    def _check_hidden(self, h: Tensor, batch: int) -> None:
        """``h``: the decoder's first hidden, batch-first. A sequence-first RNN fed
        ``(B,S)`` ids reads B as time and S as batch; a bidirectional encoder's hidden
        has two directions per layer. Either fails later, in torch, far from the cause."""
        sig = self.signature
        if int(h.shape[0]) != batch or h.dim() != (2 if sig.hidden_layout == "flat" else 3):
            raise AdapterError(
                f"the decoder's first hidden ({'bridge' if sig.bridge else 'encoder'}'s) has "
                f"shape {tuple(int(d) for d in _from_batch_first(h, sig.hidden_layout).shape)} "
                f"for a batch of {batch}, expected {LAYOUTS[sig.hidden_layout]}: is the "
                + (
                    "encoder's RNN sequence-first (no batch_first), as "
                    "Signature(time_major=True) says"
                    if sig.time_major
                    else "encoder's RNN batch_first=True (a sequence-first one needs "
                    "Signature(time_major=True))"
                )
                + ", and Signature.hidden_layout right?"
            )
        layers = self._decoder_layers
        if sig.bridge is None and sig.hidden_layout != "flat" and layers not in (None, h.shape[1]):
            raise AdapterError(
                f"the encoder's hidden has {int(h.shape[1])} layers x directions but the "
                f"decoder's RNN has {layers} layer(s): a bidirectional encoder? map its hidden "
                "to the decoder's with Signature(bridge=...)"
            )

    def _encode_by_length(self, src: Tensor, lengths: Tensor) -> Encoded:
        batch, width = src.shape
        parts = []
        for n in torch.unique(lengths).tolist():
            rows = torch.nonzero(lengths == n).squeeze(1)
            parts.append((rows, n, self._encode(src[rows, :n], lengths[rows])))
        first = parts[0][2]
        memory = first.memory.new_zeros(batch, width, first.memory.shape[-1])
        keys = first.keys.new_zeros(batch, width, first.keys.shape[-1])
        states = [s.new_zeros((batch,) + tuple(s.shape[1:])) for s in first.state]
        for rows, n, enc in parts:
            memory[rows, :n] = enc.memory
            keys[rows, :n] = enc.keys
            for whole, part in zip(states, enc.state, strict=True):
                whole[rows] = part
        return Encoded(memory, keys, length_mask(lengths, width), tuple(states))

    def trace_sizes(self) -> tuple[int, int]:
        """``(src_len, rows)`` for tracing that equal no dimension of any weight, so
        :class:`SourceMask` cannot mistake another softmax for the attention's."""
        taken = {self.config.src_vocab_size, self.config.tgt_vocab_size}
        taken |= {d for p in self.parameters() for d in p.shape}
        taken |= set(self.signature.extra_state.values())
        free = [n for n in range(5, 200) if n not in taken]
        return free[0], free[1]

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


def first_line(exc: BaseException, limit: int | None = 200) -> str:
    """The first line of what ``exc`` says (torch's and YAML's run over several), with
    the next when the first only introduces it (torch's ``Error(s) in loading
    state_dict for LSTM:`` then the size that does not fit)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    if text.endswith(":") and len(lines) > 1:
        text = f"{text} {lines[1]}"
    return text[:limit]


def linear_from(w: dict[str, Tensor], prefix: str) -> nn.Linear:
    """The ``nn.Linear`` of the weights ``w`` holds under ``prefix`` (a converter's
    checkpoint): ``prefix.weight`` and, when there, ``prefix.bias``."""
    weight = w[f"{prefix}.weight"]
    bias = w.get(f"{prefix}.bias")
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    layer.load_state_dict({"weight": weight} | ({"bias": bias} if bias is not None else {}))
    return layer
