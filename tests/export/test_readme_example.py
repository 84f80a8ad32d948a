"""The README's "Serve your own model" example, run as written: its ``mymodel.py`` over a
tutorial model trained here, its ``nmt-export --from-modules`` line, and its ``nmt-serve``
line (as a real process) answering a translation."""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import torch

from export.cli import main as export_main
from models.words import WordTokenizer
from tests.export.user_models import pytorch_tutorial as tutorial
from tests.service.server_helpers import proto_options, stub_for

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Serve your own model"


def _readme_blocks() -> tuple[str, list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n## ", len(SECTION))]
    python = next(b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "mymodel" in b)
    bash = next(b for b in re.findall(r"```bash\n(.*?)```", section, re.S) if "nmt-export" in b)
    return python, [line for line in bash.splitlines() if line.strip()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_readme_example_serves_a_tutorial_model(tmp_path, monkeypatch):
    python, commands = _readme_blocks()
    assert len(python.strip().splitlines()) <= 30  # "about 20 lines of Python"
    encoder, decoder, src, tgt = tutorial.trained()
    # The user's files: vocabularies, weights, their model code, the README's mymodel.py.
    (tmp_path / "eng.vocab").write_text("\n".join(src.tokens) + "\n", encoding="utf-8")
    (tmp_path / "spa.vocab").write_text("\n".join(tgt.tokens) + "\n", encoding="utf-8")
    torch.save(encoder.state_dict(), tmp_path / "encoder.pt")
    torch.save(decoder.state_dict(), tmp_path / "decoder.pt")
    (tmp_path / "tutorial.py").write_text(
        "from tests.export.user_models.pytorch_tutorial import AttnDecoderRNN, EncoderRNN\n"
    )
    (tmp_path / "mymodel.py").write_text(python)
    sample = (ROOT / "models" / "sample" / "sample.en").read_text(encoding="utf-8")
    # raw text with digits, commas, apostrophes, brackets: what normalizeString deletes
    texts = [t for t in sample.splitlines()[60:] if any(c in t for c in "0123456789,'(")][:20]
    (tmp_path / "test.en").write_text("\n".join(sample.splitlines()[:60]) + "\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("mymodel", None)

    export_cmd, serve_cmd = commands
    argv = shlex.split(export_cmd)
    assert argv[0] == "nmt-export"
    assert export_main(argv[1:] + ["--beam-sentences", "5"]) == 0
    bundle = tmp_path / "model_repository" / "my-model" / "1"
    assert (bundle / "manifest.json").is_file()

    argv = shlex.split(serve_cmd)
    assert argv[0] == "nmt-serve"
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.server",
            *argv[1:],
            "--port",
            str(port),
            "--metrics-port",
            "-1",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        channel, stub = stub_for(port)
        deadline = time.monotonic() + 60
        while True:
            try:
                from nmt_api.nmt.v1 import translator_pb2 as pb

                reply = stub.Translate(
                    pb.TranslateRequest(texts=texts, options=proto_options()), timeout=30
                )
                break
            except grpc.RpcError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        # the tutorial's own pipeline on the raw text, word for word
        want = [tutorial.evaluate(encoder, decoder, text) for text in texts]
        assert [t.hypotheses[0].text for t in reply.translations] == want
        assert len(set(want)) > 10  # a model that translates, not one answer for all
        channel.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_readme_tokenizer_reads_text_as_normalize_string_does():
    """The README's WordTokenizer options are the tutorial's ``normalizeString``, on every
    sample sentence of both sides and on text it deletes most of."""
    python, _ = _readme_blocks()
    assert 'keep="abcdefghijklmnopqrstuvwxyz!?",\n        space_before="!?"' in python
    assert 'end_tokens=["EOS"]' in python
    words = WordTokenizer(["UNK"], **(tutorial.WORDS | {"unk_id": 0}))
    sample = ROOT / "models" / "sample"
    lines = [
        *(sample / "sample.en").read_text(encoding="utf-8").splitlines(),
        *(sample / "sample.es").read_text(encoding="utf-8").splitlines(),
        "Wow!? It's 3.5 km (2 mi)... Ça va, Zoë?",
        "¿Qué tal?  ¡Muy bien!",
        "",
    ]
    for line in lines:
        assert words.words(line) == tutorial.normalizeString(line).split(), line
