"""How a user's encoder and one-step decoder modules are called: :class:`Signature`,
declared once by the user and read by :mod:`export.modules` (torch-free, so a
declaration can be checked, and written to a manifest, without tracing anything)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from export import spec


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


def flat_names(names: tuple) -> tuple[str, ...]:
    """``("token", ("memory", "hidden"))`` -> ``("token", "memory", "hidden")``."""
    return tuple(n for part in names for n in ((part,) if isinstance(part, str) else part))


def _name_of(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or type(obj).__qualname__
