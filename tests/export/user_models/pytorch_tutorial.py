# ruff: noqa: N802 - the tutorial's own camelCase names
"""The PyTorch tutorial "NLP From Scratch: Translation with a Sequence to Sequence
Network and Attention", its modules as written there:

* ``Lang`` vocabularies with ``SOS_token = 0`` and ``EOS_token = 1`` (plus a padding and
  an unknown word, which the tutorial does without);
* ``normalizeString`` as the tutorial has it (pytorch/tutorials, 2024: lower-case,
  ``unicodeToAscii``, ``!`` and ``?`` split off, every run of other characters, ``.``
  included, a space) and ``tensorFromSentence``'s EOS after every source, both expressed
  as :class:`models.words.WordTokenizer` options (:func:`tokenizer`, the README's);
* ``EncoderRNN(input) -> (output, hidden)`` (GRU, batch_first; no lengths: it reads
  padding, so the exporter encodes equal lengths together);
* ``AttnDecoderRNN`` with ``BahdanauAttention`` and ``forward_step(input, hidden,
  encoder_outputs)`` (no mask: the exporter masks its softmax).

Differences from the tutorial: batches are padded with PAD (not SOS), and
``AttnDecoderRNN.forward`` loops over the target's length when teacher forcing.
:func:`evaluate` is the tutorial's own, on raw text: what the served translations are
checked against.
"""

from __future__ import annotations

import functools
import math
import random
import re
import unicodedata
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from models.words import WordTokenizer

SAMPLE = Path(__file__).resolve().parents[3] / "models" / "sample"
SOS_token, EOS_token, PAD_token, UNK_token = 0, 1, 2, 3
MAX_LENGTH = 40
HIDDEN = 64
STEPS = 60
BATCH = 32


class Lang:
    def __init__(self, name):
        self.name = name
        self.word2index = {}
        self.word2count = {}
        self.index2word = {0: "SOS", 1: "EOS", 2: "PAD", 3: "UNK"}
        self.n_words = 4

    def addSentence(self, words):
        for word in words:
            self.addWord(word)

    def addWord(self, word):
        if word not in self.word2index:
            self.word2index[word] = self.n_words
            self.word2count[word] = 1
            self.index2word[self.n_words] = word
            self.n_words += 1
        else:
            self.word2count[word] += 1


def unicodeToAscii(s):
    return "".join(c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn")


# Lowercase, trim, and remove non-letter characters
def normalizeString(s):
    s = unicodeToAscii(s.lower().strip())
    s = re.sub(r"([.!?])", r" \1", s)
    s = re.sub(r"[^a-zA-Z!?]+", r" ", s)
    return s.strip()


# normalizeString as WordTokenizer options (the README's mymodel.py has the same)
WORDS = dict(
    unk_id=UNK_token,
    lowercase=True,
    fold_accents=True,
    split_punctuation=False,
    keep="abcdefghijklmnopqrstuvwxyz!?",
    space_before="!?",
)


@functools.lru_cache(maxsize=1)
def readLangs():
    en = (SAMPLE / "sample.en").read_text(encoding="utf-8").splitlines()
    es = (SAMPLE / "sample.es").read_text(encoding="utf-8").splitlines()
    pairs = [
        (normalizeString(a).split(), normalizeString(b).split())
        for a, b in zip(en, es, strict=True)
    ]
    input_lang, output_lang = Lang("eng"), Lang("spa")
    for a, b in pairs:
        input_lang.addSentence(a)
        output_lang.addSentence(b)
    return input_lang, output_lang, pairs


def tokenizer(lang: Lang, *, source: bool = False) -> WordTokenizer:
    """``lang``'s words with ``normalizeString``'s rules; a source ends in EOS, as
    ``tensorFromSentence`` ends it."""
    tokens = [lang.index2word[i] for i in range(lang.n_words)]
    return WordTokenizer(tokens, end_tokens=["EOS"] if source else [], **WORDS)


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        output, hidden = self.gru(embedded)
        return output, hidden


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        attentions = []
        steps = MAX_LENGTH if target_tensor is None else target_tensor.size(1)
        for i in range(steps):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs
            )
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)
            if target_tensor is not None:
                decoder_input = target_tensor[:, i].unsqueeze(1)  # Teacher forcing
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()
        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        attentions = torch.cat(attentions, dim=1)
        return decoder_outputs, decoder_hidden, attentions

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        output = self.out(output)
        return output, hidden, attn_weights


def indexesFromSentence(lang, words):
    return [lang.word2index.get(word, UNK_token) for word in words]


def train(steps: int = STEPS, seed: int = 0):
    """The tutorial's ``train_epoch`` on padded batches for ``steps`` batches; returns
    ``(encoder, decoder, input_tokenizer, output_tokenizer)`` in eval mode."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        rng = random.Random(seed)
        input_lang, output_lang, pairs = readLangs()
        encoder = EncoderRNN(input_lang.n_words, HIDDEN)
        decoder = AttnDecoderRNN(HIDDEN, output_lang.n_words)
        data = [  # tensorFromSentence: EOS after both
            (
                indexesFromSentence(input_lang, a) + [EOS_token],
                indexesFromSentence(output_lang, b) + [EOS_token],
            )
            for a, b in pairs
        ]
        data.sort(key=lambda p: len(p[1]))
        batches = [data[i : i + BATCH] for i in range(0, len(data), BATCH)]
        encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
        decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-2)
        criterion = nn.NLLLoss(ignore_index=PAD_token)
        encoder.train(), decoder.train()
        for _ in range(steps):
            batch = rng.choice(batches)
            n_in = max(len(a) for a, _ in batch)
            n_out = max(len(b) for _, b in batch)
            input_tensor = torch.tensor([a + [PAD_token] * (n_in - len(a)) for a, _ in batch])
            target_tensor = torch.tensor([b + [PAD_token] * (n_out - len(b)) for _, b in batch])
            encoder_optimizer.zero_grad()
            decoder_optimizer.zero_grad()
            encoder_outputs, encoder_hidden = encoder(input_tensor)
            decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)
            loss = criterion(
                decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1)
            )
            loss.backward()
            encoder_optimizer.step()
            decoder_optimizer.step()
        tokenizers = tokenizer(input_lang, source=True), tokenizer(output_lang)
        return encoder.eval(), decoder.eval(), *tokenizers
    finally:
        torch.set_num_threads(threads)


@functools.lru_cache(maxsize=1)
def trained():
    return train()


def translate(encoder, decoder, src_ids: list[int]):
    """The tutorial's ``evaluate``, one step at a time: ``(token ids without EOS,
    attention rows)``.

    The service's rules: at most ``min(256, ceil(2 * len) + 10)`` target tokens, EOS
    included; never SOS or PAD; EOS not as the first token."""
    limit = min(256, math.ceil(2.0 * len(src_ids)) + 10)
    with torch.no_grad():
        input_tensor = torch.tensor(src_ids, dtype=torch.long).view(1, -1)
        encoder_outputs, decoder_hidden = encoder(input_tensor)
        decoder_input = torch.tensor([[SOS_token]])
        decoded_ids, attentions = [], []
        for step in range(limit - 1):
            decoder_output, decoder_hidden, attn_weights = decoder.forward_step(
                decoder_input, decoder_hidden, encoder_outputs
            )
            attentions.append(attn_weights[0, 0])
            banned = [SOS_token, PAD_token] + ([EOS_token] if step == 0 else [])
            decoder_output[..., banned] = float("-inf")
            _, topi = decoder_output.topk(1)
            if topi.item() == EOS_token:
                break
            decoded_ids.append(topi.item())
            decoder_input = topi.squeeze(-1).detach()
    return decoded_ids, torch.stack(attentions).numpy()


def load():
    from export.modules import Signature
    from export.user import UserModel

    encoder, decoder, input_tok, output_tok = trained()
    return UserModel(
        encoder,
        decoder,
        input_tok,
        output_tok,
        {"pad": PAD_token, "unk": UNK_token, "bos": SOS_token, "eos": EOS_token},
        Signature(decoder_method="forward_step"),
    )


def evaluate(encoder, decoder, sentence: str) -> str:
    """The tutorial's own path from raw text to a translation: ``normalizeString``,
    ``tensorFromSentence`` (unknown words as UNK, which the tutorial's ``Lang`` lacks),
    the greedy loop under the service's rules (:func:`translate`), the words joined."""
    input_lang, output_lang, _ = readLangs()
    words = normalizeString(sentence).split()
    ids, _ = translate(encoder, decoder, indexesFromSentence(input_lang, words) + [EOS_token])
    return " ".join(output_lang.index2word[i] for i in ids)
