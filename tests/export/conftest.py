"""Shared fixtures of the export tests: tiny SentencePiece tokenizers, a tiny checkpoint and
one bundle exported through the CLI (session-scoped: exporting is the slow part)."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Tiny models on a shared CPU: extra intra-op threads only spin and contend."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tokenizers(tmp_path_factory):
    from models.tokenizer import Tokenizer, read_lines, train_sentencepiece

    d = tmp_path_factory.mktemp("spm")
    toks = []
    for side in ("en", "es"):
        lines = read_lines(ROOT / "models" / "sample" / f"sample.{side}")
        model = train_sentencepiece(lines, d / side, vocab_size=100)
        toks.append(Tokenizer.from_file(model))
    return tuple(toks)


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory, tokenizers) -> Path:
    from models.checkpoint import save_checkpoint
    from tests.export.helpers import tiny_model

    src_tok, tgt_tok = tokenizers
    model = tiny_model(
        seed=3,
        src_vocab_size=src_tok.vocab_size,
        tgt_vocab_size=tgt_tok.vocab_size,
        rnn_type="lstm",
        placement="luong",
        attention="general",
    )
    path = tmp_path_factory.mktemp("ckpt") / "model.pt"
    save_checkpoint(path, model, src_tok, tgt_tok, meta={"step": 0, "history": [1, 2]})
    return path


@pytest.fixture(scope="session")
def exported(tmp_path_factory, checkpoint):
    """``(bundle_dir, exit_code, stdout, stderr)`` of one ``nmt-export`` run."""
    from export.cli import main
    from tests.export.helpers import cli_args

    out = tmp_path_factory.mktemp("repo") / "en-es" / "1"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(cli_args(checkpoint, out))
    return out, code, stdout.getvalue(), stderr.getvalue()


@pytest.fixture(scope="session")
def bundle_dir(exported) -> Path:
    out, code, _, stderr = exported
    assert code == 0, stderr
    return out
