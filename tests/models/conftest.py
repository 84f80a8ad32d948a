"""Shared tiny fixtures for the model tests: configs, models, padded batches, tokenizers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from models.config import PAD_ID, ModelConfig
from models.seq2seq import Seq2Seq
from models.tokenizer import Tokenizer, read_lines, train_sentencepiece

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "models" / "sample"
TINY_VOCAB = 12


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread, and much faster when the CPU is shared;
    restore the previous count so other test packages are unaffected."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_config(**overrides) -> ModelConfig:
    """A very small model; ``decoder_hidden == memory_dim`` so 'dot' attention is valid."""
    values = dict(
        src_vocab_size=TINY_VOCAB,
        tgt_vocab_size=TINY_VOCAB,
        embed_dim=16,
        encoder_hidden=8,
        bidirectional=True,
        decoder_hidden=16,
        attention_dim=8,
        output_dim=12,
        dropout=0.0,
    )
    values.update(overrides)
    return ModelConfig(**values)


def tiny_model(seed: int = 0, **overrides) -> Seq2Seq:
    """A seeded tiny model in eval mode."""
    torch.manual_seed(seed)
    return Seq2Seq(tiny_config(**overrides)).eval()


@pytest.fixture
def make_config() -> Callable[..., ModelConfig]:
    return tiny_config


@pytest.fixture
def make_model() -> Callable[..., Seq2Seq]:
    return tiny_model


def padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(src, lengths)`` for right-padded rows."""
    width = max(len(r) for r in rows)
    src = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
    for i, row in enumerate(rows):
        src[i, : len(row)] = torch.tensor(row)
    return src, torch.tensor([len(r) for r in rows])


@pytest.fixture
def make_padded() -> Callable[[list[list[int]]], tuple[torch.Tensor, torch.Tensor]]:
    return padded


@pytest.fixture
def padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Three sentences of lengths 6, 4 and 2 (non-special ids), padded with PAD_ID."""
    return padded([[4, 5, 6, 7, 8, 9], [10, 11, 4, 5], [7, 6]])


@pytest.fixture(scope="session")
def sample_lines() -> tuple[list[str], list[str]]:
    en = read_lines(SAMPLE_DIR / "sample.en")
    es = read_lines(SAMPLE_DIR / "sample.es")
    assert len(en) == len(es) == 300
    return en, es


@pytest.fixture(scope="session")
def spm_paths(
    tmp_path_factory: pytest.TempPathFactory, sample_lines: tuple[list[str], list[str]]
) -> tuple[Path, Path]:
    """Tiny SentencePiece models (vocab 200) trained on the committed sample corpus."""
    out = tmp_path_factory.mktemp("spm")
    en, es = sample_lines
    # Not the return value: train_sentencepiece returns prefix.with_suffix(".model"), which
    # for the project's "spm.en" prefix names "spm.model" instead of "spm.en.model".
    train_sentencepiece(en, out / "spm.en", vocab_size=200)
    train_sentencepiece(es, out / "spm.es", vocab_size=200)
    return out / "spm.en.model", out / "spm.es.model"


@pytest.fixture(scope="session")
def tokenizers(spm_paths: tuple[Path, Path]) -> tuple[Tokenizer, Tokenizer]:
    return Tokenizer.from_file(spm_paths[0]), Tokenizer.from_file(spm_paths[1])
