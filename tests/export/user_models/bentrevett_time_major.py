"""bentrevett/pytorch-seq2seq, notebook 3 ("Neural Machine Translation by Jointly
Learning to Align and Translate"): its ``Encoder``, ``Attention``, ``Decoder`` and
``Seq2Seq`` as written there (commit b3cd54c), sequence-first throughout:

* ``Encoder(src [S,B]) -> (outputs [S,B,2H], hidden [B,Hd])``: a bidirectional GRU
  without ``batch_first`` and without lengths (it reads padding, so the exporter encodes
  equal lengths together), its final states joined by ``fc`` + tanh inside the encoder;
* ``Decoder(input [B], hidden [B,Hd], encoder_outputs [S,B,2H]) -> (prediction [B,V],
  hidden [B,Hd], a [B,S])``, additive attention with no mask (the exporter masks its
  softmax);
* torchtext-style vocabularies: the specials first (``<unk>`` 0, ``<pad>`` 1, ``<sos>`` 2,
  ``<eos>`` 3), then words by frequency; every source is wrapped in ``<sos>`` ... ``<eos>``
  as the notebook's ``translate_sentence`` does.

Differences, for a model that trains in seconds on the 300 sample pairs: spaCy's
tokenizer is :class:`models.words.WordTokenizer`'s word split (the notebook's lower-casing
kept), ``min_freq`` 1, smaller dimensions, dropout 0.1 (not 0.5), no ``init_weights``,
Adam at lr 1e-2, and batches drawn from length buckets rather than shuffled.
"""

from __future__ import annotations

import functools
import math
import random
from pathlib import Path

import torch
from torch import nn

from models.words import WordTokenizer

SAMPLE = Path(__file__).resolve().parents[3] / "models" / "sample"
SPECIALS = ["<unk>", "<pad>", "<sos>", "<eos>"]
UNK, PAD, SOS, EOS = 0, 1, 2, 3
EMBEDDING, ENCODER_HIDDEN, DECODER_HIDDEN = 32, 48, 64
STEPS = 80
BATCH = 32


class Encoder(nn.Module):
    def __init__(self, input_dim, embedding_dim, encoder_hidden_dim, decoder_hidden_dim, dropout):
        super().__init__()
        self.embedding = nn.Embedding(input_dim, embedding_dim)
        self.rnn = nn.GRU(embedding_dim, encoder_hidden_dim, bidirectional=True)
        self.fc = nn.Linear(encoder_hidden_dim * 2, decoder_hidden_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src):
        # src = [src length, batch size]
        embedded = self.dropout(self.embedding(src))
        # embedded = [src length, batch size, embedding dim]
        outputs, hidden = self.rnn(embedded)
        # outputs = [src length, batch size, hidden dim * n directions]
        # hidden = [n layers * n directions, batch size, hidden dim]
        hidden = torch.tanh(self.fc(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)))
        # outputs = [src length, batch size, encoder hidden dim * 2]
        # hidden = [batch size, decoder hidden dim]
        return outputs, hidden


class Attention(nn.Module):
    def __init__(self, encoder_hidden_dim, decoder_hidden_dim):
        super().__init__()
        self.attn_fc = nn.Linear((encoder_hidden_dim * 2) + decoder_hidden_dim, decoder_hidden_dim)
        self.v_fc = nn.Linear(decoder_hidden_dim, 1, bias=False)

    def forward(self, hidden, encoder_outputs):
        # hidden = [batch size, decoder hidden dim]
        # encoder_outputs = [src length, batch size, encoder hidden dim * 2]
        batch_size = encoder_outputs.shape[1]  # noqa: F841 - as in the notebook
        src_length = encoder_outputs.shape[0]
        # repeat decoder hidden state src_length times
        hidden = hidden.unsqueeze(1).repeat(1, src_length, 1)
        encoder_outputs = encoder_outputs.permute(1, 0, 2)
        # hidden = [batch size, src length, decoder hidden dim]
        # encoder_outputs = [batch size, src length, encoder hidden dim * 2]
        energy = torch.tanh(self.attn_fc(torch.cat((hidden, encoder_outputs), dim=2)))
        # energy = [batch size, src length, decoder hidden dim]
        attention = self.v_fc(energy).squeeze(2)
        # attention = [batch size, src length]
        return torch.softmax(attention, dim=1)


class Decoder(nn.Module):
    def __init__(
        self,
        output_dim,
        embedding_dim,
        encoder_hidden_dim,
        decoder_hidden_dim,
        dropout,
        attention,
    ):
        super().__init__()
        self.output_dim = output_dim
        self.attention = attention
        self.embedding = nn.Embedding(output_dim, embedding_dim)
        self.rnn = nn.GRU((encoder_hidden_dim * 2) + embedding_dim, decoder_hidden_dim)
        self.fc_out = nn.Linear(
            (encoder_hidden_dim * 2) + decoder_hidden_dim + embedding_dim, output_dim
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, encoder_outputs):
        # input = [batch size]
        # hidden = [batch size, decoder hidden dim]
        # encoder_outputs = [src length, batch size, encoder hidden dim * 2]
        input = input.unsqueeze(0)
        # input = [1, batch size]
        embedded = self.dropout(self.embedding(input))
        # embedded = [1, batch size, embedding dim]
        a = self.attention(hidden, encoder_outputs)
        # a = [batch size, src length]
        a = a.unsqueeze(1)
        # a = [batch size, 1, src length]
        encoder_outputs = encoder_outputs.permute(1, 0, 2)
        # encoder_outputs = [batch size, src length, encoder hidden dim * 2]
        weighted = torch.bmm(a, encoder_outputs)
        # weighted = [batch size, 1, encoder hidden dim * 2]
        weighted = weighted.permute(1, 0, 2)
        # weighted = [1, batch size, encoder hidden dim * 2]
        rnn_input = torch.cat((embedded, weighted), dim=2)
        # rnn_input = [1, batch size, (encoder hidden dim * 2) + embedding dim]
        output, hidden = self.rnn(rnn_input, hidden.unsqueeze(0))
        # output = [1, batch size, decoder hidden dim]
        # hidden = [1, batch size, decoder hidden dim]
        # this also means that output == hidden
        assert (output == hidden).all()
        embedded = embedded.squeeze(0)
        output = output.squeeze(0)
        weighted = weighted.squeeze(0)
        prediction = self.fc_out(torch.cat((output, weighted, embedded), dim=1))
        # prediction = [batch size, output dim]
        return prediction, hidden.squeeze(0), a.squeeze(1)


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, device):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.device = device

    def forward(self, src, trg, teacher_forcing_ratio):
        # src = [src length, batch size]
        # trg = [trg length, batch size]
        batch_size = src.shape[1]
        trg_length = trg.shape[0]
        trg_vocab_size = self.decoder.output_dim
        outputs = torch.zeros(trg_length, batch_size, trg_vocab_size).to(self.device)
        encoder_outputs, hidden = self.encoder(src)
        input = trg[0, :]
        for t in range(1, trg_length):
            output, hidden, _ = self.decoder(input, hidden, encoder_outputs)
            outputs[t] = output
            teacher_force = random.random() < teacher_forcing_ratio
            top1 = output.argmax(1)
            input = trg[t] if teacher_force else top1
        return outputs


def build_vocab(path: Path, *, wrap: bool) -> WordTokenizer:
    """Like torchtext's ``build_vocab_from_iterator(..., specials=SPECIALS)``: specials,
    then words by falling frequency (ties here in first-seen order, torchtext's
    alphabetical: no test depends on it); ``wrap``: sources get
    ``<sos>`` and ``<eos>`` around them."""
    splitter = WordTokenizer(["<unk>"], unk_id=0)
    counts: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        for word in splitter.words(line):
            counts[word] = counts.get(word, 0) + 1
    words = sorted(counts, key=lambda w: -counts[w])  # stable: first seen first
    marks = dict(start_tokens=["<sos>"], end_tokens=["<eos>"]) if wrap else {}
    return WordTokenizer(SPECIALS + words, unk_id=UNK, **marks)


def pad(seqs, value):
    """``(length, batch)``: the notebook's ``pad_sequence`` (sequence first)."""
    width = max(len(s) for s in seqs)
    return torch.tensor([s + [value] * (width - len(s)) for s in seqs]).t()


def fit(build, steps: int, seed: int, *, packed: bool = False):
    """The notebooks' training loop for ``steps`` batches: teacher forcing 0.5,
    cross-entropy ignoring ``<pad>``, clipping 1.0 (Adam at lr 1e-2 here).
    ``build(src_vocab, tgt_vocab)`` makes the notebook's ``Seq2Seq``; ``packed``: batches
    bucketed by source length, each sorted by falling source length with its lengths
    passed (notebook 4's ``BucketIterator(sort_within_batch=True)``), else bucketed by
    target length. Returns ``(encoder, decoder, src_vocab, tgt_vocab)`` in eval mode."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    state = random.getstate()
    try:
        torch.manual_seed(seed)
        random.seed(seed)
        src_vocab = build_vocab(SAMPLE / "sample.en", wrap=True)
        tgt_vocab = build_vocab(SAMPLE / "sample.es", wrap=False)
        model = build(src_vocab, tgt_vocab)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        criterion = nn.CrossEntropyLoss(ignore_index=PAD)
        en = (SAMPLE / "sample.en").read_text(encoding="utf-8").splitlines()
        es = (SAMPLE / "sample.es").read_text(encoding="utf-8").splitlines()
        pairs = [
            (src_vocab.encode(s), [SOS, *tgt_vocab.encode(t), EOS])
            for s, t in zip(en, es, strict=True)
        ]
        pairs.sort(key=lambda p: len(p[0 if packed else 1]))
        batches = [pairs[i : i + BATCH] for i in range(0, len(pairs), BATCH)]
        rng = random.Random(seed)
        model.train()
        for _ in range(steps):
            batch = rng.choice(batches)
            if packed:
                batch = sorted(batch, key=lambda p: -len(p[0]))
            src, trg = pad([s for s, _ in batch], PAD), pad([t for _, t in batch], PAD)
            if packed:
                output = model(src, torch.tensor([len(s) for s, _ in batch]), trg, 0.5)
            else:
                output = model(src, trg, 0.5)
            output_dim = output.shape[-1]
            loss = criterion(output[1:].view(-1, output_dim), trg[1:].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        return model.encoder.eval(), model.decoder.eval(), src_vocab, tgt_vocab
    finally:
        random.setstate(state)
        torch.set_num_threads(threads)


def train(steps: int = STEPS, seed: int = 0):
    """This notebook's model trained by :func:`fit`."""

    def build(src_vocab, tgt_vocab):
        attention = Attention(ENCODER_HIDDEN, DECODER_HIDDEN)
        encoder = Encoder(src_vocab.vocab_size, EMBEDDING, ENCODER_HIDDEN, DECODER_HIDDEN, 0.1)
        decoder = Decoder(
            tgt_vocab.vocab_size, EMBEDDING, ENCODER_HIDDEN, DECODER_HIDDEN, 0.1, attention
        )
        return Seq2Seq(encoder, decoder, torch.device("cpu"))

    return fit(build, steps, seed)


@functools.lru_cache(maxsize=1)
def trained():
    return train()


def translate(encoder, decoder, src_ids: list[int]):
    """The notebook's ``translate_sentence`` on ids (``src_ids`` already wrapped in
    ``<sos>``/``<eos>``), under the service's rules: at most ``min(256, floor(2 * len) +
    10)`` target tokens, EOS included; never ``<pad>`` or ``<sos>``; EOS not first.
    Returns ``(token ids without EOS, attention rows)``."""
    limit = min(256, math.floor(2.0 * len(src_ids)) + 10)
    with torch.no_grad():
        encoder_outputs, hidden = encoder(torch.LongTensor(src_ids).unsqueeze(-1))
        inputs = [SOS]
        attentions = []
        for step in range(limit - 1):
            output, hidden, attention = decoder(
                torch.LongTensor([inputs[-1]]), hidden, encoder_outputs
            )
            attentions.append(attention[0])
            output[:, [PAD, SOS] + ([EOS] if step == 0 else [])] = float("-inf")
            predicted_token = output.argmax(-1).item()
            if predicted_token == EOS:
                break
            inputs.append(predicted_token)
    return inputs[1:], torch.stack(attentions).numpy()


def load():
    from export.modules import Signature
    from export.user import UserModel

    encoder, decoder, src_vocab, tgt_vocab = trained()
    return UserModel(
        encoder,
        decoder,
        src_vocab,
        tgt_vocab,
        {"pad": PAD, "unk": UNK, "bos": SOS, "eos": EOS},
        Signature(token_shape="B", hidden_layout="flat", time_major=True),
    )
