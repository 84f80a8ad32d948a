"""Torch modules that reproduce Eole (0.6.4) RNN translation models from their checkpoint.

:func:`build_model` turns a checkpoint in Eole's layout (config, vocabularies, weights
under Eole's names; read by :mod:`export.eole_reader`, or renamed from OpenNMT-py's by
:mod:`export.onmt_py`) into an :class:`EoleModel` whose ``encoder`` and ``decoder``
compute what Eole's ``RNNEncoder`` + bridge, ``StdRNNDecoder`` / ``InputFeedRNNDecoder``,
``GlobalAttention`` and generator (+ log-softmax) compute at inference time; every
option they cannot express is refused by name.

Two Eole 0.6.4 facts worth knowing:

* The RNN encoder does not pack padded batches: Eole's batched output for a short
  sentence depends on its batch mates. This encoder packs (``pack_padded_sequence``),
  so every sentence gets what Eole gives it when translated alone (batch_size 1).
* Embeddings default to ``position_encoding_type: SinusoidalInterleaved`` even for RNNs:
  ``emb * sqrt(dim) + pe[position]``, the table stored in the checkpoint
  (``*_emb.pe.pe``). The decoder then needs the step index (``step``, 0 for BOS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from export.eole_text import EoleText, EoleTextError, eole_text, source_normalization
from models.normalize import Normalization

Hidden = Tensor | tuple[Tensor, Tensor]

# Position encodings Eole applies inside attention layers: no-ops for RNN models.
_NO_OP_POSITIONS = {None, "Rotary", "Alibi", "Relative"}


class EoleError(ValueError):
    """An Eole checkpoint that cannot be read or that uses an unsupported option."""


class _Embed(nn.Module):
    """Eole ``Embeddings``: lookup, optional sinusoidal table (``emb*sqrt(E) + pe[pos]``)."""

    def __init__(self, weight: Tensor, pe: Tensor | None, normalize: bool) -> None:
        super().__init__()
        self.lut = nn.Embedding.from_pretrained(weight, freeze=True)
        self.dim = weight.shape[1]
        self.register_buffer("pe", pe)  # [max_len, E] or None
        self.normalize = normalize

    def forward(self, ids: Tensor, positions: Tensor | None) -> Tensor:
        """ids [..] int64, positions broadcastable to ids -> [.., E]."""
        emb = self.lut(ids)
        if self.pe is not None:
            if positions is None:
                raise EoleError("this model uses position encoding: pass the decoding step")
            emb = emb * math.sqrt(self.dim) + self.pe[positions]
        if self.normalize:
            emb = emb * math.sqrt(self.dim)
        return emb


class EoleEncoder(nn.Module):
    """Embeddings + (b)RNN + Eole's bridge and bidirectional state merge."""

    def __init__(self, embed: _Embed, rnn: nn.RNNBase, bridge: nn.ModuleList | None) -> None:
        super().__init__()
        self.embed, self.rnn, self.bridge = embed, rnn, bridge

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Hidden]:
        """src [B,S] int64, lengths [B] int64 (>= 1) -> memory [B,S,D], decoder init hidden.

        hidden: [layers,B,H] (GRU) or (h, c) each [layers,B,H] (LSTM). Memory rows past a
        sentence's length are zeros (Eole masks them in attention anyway).
        """
        positions = torch.arange(src.shape[1], device=src.device).unsqueeze(0)
        emb = self.embed(src, positions)
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, hidden = self.rnn(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        states = list(hidden) if isinstance(hidden, tuple) else [hidden]
        if self.bridge is not None:  # Eole: relu(Linear(flatten over layers*dirs)) per state
            states = [self._bridge(s, lin) for s, lin in zip(states, self.bridge, strict=True)]
        if self.rnn.bidirectional:  # [layers*2,B,h] -> [layers,B,2h], forward half first
            states = [torch.cat([s[0::2], s[1::2]], 2) for s in states]
        return memory, (states[0], states[1]) if len(states) == 2 else states[0]

    @staticmethod
    def _bridge(state: Tensor, linear: nn.Module) -> Tensor:
        """relu(Linear) over each sentence's states ``[layers*dirs, B, h]`` flattened, in
        rows of the Linear's width: one row per sentence for a unidirectional encoder;
        two for OpenNMT-py's brnn bridge, whose Linear is ``layers*h`` wide and so sees
        the first and the second half of ``(l0 fwd, l0 bwd, l1 fwd, ...)`` in turn."""
        n, b, h = state.shape
        flat = state.permute(1, 0, 2).reshape(-1, linear.in_features)
        return torch.relu(linear(flat)).view(b, n, h).permute(1, 0, 2).contiguous()


class EoleDecoder(nn.Module):
    """One decoding step: embedding, RNN (input feed or not), global attention, generator."""

    def __init__(
        self,
        embed: _Embed,
        rnn: nn.Module,
        input_feed: bool,
        attn_type: str,
        attn: nn.ModuleDict,
        generator: nn.Linear,
    ) -> None:
        super().__init__()
        self.embed, self.rnn, self.input_feed = embed, rnn, input_feed
        self.attn_type, self.attn, self.generator = attn_type, attn, generator
        self.is_lstm = isinstance(rnn, nn.LSTM) or (
            isinstance(rnn, nn.ModuleList) and isinstance(rnn[0], nn.LSTMCell)
        )

    def forward(
        self,
        token: Tensor,
        hidden: Hidden,
        memory: Tensor,
        mask: Tensor,
        feed: Tensor,
        step: Tensor | None = None,
    ) -> tuple[Tensor, Hidden, Tensor, Tensor]:
        """token [B] int64, hidden [L,B,H] or (h,c), memory [B,S,D], mask [B,S] bool
        (True = real token), feed [B,H], step [B] or [1] int64 (the target position, 0 for
        the BOS input; only used when the model has position encoding)
        -> log_probs [B,V], hidden, attention [B,S], feed [B,H] (unchanged without input feed).
        """
        emb = self.embed(token, step)  # [B,E]
        if self.input_feed:
            x = torch.cat([emb, feed], 1)
            hs, cs = (hidden[0], hidden[1]) if self.is_lstm else (hidden, None)
            new_h, new_c = [], []
            for i, cell in enumerate(self.rnn):
                if self.is_lstm:
                    h_i, c_i = cell(x, (hs[i], cs[i]))
                    new_c.append(c_i)
                else:
                    h_i = cell(x, hs[i])
                new_h.append(h_i)
                x = h_i
            query = x
            hidden = (
                (torch.stack(new_h), torch.stack(new_c)) if self.is_lstm else torch.stack(new_h)
            )
        else:
            out, hidden = self.rnn(emb.unsqueeze(1), hidden)
            query = out.squeeze(1)
        dec_out, align = self._attend(query, memory, mask)
        log_probs = torch.log_softmax(self.generator(dec_out), dim=-1)
        return log_probs, hidden, align, (dec_out if self.input_feed else feed)

    def _attend(self, query: Tensor, memory: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """query [B,H], memory [B,S,H], mask [B,S] -> attn_h [B,H], align [B,S]."""
        q = query.unsqueeze(1)  # [B,1,H]
        if self.attn_type == "mlp":
            wq = self.attn["linear_query"](q).unsqueeze(2)  # [B,1,1,H]
            uh = self.attn["linear_context"](memory).unsqueeze(1)  # [B,1,S,H]
            scores = self.attn["v"](torch.tanh(wq + uh)).squeeze(-1)  # [B,1,S]
        else:
            h_t = self.attn["linear_in"](q) if self.attn_type == "general" else q
            scores = torch.bmm(h_t, memory.transpose(1, 2))
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        align = torch.softmax(scores, dim=-1)
        context = torch.bmm(align, memory)  # [B,1,H]
        attn_h = self.attn["linear_out"](torch.cat([context, q], 2)).squeeze(1)
        if self.attn_type != "mlp":
            attn_h = torch.tanh(attn_h)
        return attn_h, align.squeeze(1)


@dataclass
class EoleModel:
    encoder: EoleEncoder
    decoder: EoleDecoder
    src_vocab: list[str]
    tgt_vocab: list[str]
    pad_id: int  # target ids; the source ids are in src_pad_id / src_unk_id
    unk_id: int
    bos_id: int  # Eole's decoder start token (``<s>`` unless decoder_start_token says otherwise)
    eos_id: int
    hidden_size: int
    rnn_type: str  # "gru" or "lstm"
    input_feed: bool
    num_layers: int
    src_pad_id: int
    src_unk_id: int
    position_encoding: bool  # decoder needs ``step``
    decoder_positions: bool = True  # False: every step at position 0 (OpenNMT-py)
    decode_bytes: bool = True  # onmt_tokenize output: byte pieces to text (not OpenNMT-py)
    text: EoleText | None = None  # its subword transform, if any (None: whitespace tokens)
    normalize: Normalization | None = None  # the normalize transform on the source, if any
    options: dict[str, Any] = field(default_factory=dict)


def _check_options(cfg: dict) -> None:
    model = cfg.get("model") or {}
    dec, emb = model.get("decoder") or {}, model.get("embeddings") or {}
    arch = model.get("architecture", "custom")
    if arch not in ("rnn", "custom"):
        raise EoleError(f"architecture {arch!r} is not supported (only RNN encoder-decoders)")
    enc_type = "rnn" if arch == "rnn" else (model.get("encoder") or {}).get("encoder_type", "rnn")
    if enc_type not in ("rnn", "brnn"):
        raise EoleError(f"encoder_type {enc_type!r} is not supported (only rnn and brnn)")
    if dec.get("decoder_type", "rnn") != "rnn":
        raise EoleError(f"decoder_type {dec.get('decoder_type')!r} is not supported (only rnn)")
    for sect in (model, dec, cfg):
        if sect.get("copy_attn"):
            raise EoleError(
                "copy_attn is not supported (copy attention cannot be expressed in the bundle)"
            )
    if dec.get("coverage_attn"):
        # Not this project's --coverage: Eole/OpenNMT-py replace the encoder memory by
        # tanh(memory + w c) before scoring and reading the context; ours adds w_c c_j
        # inside the score's hidden layer only (Tu et al.) and leaves the memory as it is.
        raise EoleError(
            "coverage_attn is not supported: Eole's coverage rewrites the encoder memory "
            "(tanh(memory + w c)) for the score and the context alike, which this "
            "project's --coverage (w_c c_j inside the additive score) does not; convert a "
            "model trained without coverage_attn"
        )
    if dec.get("context_gate"):
        raise EoleError(f"context_gate {dec['context_gate']!r} is not supported")
    if dec.get("global_attention_function", "softmax") != "softmax":
        raise EoleError(
            f"global_attention_function {dec['global_attention_function']!r} is not supported "
            "(only softmax)"
        )
    if dec.get("global_attention", "general") not in ("dot", "general", "mlp"):
        raise EoleError(
            f"global_attention {dec.get('global_attention')!r} is not supported "
            "(only dot, general, mlp)"
        )
    if emb.get("position_encoding_type", "SinusoidalInterleaved") == "Learned":
        raise EoleError("position_encoding_type 'Learned' is not supported")
    if emb.get("embedding_type", "standard") != "standard" or emb.get("embedding_layer_norm"):
        raise EoleError("embedding_type/embedding_layer_norm other than standard is not supported")
    for key in ("src_feats", "n_src_feats", "tgt_feats", "adapter", "lm_prior_model"):
        if model.get(key) or cfg.get(key) or (cfg.get("training") or {}).get(key):
            raise EoleError(f"{key} is not supported (source/target features and extra modules)")


def _take(w: dict[str, Tensor], key: str) -> Tensor:
    if key not in w:
        raise EoleError(f"checkpoint tensor {key!r} is missing")
    return w.pop(key)


def _linear(w: dict[str, Tensor], prefix: str) -> nn.Linear:
    weight = _take(w, prefix + ".weight")
    lin = nn.Linear(weight.shape[1], weight.shape[0], bias=prefix + ".bias" in w)
    with torch.no_grad():
        lin.weight.copy_(weight)
        if lin.bias is not None:
            lin.bias.copy_(_take(w, prefix + ".bias"))
    return lin


def _load_into(module: nn.Module, w: dict[str, Tensor], prefix: str) -> None:
    with torch.no_grad():
        for name, p in module.named_parameters():
            t = _take(w, f"{prefix}.{name}")
            if t.shape != p.shape:
                raise EoleError(
                    f"checkpoint tensor {prefix}.{name} has shape {tuple(t.shape)}, "
                    f"expected {tuple(p.shape)}"
                )
            p.copy_(t)


def build_model(
    cfg: dict,
    vocab: dict,
    w: dict[str, Tensor],
    path: Path,
    src_subword_model: Path | None = None,
    tgt_subword_model: Path | None = None,
    *,
    bridge_with_brnn: str | None = "Eole 0.6.4 cannot run it either",
) -> EoleModel:
    """The modules of an Eole-layout checkpoint: ``cfg`` (config.json's shape), ``vocab``
    (vocab.json's), weights ``w`` under Eole's names (consumed: leftovers are refused),
    ``path`` where the subword models are looked for. OpenNMT-py checkpoints come here
    renamed (:mod:`export.onmt_py`). ``bridge_with_brnn``: why a bridge over a brnn
    encoder is refused, or None where the framework runs one (OpenNMT-py)."""
    _check_options(cfg)
    model = cfg.get("model") or {}
    enc, dec, emb_cfg = (
        model.get("encoder") or {},
        model.get("decoder") or {},
        model.get("embeddings") or {},
    )
    try:
        text = eole_text(cfg, path, src_subword_model, tgt_subword_model)
        normalization = source_normalization(cfg)
    except EoleTextError as exc:
        raise EoleError(str(exc)) from None

    rnn_type = enc.get("rnn_type") or model.get("rnn_type") or "LSTM"
    if (dec.get("rnn_type") or model.get("rnn_type") or "LSTM") != rnn_type:
        raise EoleError("rnn_type differs between encoder and decoder (not supported)")
    bidir = "encoder.rnn.weight_ih_l0_reverse" in w
    layers = sum(
        1 for k in w if k.startswith("encoder.rnn.weight_ih_l") and not k.endswith("_reverse")
    )
    input_feed = bool(model.get("input_feed", 1))
    attn_type = dec.get("global_attention", "general")
    pos_type = emb_cfg.get("position_encoding_type", "SinusoidalInterleaved")
    normalize = bool(emb_cfg.get("normalize", False))

    src_w = _take(w, "src_emb.embeddings.weight")
    tgt_w = w.pop("tgt_emb.embeddings.weight", None)
    if tgt_w is None and model.get("share_embeddings"):
        tgt_w = src_w
    tgt_w = tgt_w if tgt_w is not None else _take(w, "tgt_emb.embeddings.weight")
    pes = []
    for side in ("src", "tgt"):
        pe = w.pop(f"{side}_emb.pe.pe", None)
        if pos_type not in _NO_OP_POSITIONS and pe is None:
            raise EoleError(f"position_encoding_type {pos_type!r} but {side}_emb.pe.pe is missing")
        pes.append(None if pos_type in _NO_OP_POSITIONS else pe.reshape(pe.shape[0], -1))
    src_embed, tgt_embed = _Embed(src_w, pes[0], normalize), _Embed(tgt_w, pes[1], normalize)

    hh0 = w["encoder.rnn.weight_hh_l0"]
    gates = 4 if rnn_type == "LSTM" else 3
    if hh0.shape[0] != gates * hh0.shape[1]:
        raise EoleError(f"rnn_type {rnn_type!r} does not match encoder weights")
    rnn_cls = nn.LSTM if rnn_type == "LSTM" else nn.GRU
    enc_rnn = rnn_cls(
        src_w.shape[1], hh0.shape[1], num_layers=layers, bidirectional=bidir, batch_first=True
    )
    _load_into(enc_rnn, w, "encoder.rnn")
    bridge = None
    if "encoder.bridge.0.weight" in w:
        if bidir and bridge_with_brnn:
            raise EoleError(f"bridge with a brnn encoder is not supported ({bridge_with_brnn})")
        bridge = nn.ModuleList(
            [_linear(w, f"encoder.bridge.{i}") for i in range(2 if rnn_type == "LSTM" else 1)]
        )
    hidden = hh0.shape[1] * (2 if bidir else 1)

    if input_feed:
        cell = nn.LSTMCell if rnn_type == "LSTM" else nn.GRUCell
        sizes = [tgt_w.shape[1] + hidden] + [hidden] * (layers - 1)
        dec_rnn: nn.Module = nn.ModuleList([cell(s, hidden) for s in sizes])
        _load_into(dec_rnn, w, "decoder.rnn.layers")
    else:
        dec_rnn = rnn_cls(tgt_w.shape[1], hidden, num_layers=layers, batch_first=True)
        _load_into(dec_rnn, w, "decoder.rnn")
    names = {
        "general": ["linear_in", "linear_out"],
        "dot": ["linear_out"],
        "mlp": ["linear_context", "linear_query", "v", "linear_out"],
    }[attn_type]
    attn = nn.ModuleDict({n: _linear(w, f"decoder.attn.{n}") for n in names})
    if "generator.weight" not in w and model.get("share_decoder_embeddings"):
        w["generator.weight"] = tgt_w
    generator = _linear(w, "generator")
    if w:
        raise EoleError(
            f"unsupported checkpoint tensors (an option this converter does not implement): "
            f"{', '.join(sorted(w))}"
        )

    specials = vocab.get("specials") or {}
    src_vocab, tgt_vocab = list(vocab["src"]), list(vocab["tgt"])
    for side, voc, emb in (("src", src_vocab, src_w), ("tgt", tgt_vocab, tgt_w)):
        if len(voc) != emb.shape[0]:
            raise EoleError(
                f"vocab.json's {side} vocabulary has {len(voc)} entries but the model's "
                f"{side} embeddings have {emb.shape[0]} rows: the vocab.json of another model?"
            )

    def idx(voc: list[str], tok: str, role: str) -> int:
        if tok not in voc:
            raise EoleError(f"{role} token {tok!r} is not in the vocabulary")
        return voc.index(tok)

    unk, pad = specials.get("unk_token", "<unk>"), specials.get("pad_token", "<blank>")
    encoder = EoleEncoder(src_embed, enc_rnn, bridge).eval()
    decoder = EoleDecoder(tgt_embed, dec_rnn, input_feed, attn_type, attn, generator).eval()
    options = {
        "eole_version": model.get("eole_version"),
        "architecture": model.get("architecture", "custom"),
        "encoder_type": "brnn" if bidir else "rnn",
        "rnn_type": rnn_type,
        "layers": layers,
        "hidden_size": hidden,
        "word_vec_size": [src_w.shape[1], tgt_w.shape[1]],
        "input_feed": input_feed,
        "global_attention": attn_type,
        "bridge": bridge is not None,
        "position_encoding_type": pos_type,
        "normalize": normalize,
        "generator_function": model.get("generator_function", "softmax"),
        "share_embeddings": bool(model.get("share_embeddings")),
        "share_decoder_embeddings": bool(model.get("share_decoder_embeddings")),
        "transforms": list(cfg.get("transforms") or []),
    }
    return EoleModel(
        encoder=encoder,
        decoder=decoder,
        src_vocab=src_vocab,
        tgt_vocab=tgt_vocab,
        pad_id=idx(tgt_vocab, pad, "pad"),
        unk_id=idx(tgt_vocab, unk, "unk"),
        bos_id=idx(tgt_vocab, vocab.get("decoder_start_token", "<s>"), "decoder start"),
        eos_id=idx(tgt_vocab, specials.get("eos_token", "</s>"), "eos"),
        hidden_size=hidden,
        rnn_type=rnn_type.lower(),
        input_feed=input_feed,
        num_layers=layers,
        src_pad_id=idx(src_vocab, pad, "pad"),
        src_unk_id=idx(src_vocab, unk, "unk"),
        position_encoding=pes[1] is not None,
        text=text,
        normalize=normalization,
        options=options,
    )
