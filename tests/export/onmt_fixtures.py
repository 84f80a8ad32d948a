"""What the OpenNMT-py fixture tests share (``tests/fixtures/onmt_py`` made by 3.5.1,
``tests/fixtures/onmt_py2`` by 2.3.0): each model's sources and ``onmt_translate``
outputs, its conversion and the service loop's texts for it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from export.convert import main
from service.bundle import Bundle, load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig


def sources(fixture: Path, name: str) -> list[str]:
    """The model's own ``src.txt`` (raw text for subword models), else the fixture's."""
    own = fixture / name / "src.txt"
    return (own if own.is_file() else fixture / "src.txt").read_text("utf-8").splitlines()


def lines(fixture: Path, name: str, kind: str) -> list[str]:
    """``onmt_translate``'s output ``kind`` ("greedy", "beam5"), one entry a line."""
    return (fixture / name / f"{kind}.txt").read_text(encoding="utf-8").split("\n")[:-1]


def convert(fixture: Path, name: str, out: Path) -> Bundle:
    """``nmt-convert opennmt-py`` of the model into ``out``, loaded on the CPU."""
    src = fixture / name / "src.txt"
    argv = ["opennmt-py", str(fixture / name / "model.pt"), "--out", str(out)]
    argv += ["--parity-src", str(src if src.is_file() else fixture / "src.txt")]
    assert main([*argv, "--beam-sentences", "10"]) == 0
    return load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))


def translate(bundle: Bundle, texts: list[str], beam: int) -> list[list[str]]:
    """Each text's ``beam``-best texts with the bundle's decoding defaults."""
    options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=beam)
    ids = [bundle.src_tokenizer.encode(line) for line in texts]
    nbest = decode(bundle.model, ids, options=options, special=bundle.special)
    return [[bundle.tgt_tokenizer.decode(h.tokens) for h in hyps] for hyps in nbest]
