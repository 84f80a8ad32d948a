"""Dive into Deep Learning (d2l.ai), section 11.4 "The Bahdanau Attention Mechanism",
PyTorch tab: its ``Seq2SeqEncoder``, ``AdditiveAttention``/``masked_softmax``,
``Seq2SeqAttentionDecoder``, ``Vocab`` and ``MTFraEng`` text handling as written there
(d2l-ai/d2l-en commit 23d7a5a, ``d2l/torch.py`` and
``chapter_attention-mechanisms-and-transformers/bahdanau-attention.md``):

* ``Seq2SeqEncoder(X [B,S], *args) -> (outputs [S,B,H], state [L,B,H])``: it takes the
  batch batch-first, transposes it itself and returns sequence-first; it ignores the
  valid lengths, so it reads the padding it was trained with: every source padded with
  ``<pad>`` to ``num_steps`` tokens;
* ``Seq2SeqAttentionDecoder(X [B,1], state) -> (Y [B,1,V], state)`` with ``state =
  [enc_outputs [B,S,H], hidden_state [L,B,H], enc_valid_lens [B]]`` (what its
  ``init_state`` makes of the encoder's return), masking its attention by the valid
  lengths itself; the attention is not returned but kept in ``attention_weights``;
* ``Vocab``: tokens sorted, so ``<eos>``, ``<pad>`` and ``<unk>`` sit at different ids in
  the two vocabularies (the source has no ``<bos>``); ``_preprocess``: lower-cased, a
  space put before ``,.!?`` after a non-space, split on spaces, ``<eos>`` appended.

Differences, for a model that trains in seconds on the 300 sample pairs:
``d2l.Module``/``d2l.Classifier``/``d2l.Trainer`` (plotting, hyper-parameter saving) are
plain ``nn.Module`` and the loop in :func:`train`; ``num_steps`` 16 (d2l: 9);
``min_freq`` 1 (d2l: 2); smaller dimensions and dropout 0.1 (d2l: 256, 256, 2 layers,
0.2); batches drawn from length buckets. :func:`translate` is d2l's ``predict_step``
for one sentence, except that a source longer than ``num_steps`` is not cut (d2l's
``build`` cuts it; the server translates the whole sentence) and decoding stops at
``<eos>`` under the served rules.
"""

# ruff: noqa: N803, N806 - d2l's names (X, H, Y_hat) kept as the book writes them
from __future__ import annotations

import collections
import functools
import math
import random
from pathlib import Path

import torch
from torch import nn

from models.words import WordTokenizer

SAMPLE = Path(__file__).resolve().parents[3] / "models" / "sample"
NUM_STEPS = 16
EMBED, HIDDENS, LAYERS, DROPOUT = 32, 48, 2, 0.1
STEPS = 200
BATCH = 32


# -- d2l/torch.py, as written (d2l.Module -> nn.Module) ----------------------------------------


class Vocab:
    """Vocabulary for text."""

    def __init__(self, tokens=[], min_freq=0, reserved_tokens=[]):  # noqa: B006 - as in d2l
        # Flatten a 2D list if needed
        if tokens and isinstance(tokens[0], list):
            tokens = [token for line in tokens for token in line]
        # Count token frequencies
        counter = collections.Counter(tokens)
        self.token_freqs = sorted(counter.items(), key=lambda x: x[1], reverse=True)
        # The list of unique tokens
        self.idx_to_token = list(
            sorted(
                set(
                    ["<unk>"]
                    + reserved_tokens
                    + [token for token, freq in self.token_freqs if freq >= min_freq]
                )
            )
        )
        self.token_to_idx = {token: idx for idx, token in enumerate(self.idx_to_token)}

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        if not isinstance(tokens, list | tuple):
            return self.token_to_idx.get(tokens, self.unk)
        return [self.__getitem__(token) for token in tokens]

    @property
    def unk(self):  # Index for the unknown token
        return self.token_to_idx["<unk>"]


def _preprocess(text):
    """``MTFraEng._preprocess``."""
    # Replace non-breaking space with space
    text = text.replace("\u202f", " ").replace("\xa0", " ")

    # Insert space between words and punctuation marks
    def no_space(char, prev_char):
        return char in ",.!?" and prev_char != " "

    out = [
        " " + char if i > 0 and no_space(char, text[i - 1]) else char
        for i, char in enumerate(text.lower())
    ]
    return "".join(out)


def _tokenize_line(line):
    """One sentence of ``MTFraEng._tokenize``: ``<eos>`` appended, empty tokens skipped."""
    return [t for t in f"{line} <eos>".split(" ") if t]


def masked_softmax(X, valid_lens):
    """Perform softmax operation by masking elements on the last axis."""

    # X: 3D tensor, valid_lens: 1D or 2D tensor
    def _sequence_mask(X, valid_len, value=0):
        maxlen = X.size(1)
        mask = (
            torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :]
            < valid_len[:, None]
        )
        X[~mask] = value
        return X

    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    else:
        shape = X.shape
        if valid_lens.dim() == 1:
            valid_lens = torch.repeat_interleave(valid_lens, shape[1])
        else:
            valid_lens = valid_lens.reshape(-1)
        # On the last axis, replace masked elements with a very large negative
        # value, whose exponentiation outputs 0
        X = _sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
        return nn.functional.softmax(X.reshape(shape), dim=-1)


class AdditiveAttention(nn.Module):
    """Additive attention."""

    def __init__(self, num_hiddens, dropout, **kwargs):
        super().__init__(**kwargs)
        self.W_k = nn.LazyLinear(num_hiddens, bias=False)
        self.W_q = nn.LazyLinear(num_hiddens, bias=False)
        self.w_v = nn.LazyLinear(1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        queries, keys = self.W_q(queries), self.W_k(keys)
        # After dimension expansion, shape of queries: (batch_size, no. of
        # queries, 1, num_hiddens) and shape of keys: (batch_size, 1, no. of
        # key-value pairs, num_hiddens). Sum them up with broadcasting
        features = queries.unsqueeze(2) + keys.unsqueeze(1)
        features = torch.tanh(features)
        # There is only one output of self.w_v, so we remove the last
        # one-dimensional entry from the shape. Shape of scores: (batch_size,
        # no. of queries, no. of key-value pairs)
        scores = self.w_v(features).squeeze(-1)
        self.attention_weights = masked_softmax(scores, valid_lens)
        # Shape of values: (batch_size, no. of key-value pairs, value
        # dimension)
        return torch.bmm(self.dropout(self.attention_weights), values)


class Encoder(nn.Module):
    """The base encoder interface for the encoder--decoder architecture."""

    def __init__(self):
        super().__init__()

    # Later there can be additional arguments (e.g., length excluding padding)
    def forward(self, X, *args):
        raise NotImplementedError


class Decoder(nn.Module):
    """The base decoder interface for the encoder--decoder architecture."""

    def __init__(self):
        super().__init__()

    # Later there can be additional arguments (e.g., length excluding padding)
    def init_state(self, enc_all_outputs, *args):
        raise NotImplementedError

    def forward(self, X, state):
        raise NotImplementedError


class AttentionDecoder(Decoder):
    """The base attention-based decoder interface."""

    def __init__(self):
        super().__init__()

    @property
    def attention_weights(self):
        raise NotImplementedError


class RNN(nn.Module):
    """The RNN model implemented with high-level APIs."""

    def __init__(self, num_inputs, num_hiddens):
        super().__init__()
        self.rnn = nn.RNN(num_inputs, num_hiddens)

    def forward(self, inputs, H=None):
        return self.rnn(inputs, H)


class GRU(RNN):
    """The multilayer GRU model."""

    def __init__(self, num_inputs, num_hiddens, num_layers, dropout=0):
        nn.Module.__init__(self)
        self.rnn = nn.GRU(num_inputs, num_hiddens, num_layers, dropout=dropout)


def init_seq2seq(module):
    """Initialize weights for sequence-to-sequence learning."""
    if type(module) is nn.Linear:
        nn.init.xavier_uniform_(module.weight)
    if type(module) is nn.GRU:
        for param in module._flat_weights_names:
            if "weight" in param:
                nn.init.xavier_uniform_(module._parameters[param])


class Seq2SeqEncoder(Encoder):
    """The RNN encoder for sequence-to-sequence learning."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = GRU(embed_size, num_hiddens, num_layers, dropout)
        self.apply(init_seq2seq)

    def forward(self, X, *args):
        # X shape: (batch_size, num_steps)
        embs = self.embedding(torch.transpose(X, 0, 1).to(torch.int64))
        # embs shape: (num_steps, batch_size, embed_size)
        outputs, state = self.rnn(embs)
        # outputs shape: (num_steps, batch_size, num_hiddens)
        # state shape: (num_layers, batch_size, num_hiddens)
        return outputs, state


# -- bahdanau-attention.md, PyTorch tab, as written --------------------------------------------


class Seq2SeqAttentionDecoder(AttentionDecoder):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        self.attention = AdditiveAttention(num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
        self.dense = nn.LazyLinear(vocab_size)
        self.apply(init_seq2seq)

    def init_state(self, enc_outputs, enc_valid_lens):
        # Shape of outputs: (num_steps, batch_size, num_hiddens).
        # Shape of hidden_state: (num_layers, batch_size, num_hiddens)
        outputs, hidden_state = enc_outputs
        return (outputs.permute(1, 0, 2), hidden_state, enc_valid_lens)

    def forward(self, X, state):
        # Shape of enc_outputs: (batch_size, num_steps, num_hiddens).
        # Shape of hidden_state: (num_layers, batch_size, num_hiddens)
        enc_outputs, hidden_state, enc_valid_lens = state
        # Shape of the output X: (num_steps, batch_size, embed_size)
        X = self.embedding(X).permute(1, 0, 2)
        outputs, self._attention_weights = [], []
        for x in X:
            # Shape of query: (batch_size, 1, num_hiddens)
            query = torch.unsqueeze(hidden_state[-1], dim=1)
            # Shape of context: (batch_size, 1, num_hiddens)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
            # Concatenate on the feature dimension
            x = torch.cat((context, torch.unsqueeze(x, dim=1)), dim=-1)
            # Reshape x as (1, batch_size, embed_size + num_hiddens)
            out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)
            outputs.append(out)
            self._attention_weights.append(self.attention.attention_weights)
        # After fully connected layer transformation, shape of outputs:
        # (num_steps, batch_size, vocab_size)
        outputs = self.dense(torch.cat(outputs, dim=0))
        return outputs.permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]

    @property
    def attention_weights(self):
        return self._attention_weights


# -- training (d2l's Trainer, EncoderDecoder.forward and Seq2Seq.loss) -------------------------


def _array(sentences, vocab, is_tgt=False):
    """``MTFraEng._build_arrays``'s ``_build_array``: pad or trim to ``num_steps``."""

    def pad_or_trim(seq, t):
        return seq[:t] if len(seq) > t else seq + ["<pad>"] * (t - len(seq))

    sentences = [pad_or_trim(s, NUM_STEPS) for s in sentences]
    if is_tgt:
        sentences = [["<bos>"] + s for s in sentences]
    if vocab is None:
        vocab = Vocab(sentences, min_freq=1)
    array = torch.tensor([vocab[s] for s in sentences])
    valid_len = (array != vocab["<pad>"]).to(torch.int32).sum(1)
    return array, vocab, valid_len


def tokenizer(vocab: Vocab, *, source: bool) -> WordTokenizer:
    """``vocab`` with d2l's text handling: ``<eos>`` after each source."""
    return WordTokenizer(
        vocab.idx_to_token,
        unk_id=vocab.unk,
        split_punctuation=False,
        space_before=",.!?",
        end_tokens=["<eos>"] if source else [],
    )


def train(steps: int = STEPS, seed: int = 0):
    """Returns ``(encoder, decoder, src_vocab, tgt_vocab)`` (d2l ``Vocab``s), eval mode."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        en = (SAMPLE / "sample.en").read_text(encoding="utf-8").splitlines()
        es = (SAMPLE / "sample.es").read_text(encoding="utf-8").splitlines()
        src = [_tokenize_line(_preprocess(line)) for line in en]
        tgt = [_tokenize_line(_preprocess(line)) for line in es]
        src_array, src_vocab, src_valid_len = _array(src, None)
        tgt_array, tgt_vocab, _ = _array(tgt, None, True)
        encoder = Seq2SeqEncoder(len(src_vocab), EMBED, HIDDENS, LAYERS, DROPOUT)
        decoder = Seq2SeqAttentionDecoder(len(tgt_vocab), EMBED, HIDDENS, LAYERS, DROPOUT)
        dec_x, label = tgt_array[:, :-1], tgt_array[:, 1:]

        def forward(rows):  # EncoderDecoder.forward
            enc_all_outputs = encoder(src_array[rows], src_valid_len[rows])
            dec_state = decoder.init_state(enc_all_outputs, src_valid_len[rows])
            return decoder(dec_x[rows], dec_state)[0]

        forward(torch.arange(2))  # materialise the LazyLinear layers before the optimiser
        params = [*encoder.parameters(), *decoder.parameters()]
        optimizer = torch.optim.Adam(params, lr=0.005)
        order = sorted(range(len(en)), key=lambda i: int(src_valid_len[i]))
        buckets = [order[i : i + BATCH] for i in range(0, len(order), BATCH)]
        rng = random.Random(seed)
        tgt_pad = tgt_vocab["<pad>"]
        encoder.train(), decoder.train()
        for _ in range(steps):
            rows = torch.tensor(rng.choice(buckets))
            Y_hat = forward(rows)
            Y = label[rows]
            # Seq2Seq.loss
            ls = nn.functional.cross_entropy(
                Y_hat.reshape(-1, Y_hat.shape[-1]), Y.reshape(-1), reduction="none"
            )
            mask = (Y.reshape(-1) != tgt_pad).to(torch.float32)
            loss = (ls * mask).sum() / mask.sum()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, 1.0)  # Trainer(gradient_clip_val=1)
            optimizer.step()
        return encoder.eval(), decoder.eval(), src_vocab, tgt_vocab
    finally:
        torch.set_num_threads(threads)


@functools.lru_cache(maxsize=1)
def trained():
    encoder, decoder, src_vocab, tgt_vocab = train()
    return (
        encoder,
        decoder,
        tokenizer(src_vocab, source=True),
        tokenizer(tgt_vocab, source=False),
        src_vocab,
        tgt_vocab,
    )


def translate(encoder, decoder, src_ids: list[int]):
    """``EncoderDecoder.predict_step`` for one sentence (``src_ids`` ending in ``<eos>``,
    padded to ``num_steps`` as ``build`` does, never cut), under the service's rules: at
    most ``min(256, floor(2 * len) + 10)`` target tokens, EOS included; never ``<pad>``
    or ``<bos>``; EOS not first. Returns ``(token ids without EOS, attention rows over the
    source's own tokens)``."""
    *_, src_vocab, tgt_vocab = trained()
    pad, bos, eos = tgt_vocab["<pad>"], tgt_vocab["<bos>"], tgt_vocab["<eos>"]
    limit = min(256, math.floor(2.0 * len(src_ids)) + 10)
    padded = src_ids + [src_vocab["<pad>"]] * (NUM_STEPS - len(src_ids))
    src = torch.tensor([padded])
    src_valid_len = torch.tensor([len(src_ids)])
    with torch.no_grad():
        enc_all_outputs = encoder(src, src_valid_len)
        dec_state = decoder.init_state(enc_all_outputs, src_valid_len)
        outputs, attention_weights = [bos], []
        for step in range(limit - 1):
            Y, dec_state = decoder(torch.tensor([[outputs[-1]]]), dec_state)
            attention_weights.append(decoder.attention_weights[-1][0, 0, : len(src_ids)])
            Y[..., [pad, bos] + ([eos] if step == 0 else [])] = float("-inf")
            token = int(Y.argmax(2))
            if token == eos:
                break
            outputs.append(token)
    return outputs[1:], torch.stack(attention_weights).numpy()


def load():
    from export.modules import Signature
    from export.user import UserModel

    encoder, decoder, source, target, src_vocab, tgt_vocab = trained()
    signature = Signature(
        time_major=("memory",),
        decoder_args=("token", ("memory", "hidden", "lengths")),
        decoder_returns=("logits", ("_", "hidden", "_")),
        attention_from="attention_weights",
        source_width=NUM_STEPS,
        source_pad=src_vocab["<pad>"],
    )
    specials = {name: tgt_vocab[f"<{name}>"] for name in ("pad", "unk", "bos", "eos")}
    return UserModel(encoder, decoder, source, target, specials, signature)
