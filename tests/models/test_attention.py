"""Source padding masks in attention, and exact variable-length encoding."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from models.attention import masked_softmax
from models.config import ATTENTION_TYPES, BOS_ID, LUONG_ONLY_ATTENTION, PLACEMENTS, RNN_TYPES
from models.encoder import Encoder, reverse_index

VARIANTS = [
    pytest.param(dict(rnn_type=r, attention=a, placement=p), id=f"{r}-{a}-{p}")
    for r, a, p in itertools.product(RNN_TYPES, ATTENTION_TYPES, PLACEMENTS)
    if p == "luong" or a not in LUONG_ONLY_ATTENTION
] + [
    pytest.param(dict(coverage=True), id="gru-additive-bahdanau-coverage"),
    pytest.param(
        dict(rnn_type="lstm", attention="concat", placement="luong", coverage=True),
        id="lstm-concat-luong-coverage",
    ),
]


def test_masked_softmax_exact_zero_at_padding() -> None:
    scores = torch.tensor([[1.0, 2.0, 100.0, -3.0], [5.0, 1e4, 1e4, 1e4]])
    mask = torch.tensor([[True, True, False, False], [True, False, False, False]])
    weights = masked_softmax(scores, mask)
    expected_first = torch.softmax(torch.tensor([1.0, 2.0]), -1)
    torch.testing.assert_close(weights[0, :2], expected_first, atol=1e-7, rtol=0)
    assert weights[0, 2:].tolist() == [0.0, 0.0]
    assert weights[1].tolist() == [1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("overrides", VARIANTS)
def test_attention_weights_are_zero_at_padding(make_model, padded_batch, overrides: dict) -> None:
    model = make_model(**overrides)
    src, lengths = padded_batch
    with torch.no_grad():
        enc = model.encode(src, lengths)
        assert enc.mask.tolist() == [
            [True] * 6,
            [True] * 4 + [False] * 2,
            [True] * 2 + [False] * 4,
        ]
        assert len(enc.state) == len(model.config.state_names)
        state = enc.state
        prev = torch.full((3,), BOS_ID)
        for _ in range(4):
            logits, state, weights = model.decoder(prev, state, enc.keys, enc.memory, enc.mask)
            assert weights.shape == (3, 6)
            assert torch.all(weights[~enc.mask] == 0.0)
            assert torch.all(weights[enc.mask] > 0.0)
            real_sum = (weights * enc.mask).sum(-1)
            torch.testing.assert_close(real_sum, torch.ones(3), atol=1e-6, rtol=0)
            assert len(state) == len(model.config.state_names)
            if model.config.coverage:  # the sum of the weights so far: 0 at padding too
                assert torch.all(state[-1][~enc.mask] == 0.0)
            prev = logits.argmax(-1)


@pytest.mark.parametrize("overrides", VARIANTS)
def test_decoder_steps_ignore_padding(make_model, padded_batch, overrides: dict) -> None:
    """Decoding a padded batch gives every sentence the logits it gets alone."""
    model = make_model(**overrides)
    src, lengths = padded_batch
    tgt_in = torch.tensor([[BOS_ID, 4, 5, 6], [BOS_ID, 7, 8, 9], [BOS_ID, 10, 11, 4]])
    with torch.no_grad():
        batched = model(src, lengths, tgt_in)
        for b, n in enumerate(lengths.tolist()):
            alone = model(src[b : b + 1, :n], lengths[b : b + 1], tgt_in[b : b + 1])
            torch.testing.assert_close(batched[b], alone[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("gate", [-50.0, 0.0, 0.3, 50.0], ids=["start", "middle", "near", "end"])
@pytest.mark.parametrize("window", [1, 2])
def test_local_p_weights_a_gaussian_window_around_the_predicted_position(
    make_model, padded_batch, window: int, gate: float
) -> None:
    """p_t = S sigmoid(v_p^T tanh(W_p h_t)) of each row's own length S; weights are the
    general scores plus the Gaussian's log, softmaxed over the real positions within D
    of p_t (0 elsewhere, padding included), even when p_t sits at either end."""
    model = make_model(attention="local-p", placement="luong", local_window=window)
    att = model.decoder.attention
    with torch.no_grad():
        att.position_proj.weight.fill_(0.1)
        att.position_v.weight.fill_(gate)
    src, lengths = padded_batch
    query = torch.randn(3, model.config.decoder_hidden, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        enc = model.encode(src, lengths)
        _, weights = att(query, enc.keys, enc.memory, enc.mask)
        general = torch.bmm(enc.keys, query.unsqueeze(-1)).squeeze(-1)
        gates = torch.sigmoid(att.position_v(torch.tanh(att.position_proj(query)))).squeeze(-1)
    for row, n in enumerate(lengths.tolist()):
        p = n * float(gates[row])
        assert 0.0 <= p <= n
        inside = [j for j in range(n) if abs(j - p) <= window]
        assert inside, "every row keeps a real position"
        logits = torch.tensor(
            [float(general[row, j]) - (j - p) ** 2 / (2 * (window / 2) ** 2) for j in inside]
        )
        want = torch.zeros(src.size(1))
        want[inside] = torch.softmax(logits, -1)
        torch.testing.assert_close(weights[row], want, atol=1e-6, rtol=1e-5)
        assert float(weights[row].sum()) == pytest.approx(1.0, abs=1e-6)
        assert torch.all(weights[row, n:] == 0.0)


def test_reverse_index_values_and_involution() -> None:
    lengths = torch.tensor([3, 1, 4])
    index = reverse_index(lengths, 4)
    assert index.tolist() == [[2, 1, 0, 3], [0, 1, 2, 3], [3, 2, 1, 0]]
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 9, (16,), generator=gen)
    index = reverse_index(lengths, 8)
    twice = torch.gather(index, 1, index)
    assert torch.equal(twice, torch.arange(8).expand(16, 8))


ENCODER_CASES = list(itertools.product(RNN_TYPES, (False, True), (1, 2)))


def _encoder_config(make_config, rnn_type: str, bidirectional: bool, layers: int):
    return make_config(
        rnn_type=rnn_type,
        bidirectional=bidirectional,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_hidden=8,
        decoder_hidden=12,
    )


@pytest.mark.parametrize(("rnn_type", "bidirectional", "layers"), ENCODER_CASES)
def test_encoder_padded_batch_matches_each_sentence_alone(
    make_config, padded_batch, rnn_type: str, bidirectional: bool, layers: int
) -> None:
    cfg = _encoder_config(make_config, rnn_type, bidirectional, layers)
    torch.manual_seed(0)
    encoder = Encoder(cfg).eval()
    src, lengths = padded_batch
    with torch.no_grad():
        memory, init = encoder(src, lengths)
        assert memory.shape == (3, 6, cfg.memory_dim)
        assert init.shape == (3, layers, 12)
        # Whatever sits in the padding must not matter either.
        noisy = src.clone()
        noisy[src == 0] = 9
        noisy_memory, noisy_init = encoder(noisy, lengths)
        for b, n in enumerate(lengths.tolist()):
            alone_memory, alone_init = encoder(src[b : b + 1, :n], lengths[b : b + 1])
            torch.testing.assert_close(memory[b, :n], alone_memory[0], atol=1e-5, rtol=0)
            torch.testing.assert_close(init[b], alone_init[0], atol=1e-5, rtol=0)
            torch.testing.assert_close(noisy_memory[b, :n], memory[b, :n], atol=1e-5, rtol=0)
            assert torch.all(memory[b, n:] == 0.0)
        torch.testing.assert_close(noisy_init, init, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("rnn_type", "bidirectional", "layers"), ENCODER_CASES)
def test_encoder_equals_packed_cudnn_style_rnn(
    make_config, padded_batch, rnn_type: str, bidirectional: bool, layers: int
) -> None:
    """The gather-based encoder computes what ``pack_padded_sequence`` computes."""
    cfg = _encoder_config(make_config, rnn_type, bidirectional, layers)
    torch.manual_seed(0)
    encoder = Encoder(cfg).eval()
    rnn_cls = nn.LSTM if rnn_type == "lstm" else nn.GRU
    ref = rnn_cls(
        cfg.embed_dim,
        cfg.encoder_hidden,
        num_layers=layers,
        bidirectional=bidirectional,
        batch_first=True,
    ).eval()
    with torch.no_grad():
        for layer, directions in enumerate(encoder.layers):
            for direction, rnn in enumerate(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(ref, name + suffix).copy_(getattr(rnn, name + "_l0"))
        src, lengths = padded_batch
        memory, init = encoder(src, lengths)
        packed = pack_padded_sequence(
            encoder.embedding(src), lengths, batch_first=True, enforce_sorted=False
        )
        out, final = ref(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        h_n = final[0] if rnn_type == "lstm" else final
        summary = torch.cat([h_n[-2], h_n[-1]], -1) if bidirectional else h_n[-1]
        expected_init = torch.tanh(encoder.bridge(summary)).view(3, layers, -1)
    torch.testing.assert_close(memory, out, atol=1e-5, rtol=0)
    torch.testing.assert_close(init, expected_init, atol=1e-5, rtol=0)
