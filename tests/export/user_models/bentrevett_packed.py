"""bentrevett/pytorch-seq2seq, legacy notebook 4 ("Packed Padded Sequences, Masking,
Inference and BLEU"): its ``Encoder``, ``Attention``, ``Decoder`` and ``Seq2Seq`` as
written there (commit b3cd54c), sequence-first, with source lengths and a mask:

* ``Encoder(src [S,B], src_len [B]) -> (outputs [S,B,2H], hidden [B,Hd])`` packs the batch
  with ``pack_padded_sequence``'s default ``enforce_sorted=True``: the notebook's
  ``BucketIterator(sort_within_batch=True)`` hands it batches sorted by falling length, the
  exporter does the same (``Signature(sorted_lengths=True)``);
* ``Decoder(input [B], hidden [B,Hd], encoder_outputs [S,B,2H], mask [B,S])``, its
  attention masked by the decoder itself (``masked_fill(mask == 0, -1e10)``).

Vocabularies, sources wrapped in ``<sos>``/``<eos>``, the training loop and its
differences from the notebook's as in :mod:`bentrevett_time_major`.
"""

from __future__ import annotations

import functools
import math
import random

import torch
import torch.nn.functional as F
from torch import nn

from tests.export.user_models.bentrevett_time_major import (
    EOS,
    PAD,
    SOS,
    UNK,
    fit,
)

EMB_DIM, ENC_HID_DIM, DEC_HID_DIM = 32, 48, 64
STEPS = 80
BATCH = 32


class Encoder(nn.Module):
    def __init__(self, input_dim, emb_dim, enc_hid_dim, dec_hid_dim, dropout):
        super().__init__()
        self.embedding = nn.Embedding(input_dim, emb_dim)
        self.rnn = nn.GRU(emb_dim, enc_hid_dim, bidirectional=True)
        self.fc = nn.Linear(enc_hid_dim * 2, dec_hid_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src, src_len):
        # src = [src len, batch size]
        # src_len = [batch size]
        embedded = self.dropout(self.embedding(src))
        # need to explicitly put lengths on cpu!
        packed_embedded = nn.utils.rnn.pack_padded_sequence(embedded, src_len.to("cpu"))
        packed_outputs, hidden = self.rnn(packed_embedded)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(packed_outputs)
        # outputs = [src len, batch size, hid dim * num directions]
        hidden = torch.tanh(self.fc(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)))
        # outputs = [src len, batch size, enc hid dim * 2]
        # hidden = [batch size, dec hid dim]
        return outputs, hidden


class Attention(nn.Module):
    def __init__(self, enc_hid_dim, dec_hid_dim):
        super().__init__()
        self.attn = nn.Linear((enc_hid_dim * 2) + dec_hid_dim, dec_hid_dim)
        self.v = nn.Linear(dec_hid_dim, 1, bias=False)

    def forward(self, hidden, encoder_outputs, mask):
        # hidden = [batch size, dec hid dim]
        # encoder_outputs = [src len, batch size, enc hid dim * 2]
        batch_size = encoder_outputs.shape[1]  # noqa: F841 - as in the notebook
        src_len = encoder_outputs.shape[0]
        hidden = hidden.unsqueeze(1).repeat(1, src_len, 1)
        encoder_outputs = encoder_outputs.permute(1, 0, 2)
        energy = torch.tanh(self.attn(torch.cat((hidden, encoder_outputs), dim=2)))
        attention = self.v(energy).squeeze(2)
        # attention = [batch size, src len]
        attention = attention.masked_fill(mask == 0, -1e10)
        return F.softmax(attention, dim=1)


class Decoder(nn.Module):
    def __init__(self, output_dim, emb_dim, enc_hid_dim, dec_hid_dim, dropout, attention):
        super().__init__()
        self.output_dim = output_dim
        self.attention = attention
        self.embedding = nn.Embedding(output_dim, emb_dim)
        self.rnn = nn.GRU((enc_hid_dim * 2) + emb_dim, dec_hid_dim)
        self.fc_out = nn.Linear((enc_hid_dim * 2) + dec_hid_dim + emb_dim, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, encoder_outputs, mask):
        # input = [batch size]
        # hidden = [batch size, dec hid dim]
        # encoder_outputs = [src len, batch size, enc hid dim * 2]
        # mask = [batch size, src len]
        input = input.unsqueeze(0)
        embedded = self.dropout(self.embedding(input))
        a = self.attention(hidden, encoder_outputs, mask)
        a = a.unsqueeze(1)
        encoder_outputs = encoder_outputs.permute(1, 0, 2)
        weighted = torch.bmm(a, encoder_outputs)
        weighted = weighted.permute(1, 0, 2)
        rnn_input = torch.cat((embedded, weighted), dim=2)
        output, hidden = self.rnn(rnn_input, hidden.unsqueeze(0))
        # this also means that output == hidden
        assert (output == hidden).all()
        embedded = embedded.squeeze(0)
        output = output.squeeze(0)
        weighted = weighted.squeeze(0)
        prediction = self.fc_out(torch.cat((output, weighted, embedded), dim=1))
        # prediction = [batch size, output dim]
        return prediction, hidden.squeeze(0), a.squeeze(1)


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, src_pad_idx, device):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_pad_idx = src_pad_idx
        self.device = device

    def create_mask(self, src):
        mask = (src != self.src_pad_idx).permute(1, 0)
        return mask

    def forward(self, src, src_len, trg, teacher_forcing_ratio=0.5):
        batch_size = src.shape[1]
        trg_len = trg.shape[0]
        trg_vocab_size = self.decoder.output_dim
        outputs = torch.zeros(trg_len, batch_size, trg_vocab_size).to(self.device)
        encoder_outputs, hidden = self.encoder(src, src_len)
        input = trg[0, :]
        mask = self.create_mask(src)
        for t in range(1, trg_len):
            output, hidden, _ = self.decoder(input, hidden, encoder_outputs, mask)
            outputs[t] = output
            teacher_force = random.random() < teacher_forcing_ratio
            top1 = output.argmax(1)
            input = trg[t] if teacher_force else top1
        return outputs


def train(steps: int = STEPS, seed: int = 0):
    """This notebook's model trained by :func:`bentrevett_time_major.fit`, its batches
    sorted within by falling source length as ``BucketIterator(sort_within_batch=True)``
    gives them."""

    def build(src_vocab, tgt_vocab):
        attention = Attention(ENC_HID_DIM, DEC_HID_DIM)
        encoder = Encoder(src_vocab.vocab_size, EMB_DIM, ENC_HID_DIM, DEC_HID_DIM, 0.1)
        decoder = Decoder(tgt_vocab.vocab_size, EMB_DIM, ENC_HID_DIM, DEC_HID_DIM, 0.1, attention)
        return Seq2Seq(encoder, decoder, PAD, torch.device("cpu"))

    return fit(build, steps, seed, packed=True)


@functools.lru_cache(maxsize=1)
def trained():
    return train()


def translate(encoder, decoder, src_ids: list[int]):
    """The notebook's ``translate_sentence`` on ids, under the service's rules (see
    :func:`bentrevett_time_major.translate`)."""
    limit = min(256, math.floor(2.0 * len(src_ids)) + 10)
    src_tensor = torch.LongTensor(src_ids).unsqueeze(1)
    src_len = torch.LongTensor([len(src_ids)])
    with torch.no_grad():
        encoder_outputs, hidden = encoder(src_tensor, src_len)
        mask = (src_tensor != PAD).permute(1, 0)
        trg_indexes = [SOS]
        attentions = []
        for step in range(limit - 1):
            trg_tensor = torch.LongTensor([trg_indexes[-1]])
            output, hidden, attention = decoder(trg_tensor, hidden, encoder_outputs, mask)
            attentions.append(attention[0])
            output[:, [PAD, SOS] + ([EOS] if step == 0 else [])] = float("-inf")
            pred_token = output.argmax(1).item()
            if pred_token == EOS:
                break
            trg_indexes.append(pred_token)
    return trg_indexes[1:], torch.stack(attentions).numpy()


def load():
    from export.modules import Signature
    from export.user import UserModel

    encoder, decoder, src_vocab, tgt_vocab = trained()
    signature = Signature(
        encoder_args=("src", "lengths"),
        decoder_args=("token", "hidden", "memory", "mask"),
        token_shape="B",
        hidden_layout="flat",
        time_major=True,
        sorted_lengths=True,
    )
    return UserModel(
        encoder, decoder, src_vocab, tgt_vocab, {"pad": PAD, "unk": UNK, "bos": SOS, "eos": EOS},
        signature,
    )  # fmt: skip
