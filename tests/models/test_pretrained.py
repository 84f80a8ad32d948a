"""The committed demo model: small enough to commit, loads alone, meets the quality bar."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from models.checkpoint import load_checkpoint
from models.options import DecodeOptions
from models.tokenizer import read_lines
from models.translate import DEMO_CHECKPOINT, bleu, translate_texts

CARD = DEMO_CHECKPOINT.parent / "MODEL_CARD.md"
QUALITY_BAR = 30.0


@pytest.fixture(scope="module")
def demo():
    return load_checkpoint(DEMO_CHECKPOINT)


def card_bleu(strategy: str, test_set: str = "test") -> float:
    """BLEU of ``strategy`` ("greedy" / "beam 5" of the model, or "Apertium") from the
    card's evaluation table."""
    system = strategy if strategy == "Apertium" else f"model, {strategy}"
    row = rf"^\| {test_set} \([0-9,]+\) \| {system} \| ([0-9.]+) \|"
    match = re.search(row, CARD.read_text(), re.MULTILINE)
    assert match, f"{CARD} has no '| {test_set} (N) | {system} | BLEU |' row"
    return float(match.group(1))


def test_committed_files_are_small():
    assert DEMO_CHECKPOINT.stat().st_size <= 30 * 2**20
    for name in ("test.en", "test.es", "MODEL_CARD.md"):
        assert (DEMO_CHECKPOINT.parent / name).is_file(), name


def test_card_meets_the_quality_bar():
    greedy, beam = card_bleu("greedy"), card_bleu("beam 5")
    assert greedy >= QUALITY_BAR
    assert beam >= greedy


def test_card_meets_issue_20s_everyday_targets():
    """On the everyday set (references by hand) the model reaches the share of its
    teacher's BLEU that issue 20 asked for; beam 5 need not beat greedy there (27.25 vs
    27.37 for the model of 2026-11-26)."""
    apertium = card_bleu("Apertium", "everyday")
    assert apertium > 0
    assert card_bleu("greedy", "everyday") >= 0.75 * apertium
    assert card_bleu("beam 5", "everyday") >= 0.80 * apertium


def test_card_describes_this_checkpoint(demo):
    text = CARD.read_text()
    assert f"{demo.model.parameter_count():,} parameters" in text
    assert f'"decoder_hidden": {demo.config.decoder_hidden}' in text


def test_greedy_bleu_on_a_test_sample_meets_the_bar(demo):
    """Recomputed, not read from the card: the first 200 test sentences, greedy."""
    src = read_lines(DEMO_CHECKPOINT.parent / "test.en")[:200]
    ref = read_lines(DEMO_CHECKPOINT.parent / "test.es")[:200]
    hyps = translate_texts(
        demo.model, demo.src_tokenizer, demo.tgt_tokenizer, src, options=DecodeOptions()
    )
    assert bleu(hyps, ref) >= QUALITY_BAR


def test_demo_translates_the_readme_sentence(demo):
    (text,) = translate_texts(
        demo.model,
        demo.src_tokenizer,
        demo.tgt_tokenizer,
        ["She is looking for a new job."],
        options=DecodeOptions(beam_size=5),
    )
    assert text == "Está buscando un trabajo nuevo.", text


LUONG = DEMO_CHECKPOINT.parent.parent / "en-es-luong"


@pytest.mark.parametrize("directory", [DEMO_CHECKPOINT.parent, LUONG], ids=["en-es", "luong"])
def test_every_demo_model_has_a_card_that_describes_it(directory):
    """Small enough to commit; the card names this checkpoint's size and config and
    carries both test sets, model and Apertium."""
    checkpoint = directory / "model.pt"
    assert checkpoint.stat().st_size <= 30 * 2**20
    ckpt = load_checkpoint(checkpoint)
    text = (directory / "MODEL_CARD.md").read_text()
    assert f"{ckpt.model.parameter_count():,} parameters" in text
    assert f'"rnn_type": "{ckpt.config.rnn_type}"' in text
    assert f'"attention": "{ckpt.config.attention}"' in text
    for row in ("everyday (200) | model, beam 5", "everyday (200) | Apertium",
                "test (2,000) | model, greedy"):  # fmt: skip
        assert f"| {row} |" in text, row


def test_the_luong_demo_is_the_luong_family():
    cfg = load_checkpoint(LUONG / "model.pt").config
    assert (cfg.rnn_type, cfg.attention, cfg.placement) == ("lstm", "general", "luong")
    assert cfg.bidirectional and cfg.input_feed


def test_checkpoint_path_is_inside_the_repository():
    root = Path(__file__).resolve().parents[2]
    assert DEMO_CHECKPOINT.resolve() == root / "models" / "pretrained" / "en-es" / "model.pt"
