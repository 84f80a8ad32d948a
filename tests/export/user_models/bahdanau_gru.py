"""A GRU encoder-decoder with Bahdanau (additive) attention, as in most tutorials.

* word vocabularies (lower-case, punctuation split) with the special tokens at ids 5-8,
  after the first five words: nothing here assumes pad=0;
* ``AttentionEncoder(src, lengths)`` packs the padded batch (``pack_padded_sequence``)
  so padding never reaches the GRU;
* ``AttentionDecoder(input [B,1], hidden [1,B,H], encoder_outputs [B,S,H])`` runs one
  step and returns ``(logits [B,V], hidden, attn [B,S])``; it takes no mask (the
  exporter masks its softmax).

``train()`` teacher-forces it on the 300 sample sentence pairs for a few seconds;
``translate()`` is the user's own greedy loop; ``load()`` hands it to the exporter.
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
SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]
PAD, UNK, BOS, EOS = 5, 6, 7, 8
HIDDEN = 64
STEPS = 60
BATCH = 32


def build_vocab(path: Path) -> WordTokenizer:
    splitter = WordTokenizer(["<unk>"], unk_id=0)
    counts: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        for word in splitter.words(line):
            counts[word] = counts.get(word, 0) + 1
    words = sorted(counts, key=lambda w: (-counts[w], w))
    tokens = words[:PAD] + SPECIALS + words[PAD:]
    assert tokens[PAD : EOS + 1] == SPECIALS
    return WordTokenizer(tokens, unk_id=UNK)


class AttentionEncoder(nn.Module):
    def __init__(self, vocab_size: int, hidden_size: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(0.1)

    def forward(self, src, lengths):
        embedded = self.dropout(self.embedding(src))
        packed = pack_padded_sequence(
            embedded, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        outputs, hidden = self.gru(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.size(1))
        return outputs, hidden


class AdditiveAttention(nn.Module):
    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.query = nn.Linear(hidden_size, hidden_size, bias=False)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query, keys):
        # query [B,H], keys [B,S,H]
        energy = torch.tanh(self.query(query).unsqueeze(1) + self.key(keys))
        scores = self.v(energy).squeeze(-1)  # [B,S]
        weights = F.softmax(scores, dim=1)
        context = torch.bmm(weights.unsqueeze(1), keys).squeeze(1)
        return context, weights


class AttentionDecoder(nn.Module):
    def __init__(self, vocab_size: int, hidden_size: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD)
        self.attention = AdditiveAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(2 * hidden_size, vocab_size)
        self.dropout = nn.Dropout(0.1)

    def forward(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))  # [B,1,H]
        context, attn = self.attention(hidden[-1], encoder_outputs)
        output, hidden = self.gru(torch.cat([embedded, context.unsqueeze(1)], dim=2), hidden)
        logits = self.out(torch.cat([output.squeeze(1), context], dim=1))
        return logits, hidden, attn


def read_pairs(src_vocab: WordTokenizer, tgt_vocab: WordTokenizer):
    en = (SAMPLE / "sample.en").read_text(encoding="utf-8").splitlines()
    es = (SAMPLE / "sample.es").read_text(encoding="utf-8").splitlines()
    return [(src_vocab.encode(s), tgt_vocab.encode(t)) for s, t in zip(en, es, strict=True)]


def pad(seqs, value):
    width = max(len(s) for s in seqs)
    return torch.tensor([s + [value] * (width - len(s)) for s in seqs])


def train(steps: int = STEPS, seed: int = 0):
    """Teacher-force a fresh model for ``steps`` batches; returns the trained modules and
    vocabularies ``(encoder, decoder, src_vocab, tgt_vocab)`` (eval mode)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        rng = random.Random(seed)
        src_vocab, tgt_vocab = build_vocab(SAMPLE / "sample.en"), build_vocab(SAMPLE / "sample.es")
        encoder = AttentionEncoder(src_vocab.vocab_size, HIDDEN)
        decoder = AttentionDecoder(tgt_vocab.vocab_size, HIDDEN)
        params = list(encoder.parameters()) + list(decoder.parameters())
        optimizer = torch.optim.Adam(params, lr=1e-2)
        criterion = nn.CrossEntropyLoss(ignore_index=PAD)
        pairs = read_pairs(src_vocab, tgt_vocab)
        encoder.train(), decoder.train()
        # batches of similar target length: fewer padded decoder steps
        pairs.sort(key=lambda p: len(p[1]))
        batches = [pairs[i : i + BATCH] for i in range(0, len(pairs), BATCH)]
        for _ in range(steps):
            batch = rng.choice(batches)
            src = pad([s for s, _ in batch], PAD)
            lengths = torch.tensor([len(s) for s, _ in batch])
            tgt_in = pad([[BOS] + t for _, t in batch], PAD)
            tgt_out = pad([t + [EOS] for _, t in batch], PAD)
            outputs, hidden = encoder(src, lengths)
            loss = 0.0
            for i in range(tgt_in.size(1)):
                logits, hidden, _ = decoder(tgt_in[:, i : i + 1], hidden, outputs)
                loss = loss + criterion(logits, tgt_out[:, i])
            optimizer.zero_grad()
            (loss / tgt_in.size(1)).backward()
            nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
        return encoder.eval(), decoder.eval(), src_vocab, tgt_vocab
    finally:
        torch.set_num_threads(threads)


@functools.lru_cache(maxsize=1)
def trained():
    return train()


def translate(encoder, decoder, src_ids: list[int]):
    """Greedy decoding of one sentence: ``(token ids without EOS, attention rows)``.

    The service's rules: at most ``min(256, floor(2 * len) + 10)`` target tokens, EOS
    included; never ``<pad>`` or ``<s>``; EOS not as the first token."""
    limit = min(256, math.floor(2.0 * len(src_ids)) + 10)
    with torch.no_grad():
        outputs, hidden = encoder(torch.tensor([src_ids]), torch.tensor([len(src_ids)]))
        input = torch.tensor([[BOS]])
        tokens, attentions = [], []
        for step in range(limit - 1):
            logits, hidden, attn = decoder(input, hidden, outputs)
            attentions.append(attn[0])
            logits[:, [PAD, BOS] + ([EOS] if step == 0 else [])] = float("-inf")
            token = int(logits.argmax(dim=-1))
            if token == EOS:
                break
            tokens.append(token)
            input = torch.tensor([[token]])
    return tokens, torch.stack(attentions).numpy()


def load():
    from export.modules import Signature
    from export.user import UserModel

    encoder, decoder, src_vocab, tgt_vocab = trained()
    return UserModel(
        encoder,
        decoder,
        src_vocab,
        tgt_vocab,
        {"pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS},
        Signature(encoder_args=("src", "lengths")),
    )
