"""Your own encoder and one-step decoder modules, as they are, behind the bundle contract.

Most attention RNN models follow the tutorial shape: an encoder that returns every
hidden state, ``encoder(src) -> (outputs [B,S,H], hidden)``, and a decoder module that
runs one step, ``decoder(token [B,1], hidden, encoder_outputs) -> (logits [B,V], hidden,
attention [B,S])``, batch-first or, with ``Signature(time_major=True)``,
sequence-first. :class:`Signature` says, declaratively, how yours are called;
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
  attention is not a softmax over the source fails it with a message that says so.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from export import spec
from export.spec import BundleConfig
from models.seq2seq import Encoded, length_mask


class AdapterError(ValueError):
    """A module or signature the adapter cannot use; the message says how to fix it."""


ENCODER_ARGS = ("src", "lengths")
ENCODER_RETURNS = ("memory", "hidden", "_")
# what Signature(time_major=(...)) may name: the encoder's src and memory, the step's memory
SEQUENCE_FIRST = ("src", "memory", "step_memory")
DECODER_ARGS = ("token", "hidden", "memory", "mask", "lengths")
DECODER_RETURNS = ("logits", "log_probs", "hidden", "attention", "_")


@dataclass(frozen=True)
class Signature:
    """How the user's modules are called. Names in the tuples:

    * ``encoder_args``: ``src`` ``(B,S)`` int64 ids, ``lengths`` ``(B,)`` int64.
    * ``encoder_returns``: ``memory`` ``(B,S,D)``, ``hidden`` (the RNN's final state),
      ``_`` for anything else. A bare tensor return is ``("memory",)``.
    * ``decoder_args``: ``token`` (shape ``token_shape``), ``hidden``, ``memory``,
      ``mask`` ``(B,S)`` bool (True at real tokens unless ``mask_true_at="padding"``),
      ``lengths`` ``(B,)`` int64 (the source lengths, for a step that masks by them),
      and the name of each ``extra_state``. A tuple among them is one argument that is
      a list of those (d2l's ``decoder(X, state)`` with ``state = [memory, hidden,
      lengths]``: ``("token", ("memory", "hidden", "lengths"))``).
    * ``decoder_returns``: ``logits`` or ``log_probs`` ``(B,V)`` or ``(B,1,V)``,
      ``hidden``, ``attention`` ``(B,S)`` or ``(B,1,S)``, each ``extra_state`` name,
      ``_`` for anything else; a tuple among them, a returned list or tuple of those.

    ``rnn``: ``"gru"`` (hidden is one tensor) or ``"lstm"`` (hidden is ``(h, c)``).
    ``hidden_layout``: ``"layers_first"`` ``(layers,B,H)`` as torch RNNs return it,
    ``"batch_first"`` ``(B,layers,H)`` or ``"flat"`` ``(B,H)``.
    ``bridge``: maps the encoder's hidden to the decoder's first hidden (default: the
    same); an ``nn.Module`` or any function of tensors (it is traced into the encoder).
    ``extra_state``: recurrent inputs besides hidden, e.g. an input-feeding vector:
    name -> size; each starts as zeros ``(B, size)``.
    ``decoder_method``: the method that runs one step (the PyTorch tutorial's
    ``AttnDecoderRNN`` calls it ``forward_step``).
    ``sorted_lengths``: the encoder packs its batch with ``enforce_sorted=True`` (torch's
    default, as bentrevett's packed-sequence notebook does): each batch reaches it sorted
    by falling length, and what it returns is put back in the batch's order.
    ``time_major``: sequence-first modules (``nn.GRU``/``nn.LSTM`` without
    ``batch_first``, as in bentrevett/pytorch-seq2seq): the encoder takes ``src``
    ``(S,B)`` and returns ``memory`` ``(S,B,D)``, and the decoder step takes ``memory``
    ``(S,B,D)``; the token, hidden (``hidden_layout``), mask ``(B,S)`` and the step's
    returns keep their own layouts. A tuple names only those that are sequence-first,
    of ``"src"``, ``"memory"`` (the encoder's) and ``"step_memory"``: d2l's encoder
    takes ``(B,S)`` and returns ``(S,B,D)``, its ``init_state`` hands the step
    ``(B,S,D)``, so ``("memory",)``.
    ``attention_from``: the decoder attribute that holds the step's attention when the
    step does not return it (d2l's ``attention_weights``, a list with one ``(B,1,S)``
    per step: the last is read).
    ``source_width`` and ``source_pad``: the encoder was trained on sources padded with
    the source id ``source_pad`` to ``source_width`` tokens and reads that padding (d2l's
    ``num_steps``): a shorter source is padded so before the encoder runs, a longer one is
    not cut; the decoder attends only over the source's own tokens.
    """

    encoder_args: tuple[str, ...] = ("src",)
    encoder_returns: tuple[str, ...] = ("memory", "hidden")
    rnn: str = "gru"
    hidden_layout: str = "layers_first"
    bridge: Callable[[Any], Any] | None = None
    decoder_method: str = "forward"
    decoder_args: tuple[str | tuple[str, ...], ...] = ("token", "hidden", "memory")
    token_shape: str = "B1"
    decoder_returns: tuple[str | tuple[str, ...], ...] = ("logits", "hidden", "attention")
    extra_state: Mapping[str, int] = field(default_factory=dict)
    mask_true_at: str = "token"
    time_major: bool | tuple[str, ...] = False
    sorted_lengths: bool = False
    attention_from: str | None = None
    source_width: int = 0
    source_pad: int | None = None

    def __post_init__(self) -> None:
        def check(what: str, given: tuple, known: tuple[str, ...]) -> None:
            nests = what.startswith("decoder")

            def is_list(p: object) -> bool:  # a tuple of names: one list argument
                return isinstance(p, tuple) and bool(p) and all(isinstance(n, str) for n in p)

            bad_parts = [p for p in given if not isinstance(p, str) and not (nests and is_list(p))]
            if bad_parts:
                raise AdapterError(
                    f"{what} holds {bad_parts}: give names"
                    + (", or a tuple of names for a list argument" if nests else "")
                )
            names = flat_names(given)
            extra = tuple(self.extra_state) if nests else ()
            bad = [n for n in names if n not in known + extra]
            if bad:
                raise AdapterError(
                    f"{what} names {bad} unknown; use {list(known + extra)}"
                    + (" (or declare them in extra_state)" if what.startswith("decoder") else "")
                )
            repeated = {n for n in names if n != "_" and names.count(n) > 1}
            if repeated:
                raise AdapterError(f"{what} names {sorted(repeated)} more than once")

        check("encoder_args", self.encoder_args, ENCODER_ARGS)
        check("encoder_returns", self.encoder_returns, ENCODER_RETURNS)
        check("decoder_args", self.decoder_args, DECODER_ARGS)
        check("decoder_returns", self.decoder_returns, DECODER_RETURNS)
        if "src" not in self.encoder_args:
            raise AdapterError("encoder_args must include 'src'")
        if "memory" not in self.encoder_returns:
            raise AdapterError("encoder_returns must include 'memory'")
        args, returns = flat_names(self.decoder_args), flat_names(self.decoder_returns)
        for name in ("token", "hidden", "memory"):
            if name not in args:
                raise AdapterError(f"decoder_args must include {name!r}")
        if ("logits" in returns) == ("log_probs" in returns):
            raise AdapterError("decoder_returns must name exactly one of 'logits', 'log_probs'")
        if self.attention_from is not None:
            if not isinstance(self.attention_from, str) or not self.attention_from.isidentifier():
                raise AdapterError(
                    f"attention_from must name a decoder attribute, got {self.attention_from!r}"
                )
            if "attention" in returns:
                raise AdapterError(
                    "decoder_returns names 'attention' and attention_from is set: give one"
                )
        needed = ("hidden", *(() if self.attention_from else ("attention",)), *self.extra_state)
        for name in needed:
            if name not in returns:
                raise AdapterError(
                    f"decoder_returns must include {name!r}: the next step needs it"
                    if name != "attention"
                    else "decoder_returns must include 'attention' (the served attention "
                    "maps and the alignment checks read it)"
                )
        reserved = set(ENCODER_ARGS + DECODER_ARGS + DECODER_RETURNS + ENCODER_RETURNS)
        # coverage: the graph fits that state to the source width (export.spec)
        reserved |= {"cell", spec.COVERAGE, *spec.decoder_inputs(()), *spec.decoder_outputs(())}
        for name, size in self.extra_state.items():
            if name in reserved or not name.isidentifier():
                raise AdapterError(f"extra_state name {name!r} is reserved or not an identifier")
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise AdapterError(f"extra_state {name!r} needs a size >= 1, got {size!r}")
            if name not in args:
                raise AdapterError(
                    f"extra_state {name!r} is not in decoder_args: the step must read it back"
                )
        if self.bridge is not None and not callable(self.bridge):
            raise AdapterError(f"bridge must be callable, got {type(self.bridge).__name__}")
        if not isinstance(self.sorted_lengths, bool):
            raise AdapterError(f"sorted_lengths must be True or False, got {self.sorted_lengths!r}")
        if not isinstance(self.time_major, bool) and not (
            isinstance(self.time_major, tuple) and all(n in SEQUENCE_FIRST for n in self.time_major)
        ):
            raise AdapterError(
                f"time_major must be True, False or a tuple of {list(SEQUENCE_FIRST)}, "
                f"got {self.time_major!r}"
            )
        width, pad = self.source_width, self.source_pad
        if not isinstance(width, int) or isinstance(width, bool) or width < 0:
            raise AdapterError(f"source_width must be a number of tokens >= 0, got {width!r}")
        if (width > 0) != (pad is not None):
            raise AdapterError(
                "source_width and source_pad go together: the width the encoder was trained "
                "to read and the source id it was padded with"
            )
        if pad is not None and (not isinstance(pad, int) or isinstance(pad, bool) or pad < 0):
            raise AdapterError(f"source_pad must be a source token id, got {pad!r}")
        if self.sorted_lengths and "lengths" not in self.encoder_args:
            raise AdapterError("sorted_lengths is set but 'lengths' is not in encoder_args")
        if not self.decoder_method.isidentifier():
            raise AdapterError(f"decoder_method must name a method, got {self.decoder_method!r}")
        if self.mask_true_at != "token" and "mask" not in args:
            raise AdapterError("mask_true_at is set but 'mask' is not in decoder_args")
        choices = {
            "rnn": ("gru", "lstm"),
            "hidden_layout": ("layers_first", "batch_first", "flat"),
            "token_shape": ("B1", "B"),
            "mask_true_at": ("token", "padding"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise AdapterError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")

    @property
    def state_names(self) -> tuple[str, ...]:
        base = ("hidden", "cell") if self.rnn == "lstm" else ("hidden",)
        return base + tuple(self.extra_state)

    @property
    def masks_softmax(self) -> bool:
        """The adapter masks the decoder's attention softmax (it takes no mask or
        lengths)."""
        return not {"mask", "lengths"} & set(flat_names(self.decoder_args))

    @property
    def sequence_first(self) -> frozenset[str]:
        """Which of ``SEQUENCE_FIRST`` are laid out ``(S,B,...)``."""
        if isinstance(self.time_major, bool):
            return frozenset(SEQUENCE_FIRST if self.time_major else ())
        return frozenset(self.time_major)

    def describe(self) -> dict[str, Any]:
        """The declaration, for the manifest (the bridge by name)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["extra_state"] = dict(self.extra_state)
        d["bridge"] = None if self.bridge is None else _name_of(self.bridge)
        return d


def _widen(src: Tensor, width: int, pad: int | None) -> Tensor:
    """``src`` ``(B,S)`` -> ``(B, max(S, width))``, ``pad`` after each row's ids; the
    traced graph keeps S dynamic (no Python ``max`` on a traced size)."""
    s = torch.ones_like(src[0]).sum()  # S as a tensor
    both = torch.nn.functional.pad(src, (0, width), value=pad)
    return both.index_select(1, torch.arange(torch.clamp(s, min=width)))


def flat_names(names: tuple) -> tuple[str, ...]:
    """``("token", ("memory", "hidden"))`` -> ``("token", "memory", "hidden")``."""
    return tuple(n for part in names for n in ((part,) if isinstance(part, str) else part))


def _name_of(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or type(obj).__qualname__


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
