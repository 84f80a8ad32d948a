"""A bidirectional LSTM encoder with a bridge and a Luong decoder ("general" attention,
input feeding), OpenNMT style.

* vocabularies ``<unk>=0 <blank>=1 <s>=2 </s>=3`` then words by frequency;
* ``Encoder(src, lengths)`` runs a packed bidirectional LSTM: memory ``[B,S,2E]`` and the
  final ``(h, c)`` of both directions ``[2,B,E]`` each;
* ``Bridge`` maps the two directions' ``(h, c)`` to the decoder's first ``(h, c)``
  ``[1,B,H]``;
* ``LuongDecoder(token [B], (h, c), memory, pad_mask [B,S], feed [B,H])`` runs one step
  and returns ``(log_probs [B,V], (h, c), attn [B,S], feed)``; ``pad_mask`` is True at
  padding, ``feed`` (the previous attentional hidden state) is fed back in.
"""

from __future__ import annotations

import functools
import math
import random
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from models.words import WordTokenizer

SAMPLE = Path(__file__).resolve().parents[3] / "models" / "sample"
UNK, PAD, BOS, EOS = 0, 1, 2, 3
EMBED, ENC_HIDDEN, DEC_HIDDEN = 48, 32, 64
STEPS = 60
BATCH = 32


def build_vocab(path: Path) -> WordTokenizer:
    splitter = WordTokenizer(["<unk>"], unk_id=0)
    counts: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        for word in splitter.words(line):
            counts[word] = counts.get(word, 0) + 1
    words = sorted(counts, key=lambda w: (-counts[w], w))
    return WordTokenizer(["<unk>", "<blank>", "<s>", "</s>"] + words, unk_id=UNK)


class Encoder(nn.Module):
    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, EMBED, padding_idx=PAD)
        self.rnn = nn.LSTM(EMBED, ENC_HIDDEN, batch_first=True, bidirectional=True)

    def forward(self, src, lengths):
        packed = pack_padded_sequence(
            self.embeddings(src), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        memory, (h, c) = self.rnn(packed)
        memory, _ = pad_packed_sequence(memory, batch_first=True, total_length=src.size(1))
        return memory, (h, c)


class Bridge(nn.Module):
    """Both directions' final (h, c) -> the decoder's initial (h, c)."""

    def __init__(self) -> None:
        super().__init__()
        self.h = nn.Linear(2 * ENC_HIDDEN, DEC_HIDDEN)
        self.c = nn.Linear(2 * ENC_HIDDEN, DEC_HIDDEN)

    def forward(self, state):
        h, c = state  # [2, B, E]: forward, backward
        h = torch.tanh(self.h(torch.cat([h[0], h[1]], dim=-1)))
        c = self.c(torch.cat([c[0], c[1]], dim=-1))
        return h.unsqueeze(0), c.unsqueeze(0)


class GeneralAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear_in = nn.Linear(DEC_HIDDEN, 2 * ENC_HIDDEN, bias=False)
        self.linear_out = nn.Linear(2 * ENC_HIDDEN + DEC_HIDDEN, DEC_HIDDEN, bias=False)

    def forward(self, query, memory, pad_mask):
        # score(h_t, h_s) = h_t^T W_a h_s
        scores = torch.bmm(memory, self.linear_in(query).unsqueeze(2)).squeeze(2)
        scores = scores.masked_fill(pad_mask, float("-inf"))
        align = torch.softmax(scores, dim=-1)
        context = torch.bmm(align.unsqueeze(1), memory).squeeze(1)
        attn_h = torch.tanh(self.linear_out(torch.cat([context, query], dim=-1)))
        return attn_h, align


class LuongDecoder(nn.Module):
    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, EMBED, padding_idx=PAD)
        self.rnn = nn.LSTM(EMBED + DEC_HIDDEN, DEC_HIDDEN, batch_first=True)
        self.attn = GeneralAttention()
        self.dropout = nn.Dropout(0.1)
        self.generator = nn.Linear(DEC_HIDDEN, vocab_size)

    def forward(self, token, hidden, memory, pad_mask, feed):
        emb = self.embeddings(token)  # [B, E]
        rnn_in = torch.cat([emb, feed], dim=-1).unsqueeze(1)  # input feeding
        output, hidden = self.rnn(rnn_in, hidden)
        attn_h, align = self.attn(output.squeeze(1), memory, pad_mask)
        log_probs = F.log_softmax(self.generator(self.dropout(attn_h)), dim=-1)
        return log_probs, hidden, align, attn_h


class NMTModel(nn.Module):
    def __init__(self, src_vocab_size: int, tgt_vocab_size: int) -> None:
        super().__init__()
        self.encoder = Encoder(src_vocab_size)
        self.bridge = Bridge()
        self.decoder = LuongDecoder(tgt_vocab_size)

    def forward(self, src, lengths, tgt_in):
        """Teacher-forced log-probs ``[B,T,V]``."""
        memory, state = self.encoder(src, lengths)
        hidden = self.bridge(state)
        pad_mask = torch.arange(src.size(1)).unsqueeze(0) >= lengths.unsqueeze(1)
        feed = memory.new_zeros(src.size(0), DEC_HIDDEN)
        out = []
        for t in range(tgt_in.size(1)):
            log_probs, hidden, _, feed = self.decoder(tgt_in[:, t], hidden, memory, pad_mask, feed)
            out.append(log_probs)
        return torch.stack(out, dim=1)


def pad(seqs, value):
    width = max(len(s) for s in seqs)
    return torch.tensor([s + [value] * (width - len(s)) for s in seqs])


def vocabularies():
    return build_vocab(SAMPLE / "sample.en"), build_vocab(SAMPLE / "sample.es")


def train(steps: int = STEPS, seed: int = 0):
    """Teacher-force a fresh model for ``steps`` batches; returns
    ``(model, src_vocab, tgt_vocab)`` with the model in eval mode."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        rng = random.Random(seed)
        src_vocab, tgt_vocab = vocabularies()
        model = NMTModel(src_vocab.vocab_size, tgt_vocab.vocab_size)
        en = (SAMPLE / "sample.en").read_text(encoding="utf-8").splitlines()
        es = (SAMPLE / "sample.es").read_text(encoding="utf-8").splitlines()
        pairs = [(src_vocab.encode(s), tgt_vocab.encode(t)) for s, t in zip(en, es, strict=True)]
        pairs.sort(key=lambda p: len(p[1]))
        batches = [pairs[i : i + BATCH] for i in range(0, len(pairs), BATCH)]
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        criterion = nn.NLLLoss(ignore_index=PAD)
        model.train()
        for _ in range(steps):
            batch = rng.choice(batches)
            src = pad([s for s, _ in batch], PAD)
            lengths = torch.tensor([len(s) for s, _ in batch])
            tgt_in = pad([[BOS] + t for _, t in batch], PAD)
            tgt_out = pad([t + [EOS] for _, t in batch], PAD)
            log_probs = model(src, lengths, tgt_in)
            loss = criterion(log_probs.flatten(0, 1), tgt_out.flatten())
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        return model.eval(), src_vocab, tgt_vocab
    finally:
        torch.set_num_threads(threads)


@functools.lru_cache(maxsize=1)
def trained():
    return train()


def translate(model: NMTModel, src_ids: list[int]):
    """Greedy decoding of one sentence: ``(token ids without EOS, attention rows)``.

    The service's rules: at most ``min(256, floor(2 * len) + 10)`` target tokens, EOS
    included; never ``<blank>`` or ``<s>``; EOS not as the first token."""
    limit = min(256, math.floor(2.0 * len(src_ids)) + 10)
    with torch.no_grad():
        src = torch.tensor([src_ids])
        memory, state = model.encoder(src, torch.tensor([len(src_ids)]))
        hidden = model.bridge(state)
        pad_mask = torch.zeros(1, len(src_ids), dtype=torch.bool)
        feed = torch.zeros(1, DEC_HIDDEN)
        token = torch.tensor([BOS])
        tokens, attentions = [], []
        for step in range(limit - 1):
            log_probs, hidden, align, feed = model.decoder(token, hidden, memory, pad_mask, feed)
            attentions.append(align[0])
            log_probs[:, [PAD, BOS] + ([EOS] if step == 0 else [])] = float("-inf")
            best = int(log_probs.argmax(dim=-1))
            if best == EOS:
                break
            tokens.append(best)
            token = torch.tensor([best])
    return tokens, torch.stack(attentions).numpy()


def load():
    from export.modules import Signature
    from export.user import UserModel

    model, src_vocab, tgt_vocab = trained()
    return UserModel(
        model.encoder,
        model.decoder,
        src_vocab,
        tgt_vocab,
        {"pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS},
        Signature(
            encoder_args=("src", "lengths"),
            encoder_returns=("memory", "hidden"),
            rnn="lstm",
            bridge=model.bridge,
            decoder_args=("token", "hidden", "memory", "mask", "feed"),
            token_shape="B",
            decoder_returns=("log_probs", "hidden", "attention", "feed"),
            extra_state={"feed": DEC_HIDDEN},
            mask_true_at="padding",
        ),
    )
