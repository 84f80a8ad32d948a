"""Fixtures of the server tests (imported by ``tests/service/conftest.py``): a tiny exported
model bundle and real in-process gRPC servers.

The tiny model is random (garbage translations) but deterministic: ``torch.manual_seed(0)``,
output weights scaled so the step distributions depend on the state, and a small EOS bias so
most hypotheses end after a few tokens while some beams loop to the length limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.service.server_helpers import ROOT, one_torch_thread, stub_for

SAMPLE_EN = ROOT / "models" / "sample" / "sample.en"
SAMPLE_ES = ROOT / "models" / "sample" / "sample.es"
TINY_MODEL = "tiny"
OUTPUT_SCALE = 3.0
EOS_BIAS = 0.5


@dataclass(frozen=True)
class TinyBundle:
    """Paths of the tiny model: repository, bundle dir and the checkpoint it came from."""

    repo: Path
    bundle_dir: Path
    checkpoint: Path
    sentences: tuple[str, ...]  # sample.en lines, the source side of the tests


def build_tiny_bundle(
    root: Path, name: str = TINY_MODEL, *, max_source_tokens: int = 1024, **overrides
) -> TinyBundle:
    """Export a tiny random model (``ModelConfig`` ``overrides``: a model variant) into
    ``root/repo/name/1``, gated up to ``max_source_tokens``."""
    import torch

    from export.cli import export_bundle
    from models.checkpoint import save_checkpoint
    from models.config import ModelConfig
    from models.seq2seq import Seq2Seq
    from models.tokenizer import Tokenizer, read_lines, train_sentencepiece

    en, es = read_lines(SAMPLE_EN), read_lines(SAMPLE_ES)
    src_tok = Tokenizer.from_file(train_sentencepiece(en, root / "spm" / "en", vocab_size=120))
    tgt_tok = Tokenizer.from_file(train_sentencepiece(es, root / "spm" / "es", vocab_size=120))
    torch.manual_seed(0)
    config = ModelConfig(
        **(
            dict(
                src_vocab_size=src_tok.vocab_size,
                tgt_vocab_size=tgt_tok.vocab_size,
                embed_dim=16,
                encoder_hidden=16,
                decoder_hidden=32,
                attention_dim=16,
                output_dim=16,
                dropout=0.0,
            )
            | overrides
        )
    )
    model = Seq2Seq(config).eval()
    with torch.no_grad():
        model.decoder.output.weight.mul_(OUTPUT_SCALE)
        model.decoder.output.bias[config.eos_id] += EOS_BIAS
    checkpoint = root / "model.pt"
    save_checkpoint(checkpoint, model, src_tok, tgt_tok, meta={"note": "tiny random test model"})
    repo = root / "repo"
    bundle_dir = repo / name / "1"
    with one_torch_thread():
        # the tiny model is verified up to 1,024 source tokens: the load tests send long
        # sentences, which this 120-piece vocabulary splits into many pieces
        export_bundle(
            checkpoint,
            bundle_dir,
            parity_src=SAMPLE_EN,
            parity_limit=20,
            beam_sentences=5,
            max_source_tokens=max_source_tokens,
        )
    return TinyBundle(repo, bundle_dir, checkpoint, tuple(line for line in en if line.strip()))


@pytest.fixture(scope="session")
def tiny_bundle(tmp_path_factory: pytest.TempPathFactory) -> TinyBundle:
    return build_tiny_bundle(tmp_path_factory.mktemp("tiny-bundle"))


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_bundle: TinyBundle):
    """The PyTorch checkpoint the bundle was exported from (the reference decoder's model)."""
    from models.checkpoint import load_checkpoint

    return load_checkpoint(tiny_bundle.checkpoint)


class ServerFactory:
    """Builds real ``TranslationServer``s on 127.0.0.1 (free ports) and stops them all."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.servers: list = []

    def __call__(
        self, *, warm: bool = True, start: bool = True, server: dict | None = None, **engine
    ):
        """``server``: ServerConfig fields to override (TLS, reflection...); the rest of
        the keywords are EngineConfig fields. One engine per model unless a test asks
        for ``decode_lanes`` (tests reach an engine's internals and count its queue;
        tests/service/test_lanes.py and test_server.py run lanes)."""
        engine.setdefault("decode_lanes", 1)
        from prometheus_client import CollectorRegistry

        from service.engine import EngineConfig
        from service.server import ServerConfig, create_server
        from service.sessions import RuntimeConfig

        fields = {
            "model_repository": self.repo,
            "host": "127.0.0.1",
            "port": 0,
            "metrics_host": "127.0.0.1",
            "metrics_port": 0,
            "shutdown_grace": 2.0,
            "runtime": RuntimeConfig(providers=("cpu",), intra_op_threads=1),
            "engine": EngineConfig(**engine),
        }
        config = ServerConfig(**(fields | (server or {})))
        server, port = create_server(config, registry=CollectorRegistry())
        assert port > 0 and server.port == port
        self.servers.append(server)
        if start:
            server.start()
            if warm:
                server.warm_up()
        return server

    def close(self) -> None:
        for server in reversed(self.servers):
            server.stop(0)


@pytest.fixture(scope="module")
def server_factory(tiny_bundle: TinyBundle) -> Iterator[ServerFactory]:
    factory = ServerFactory(tiny_bundle.repo)
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def stub(server):
    """A gRPC stub on the test module's ``server`` (each server test module defines its
    own ``server`` fixture), closed with the module."""
    channel, grpc_stub = stub_for(server.port)
    yield grpc_stub
    channel.close()
