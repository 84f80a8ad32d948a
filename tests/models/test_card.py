"""``python -m models.card``: a model card rendered from the files a run wrote."""

from __future__ import annotations

import hashlib
import json

import pytest

from models import card
from models.checkpoint import save_checkpoint
from tests.models.conftest import tiny_model


def _inputs(tmp_path, tokenizers, *, sha: str | None = None):
    model = tiny_model()
    ckpt = tmp_path / "model.pt"
    save_checkpoint(ckpt, model, *tokenizers)
    digest = sha or hashlib.sha256(ckpt.read_bytes()).hexdigest()
    system = {"bleu": 20.0, "chrf": 40.0, "seconds": 3.0}
    results = {
        "command": "python3 -m models.everyday --out r.json",
        "date": "2026-11-23",
        "threads": 2,
        "checkpoint_sha256": digest,
        "sets": {
            "everyday": {
                "sentences": 2,
                "source": "models/everyday/everyday.en",
                "systems": {"greedy": system, "beam5": system | {"bleu": 24.0},
                            "apertium": system | {"bleu": 30.0}},
                "bleu_vs_apertium": {"greedy": 0.667, "beam5": 0.8},
                "translations": [
                    {"en": "Hello.", "ref": "Hola.", "greedy": "Hola.", "beam5": "Hola.",
                     "apertium": "Hola."},
                    {"en": "I am hungry.", "ref": "Tengo hambre.", "greedy": "Soy hambriento.",
                     "beam5": "Soy hambriento.", "apertium": "Soy hambriento."},
                ],
            }
        },
    }  # fmt: skip
    history = [
        {"epoch": e, "train_loss": 3.0 / e, "valid_loss": 2.0 / e, "valid_bleu": 10.0 * e,
         "select_bleu": [5.0, 9.0, 7.0][e - 1], "pairs_per_second": 400.0,
         "elapsed_seconds": 600.0 * e}
        for e in (1, 2, 3)
    ]  # fmt: skip
    summary = {"history": history, "device": "cpu", "train_pairs": 1234}
    source = {
        "description": "Ding examples", "package": "trans-de-en", "version": "1.9-6",
        "licence": "GPL-2+", "kept": 10, "train": 8, "valid": 1, "test": 1,
    }  # fmt: skip
    corpus = {
        "command": "nmt-data build --out d --oversample ding=3",
        "date": "2026-11-23",
        "apertium": {"mode": "eng-spa", "apertium-eng-spa": "0.8.1-2", "licence": "GPL-2+"},
        "excluded_test_sets": [
            {"file": "/r/models/everyday/everyday.en", "sentences": 200},
            {"file": "/elsewhere/tests.en", "sentences": 2},
        ],
        "oversample": {"ding": 3},
        "sources": {"ding": source},
    }
    paths = {}
    for name, value in (("results", results), ("summary", summary), ("corpus", corpus)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(value))
    return model, ckpt, paths


def test_card_renders_scores_data_and_curve(tmp_path, tokenizers) -> None:
    model, ckpt, paths = _inputs(tmp_path, tokenizers)
    out = tmp_path / "MODEL_CARD.md"
    args = [str(ckpt), "--out", str(out), "--command", "nmt-train --data d --out r"]
    args += [f"--{k}={v}" for k, v in paths.items()]
    assert card.main([*args, "--title", "tiny model"]) == 0
    text = out.read_text()
    assert text.startswith("# tiny model\n")
    assert f"{model.parameter_count():,} parameters" in text
    assert "bidirectional GRU encoder, GRU decoder, additive attention (Bahdanau" in text
    assert "| everyday (2) | model, beam 5 | 24.00 | 40.00 | 80% | 3 |" in text
    assert "| everyday (2) | Apertium | 30.00 | 40.00 | - | 3 |" in text
    assert "| `trans-de-en` (1.9-6) | GPL-2+ | 10 | 8 (× 3) | 1 | 1 |" in text
    assert "`models/everyday/everyday.en` (200), `/elsewhere/tests.en` (2)" in text
    assert "epoch 2, the best by greedy BLEU on the validation lines" in text  # by select
    assert "| 3 | 1.000 | 0.667 | 30.00 | 7.00 | 400 | 30.0 |" in text
    assert "| I am hungry. | Soy hambriento. | Soy hambriento. | Tengo hambre. |" in text


def test_card_refuses_results_of_another_checkpoint(tmp_path, tokenizers, capsys) -> None:
    _, ckpt, paths = _inputs(tmp_path, tokenizers, sha="0" * 64)
    args = [str(ckpt), "--out", str(tmp_path / "c.md"), "--command", "x"]
    args += [f"--{k}={v}" for k, v in paths.items()]
    assert card.main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "scored another checkpoint" in err[0]
    assert not (tmp_path / "c.md").exists()


def test_card_needs_its_inputs(tmp_path, tokenizers, capsys) -> None:
    _, ckpt, paths = _inputs(tmp_path, tokenizers)
    paths["summary"].unlink()
    args = [str(ckpt), "--out", str(tmp_path / "c.md"), "--command", "x"]
    args += [f"--{k}={v}" for k, v in paths.items()]
    assert card.main(args) == 2
    assert "summary.json" in capsys.readouterr().err
    with pytest.raises(card.CardError, match="scored another checkpoint"):
        card.render(title="t", checkpoint=ckpt, config={}, parameters=0,
                    results={}, summary={}, corpus={}, command="")  # fmt: skip
