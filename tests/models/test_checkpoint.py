"""Self-contained checkpoints, and the ModelConfig they carry."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from models.checkpoint import FORMAT, CheckpointError, load_checkpoint, save_checkpoint
from models.config import BOS_ID, ConfigError, ModelConfig
from models.options import DecodeOptions
from models.search import greedy_search
from models.seq2seq import Seq2Seq


@pytest.fixture
def model_and_tokenizers(make_config, tokenizers):
    src_tok, tgt_tok = tokenizers
    cfg = make_config(
        src_vocab_size=src_tok.vocab_size,
        tgt_vocab_size=tgt_tok.vocab_size,
        rnn_type="lstm",
        placement="luong",
        attention="general",
    )
    torch.manual_seed(0)
    return Seq2Seq(cfg).eval(), src_tok, tgt_tok


@pytest.fixture
def batch(make_padded):
    src, lengths = make_padded([[10, 11, 12, 13, 14], [20, 21, 22]])
    tgt_in = torch.tensor([[BOS_ID, 30, 31, 32], [BOS_ID, 40, 41, 42]])
    return src, lengths, tgt_in


def test_round_trip_is_exact(model_and_tokenizers, batch, tmp_path) -> None:
    model, src_tok, tgt_tok = model_and_tokenizers
    path = tmp_path / "run" / "model.pt"
    save_checkpoint(path, model, src_tok, tgt_tok, meta={"epoch": 3, "note": "x"})
    assert path.is_file()
    assert list(path.parent.iterdir()) == [path]  # the temporary file is gone

    ckpt = load_checkpoint(path)
    assert ckpt.config == model.config
    assert ckpt.meta == {"epoch": 3, "note": "x"}
    assert not ckpt.model.training
    assert ckpt.src_tokenizer.model_proto == src_tok.model_proto
    assert ckpt.tgt_tokenizer.model_proto == tgt_tok.model_proto
    text = "The way in which a word can be interpreted"
    assert ckpt.src_tokenizer.encode(text) == src_tok.encode(text)

    loaded = ckpt.model.state_dict()
    for name, tensor in model.state_dict().items():
        assert loaded[name].dtype == tensor.dtype
        assert torch.equal(loaded[name], tensor), name
    src, lengths, tgt_in = batch
    with torch.no_grad():
        assert torch.equal(ckpt.model(src, lengths, tgt_in), model(src, lengths, tgt_in))
    options = DecodeOptions(max_length=8)
    expected = greedy_search(model, src, lengths, options=options)
    assert greedy_search(ckpt.model, src, lengths, options=options) == expected


def test_half_checkpoint_is_smaller_and_close(model_and_tokenizers, batch, tmp_path) -> None:
    model, src_tok, tgt_tok = model_and_tokenizers
    full, half = tmp_path / "full.pt", tmp_path / "half.pt"
    save_checkpoint(full, model, src_tok, tgt_tok)
    save_checkpoint(half, model, src_tok, tgt_tok, half=True)
    weight_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert full.stat().st_size - half.stat().st_size > 0.4 * weight_bytes

    ckpt = load_checkpoint(half)
    for name, tensor in model.state_dict().items():
        restored = ckpt.model.state_dict()[name]
        assert restored.dtype == torch.float32
        assert torch.equal(restored, tensor.half().float()), name
    src, lengths, tgt_in = batch
    with torch.no_grad():
        expected = model(src, lengths, tgt_in)
        got = ckpt.model(src, lengths, tgt_in)
    assert not torch.equal(got, expected)  # it really was stored in fp16
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=1e-2)


def test_extra_entries_are_saved(model_and_tokenizers, tmp_path) -> None:
    model, src_tok, tgt_tok = model_and_tokenizers
    path = tmp_path / "last.pt"
    save_checkpoint(path, model, src_tok, tgt_tok, extra={"train_state": {"epoch": 2}})
    payload = torch.load(path, weights_only=True)
    assert payload["format"] == FORMAT
    assert payload["train_state"] == {"epoch": 2}
    assert load_checkpoint(str(path)).meta == {}


def test_missing_file(tmp_path) -> None:
    with pytest.raises(CheckpointError, match="checkpoint not found: .*nope.pt"):
        load_checkpoint(tmp_path / "nope.pt")
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        load_checkpoint(tmp_path)  # a directory is not a checkpoint file either


def test_random_bytes_file(tmp_path) -> None:
    path = tmp_path / "random.pt"
    path.write_bytes(torch.randint(0, 256, (4096,), dtype=torch.uint8).numpy().tobytes())
    with pytest.raises(CheckpointError, match=r"random.pt is not a readable PyTorch checkpoint"):
        load_checkpoint(path)
    assert issubclass(CheckpointError, ValueError)


def test_foreign_torch_files(model_and_tokenizers, tmp_path) -> None:
    model, _, _ = model_and_tokenizers
    bare = tmp_path / "state_dict.pt"
    torch.save(model.state_dict(), bare)
    with pytest.raises(CheckpointError, match=r"not an rnn-nmt checkpoint .*nmt-train"):
        load_checkpoint(bare)
    other = tmp_path / "other.pt"
    torch.save({"format": "someone-else/2", "weights": torch.zeros(3)}, other)
    with pytest.raises(CheckpointError, match="expected format 'rnn-nmt-checkpoint/1'"):
        load_checkpoint(other)
    listing = tmp_path / "list.pt"
    torch.save([1, 2, 3], listing)
    with pytest.raises(CheckpointError, match="not an rnn-nmt checkpoint"):
        load_checkpoint(listing)


def _tampered(path, tmp_path, name: str, edit) -> object:
    payload = torch.load(path, weights_only=True)
    edit(payload)
    out = tmp_path / name
    torch.save(payload, out)
    return out


def test_inconsistent_checkpoints(model_and_tokenizers, tmp_path) -> None:
    model, src_tok, tgt_tok = model_and_tokenizers
    good = tmp_path / "good.pt"
    save_checkpoint(good, model, src_tok, tgt_tok)

    def wrong_size(p):
        p["config"]["embed_dim"] = 24

    def unknown_key(p):
        p["config"]["n_heads"] = 8

    def bad_tokenizer(p):
        p["tgt_tokenizer"] = b"garbage"

    def no_config(p):
        del p["config"]

    with pytest.raises(CheckpointError, match="weights do not match its config"):
        load_checkpoint(_tampered(good, tmp_path, "size.pt", wrong_size))
    with pytest.raises(CheckpointError, match="unknown model config keys: n_heads"):
        load_checkpoint(_tampered(good, tmp_path, "key.pt", unknown_key))
    with pytest.raises(CheckpointError, match="not a SentencePiece model"):
        load_checkpoint(_tampered(good, tmp_path, "tok.pt", bad_tokenizer))
    with pytest.raises(CheckpointError, match=r"noconfig.pt: 'config'"):
        load_checkpoint(_tampered(good, tmp_path, "noconfig.pt", no_config))


# ---------------------------------------------------------------- ModelConfig


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"rnn_type": "rnn"}, r"rnn_type must be one of \('gru', 'lstm'\), got 'rnn'"),
        ({"attention": "mlp"}, r"attention must be one of .*got 'mlp'"),
        ({"placement": "vaswani"}, r"placement must be one of .*got 'vaswani'"),
        ({"embed_dim": 0}, r"embed_dim must be >= 1, got 0"),
        ({"encoder_layers": 0}, r"encoder_layers must be >= 1"),
        ({"decoder_hidden": -4}, r"decoder_hidden must be >= 1, got -4"),
        ({"tgt_vocab_size": 0}, r"tgt_vocab_size must be >= 1"),
        ({"eos_id": 0}, r"pad, unk, bos and eos ids must be distinct"),
        ({"src_vocab_size": 3}, r"special token ids must be smaller than both vocabulary sizes"),
        ({"tgt_vocab_size": 4, "eos_id": 4}, r"special token ids must be smaller"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
        ({"dropout": -0.1}, r"dropout must be in \[0, 1\)"),
        (
            {"attention": "dot", "encoder_hidden": 8, "decoder_hidden": 12},
            r"dot attention needs decoder_hidden == encoder memory size \(16 = ",
        ),
        (
            {"attention": "dot", "bidirectional": False, "encoder_hidden": 8, "decoder_hidden": 16},
            r"\(8 = encoder_hidden x directions\), got 16",
        ),
        (
            {"attention": "general", "coverage": True},
            r"coverage needs attention 'additive' or 'concat' .*got attention='general'",
        ),
        ({"attention": "dot", "coverage": True, "decoder_hidden": 512}, r"attention='dot'"),
        (
            {"attention": "local-p"},
            r"attention 'local-p' predicts its window from the new decoder output h_t, which "
            r"only placement='luong' attends with; got placement='bahdanau'",
        ),
        ({"attention": "local-p", "placement": "luong", "local_window": 0}, "local_window"),
        ({"attention": "local-p", "placement": "luong", "coverage": True}, "'local-p'"),
    ],
)
def test_config_rejects_invalid_values(overrides: dict, match: str) -> None:
    values = dict(src_vocab_size=50, tgt_vocab_size=60) | overrides
    with pytest.raises(ConfigError, match=match):
        ModelConfig(**values)


def test_config_dict_round_trip_and_unknown_keys() -> None:
    cfg = ModelConfig(src_vocab_size=50, tgt_vocab_size=60, rnn_type="lstm", dropout=0.3)
    data = cfg.to_dict()
    assert data["rnn_type"] == "lstm" and data["src_vocab_size"] == 50
    assert ModelConfig.from_dict(data) == cfg
    with pytest.raises(ConfigError, match="unknown model config keys: colour, size"):
        ModelConfig.from_dict(data | {"size": 1, "colour": "red"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.embed_dim = 3  # type: ignore[misc]
    assert issubclass(ConfigError, ValueError)


def test_config_derived_sizes() -> None:
    bi = ModelConfig(src_vocab_size=50, tgt_vocab_size=60, encoder_hidden=24)
    uni = ModelConfig(src_vocab_size=50, tgt_vocab_size=60, encoder_hidden=24, bidirectional=False)
    assert (bi.directions, bi.memory_dim) == (2, 48)
    assert (uni.directions, uni.memory_dim) == (1, 24)
    ModelConfig(
        src_vocab_size=50, tgt_vocab_size=60, attention="dot", encoder_hidden=24, decoder_hidden=48
    )


@pytest.mark.parametrize(
    ("rnn_type", "placement", "input_feed", "names"),
    [
        ("gru", "bahdanau", True, ("hidden",)),
        ("lstm", "bahdanau", True, ("hidden", "cell")),
        ("gru", "luong", True, ("hidden", "feed")),
        ("lstm", "luong", True, ("hidden", "cell", "feed")),
        ("gru", "luong", False, ("hidden",)),
        ("lstm", "luong", False, ("hidden", "cell")),
    ],
)
def test_state_names_match_the_decoder_state(
    make_model, make_padded, rnn_type, placement, input_feed, names
) -> None:
    model = make_model(rnn_type=rnn_type, placement=placement, input_feed=input_feed)
    cfg = model.config
    assert cfg.state_names == names
    assert cfg.has_cell == (rnn_type == "lstm")
    assert cfg.uses_input_feed == (placement == "luong" and input_feed)
    src, lengths = make_padded([[4, 5, 6], [7]])
    enc = model.encode(src, lengths)
    shapes = {
        "hidden": (2, cfg.decoder_layers, cfg.decoder_hidden),
        "cell": (2, cfg.decoder_layers, cfg.decoder_hidden),
        "feed": (2, cfg.output_dim),
    }
    assert [tuple(t.shape) for t in enc.state] == [shapes[n] for n in names]
    with torch.no_grad():
        _, state, _ = model.decoder(
            torch.full((2,), BOS_ID), enc.state, enc.keys, enc.memory, enc.mask
        )
    assert [tuple(t.shape) for t in state] == [shapes[n] for n in names]
