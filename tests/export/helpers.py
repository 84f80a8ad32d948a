"""Tiny random models for the export tests, and a torch-free serving subprocess."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from models.config import ModelConfig
from models.seq2seq import Seq2Seq
from service.bundle import load_bundle
from service.loop import decode
from service.pool import MemoryPool
from service.sessions import RuntimeConfig

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "models" / "sample"

TINY = dict(
    src_vocab_size=40,
    tgt_vocab_size=45,
    embed_dim=8,
    encoder_hidden=8,
    decoder_hidden=16,
    attention_dim=8,
    output_dim=8,
    dropout=0.0,
)


def tiny_config(**overrides) -> ModelConfig:
    return ModelConfig(**(TINY | overrides))


def tiny_model(seed: int = 0, **overrides) -> Seq2Seq:
    torch.manual_seed(seed)
    return Seq2Seq(tiny_config(**overrides)).eval()


def export_onnx(model: Seq2Seq, out_dir: Path):
    """Export the graphs into ``out_dir`` and open them in ONNX Runtime (CPU)."""
    from export.graphs import export_graphs
    from service.runtime import OnnxModel
    from service.sessions import RuntimeConfig

    export_graphs(model, out_dir)
    runtime = RuntimeConfig(providers=("cpu",), intra_op_threads=1)
    return OnnxModel(out_dir, model.config.state_names, runtime)


class TorchStepModel:
    """A ``StepModel`` that runs the PyTorch model itself (the traced step module): the
    numpy search over it sees exactly the reference's numbers."""

    def __init__(self, model: Seq2Seq) -> None:
        from export.graphs import DecoderStepGraph

        self.model = model.eval()
        self.graph = DecoderStepGraph(model).eval()

    def new_pool(self) -> MemoryPool:
        return MemoryPool()

    def encode(self, src_ids: np.ndarray, src_lengths: np.ndarray):
        from service.decoding import Encoded

        with torch.no_grad():
            enc = self.model.encode(torch.from_numpy(src_ids), torch.from_numpy(src_lengths))
        return Encoded(
            enc.memory.numpy(),
            enc.keys.numpy(),
            enc.mask.numpy(),
            tuple(s.numpy() for s in enc.state),
        )

    def step(self, *, prev_tokens, parent_rows, row_sentence, memory, keys, mask, states, top_k):
        from service.decoding import StepOutput

        t = torch.from_numpy
        with torch.no_grad():
            values, ids, eos, attention, *new = self.graph(
                t(prev_tokens),
                t(parent_rows),
                t(row_sentence),
                t(memory),
                t(keys),
                t(mask),
                torch.tensor([top_k]),
                *(t(s) for s in states),
            )
        return StepOutput(
            values.numpy(),
            ids.numpy(),
            eos.numpy(),
            attention.numpy(),
            tuple(s.numpy() for s in new),
        )


def random_sources(vocab: int, n: int = 20, max_len: int = 8, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [
        [int(t) for t in rng.integers(4, vocab, rng.integers(1, max_len + 1))] for _ in range(n)
    ]


def cli_args(checkpoint: Path, out: Path, *extra: str) -> list[str]:
    """``nmt-export`` arguments that keep the parity gate small."""
    return [
        str(checkpoint),
        "--out",
        str(out),
        "--parity-src",
        str(SAMPLE / "sample.en"),
        "--parity-limit",
        "20",
        "--beam-sentences",
        "5",
        *extra,
    ]


SERVING_SCRIPT = r"""
import json, sys

BLOCKED = ("torch", "onnx")


class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not a serving dependency")
        return None


sys.meta_path.insert(0, Block())
try:
    import torch  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("the import blocker does not work")

from models.options import DecodeOptions
from service.bundle import load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig

bundle = load_bundle(sys.argv[1], RuntimeConfig(providers=("cpu",), intra_op_threads=1))
ids = bundle.src_tokenizer.encode_batch(json.loads(sys.argv[2]))
options = DecodeOptions(beam_size=3, n_best=3)
nbest = decode(bundle.model, ids, options=options, special=bundle.special)
print(json.dumps({
    "ids": ids,
    "tokens": [[list(h.tokens) for h in hyps] for hyps in nbest],
    "scores": [[h.score for h in hyps] for hyps in nbest],
    "text": [bundle.tgt_tokenizer.decode(hyps[0].tokens) for hyps in nbest],
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED),
}))
"""


def serve_without_torch(bundle_dir: Path, texts: list[str]) -> dict:
    """Run :data:`SERVING_SCRIPT` on ``bundle_dir`` in a fresh interpreter; its JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", SERVING_SCRIPT, str(bundle_dir), json.dumps(texts)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def one_error_line(capsys) -> str:
    """The single ``nmt-export: error:`` line a failed CLI call printed."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("nmt-export: error:"), err
    return lines[0]


def assert_decodes_alone_as_batched(
    bundle_dir: Path, lines: list[str], score_atol: float = 0.0
) -> None:
    """Each of ``lines`` decodes alike alone and in one batch with the others, greedy and
    beam 3, with the bundle's decoding defaults: the same tokens, and scores bit for bit
    (or within ``score_atol``: this project's fp32 bundles, whose kernels sum in an order
    that depends on the batch, ~1e-6)."""
    bundle = load_bundle(bundle_dir, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    sources = [bundle.src_tokenizer.encode(line) for line in lines]
    for beam in (1, 3):
        options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=beam)
        batched = decode(bundle.model, sources, options=options, special=bundle.special)
        for source, together in zip(sources, batched, strict=True):
            (alone,) = decode(bundle.model, [source], options=options, special=bundle.special)
            assert [h.tokens for h in alone] == [h.tokens for h in together]
            gaps = [abs(a.score - b.score) for a, b in zip(alone, together, strict=True)]
            assert max(gaps) <= score_atol, gaps


def printed_score_errors(got, want, printed: int = 6) -> np.ndarray:
    """Each score of ``got`` (n-best lists of ``(text, score)``) beyond the rounding of
    the one a toolkit printed in ``want`` (lists of ``{"score"}``) to ``printed``
    significant digits (Marian: 6; -268.29 is within 0.005 of its float): what float32
    arithmetic in another order leaves."""
    out = []
    for g, w in zip(got, want, strict=True):
        for (_, score), h in zip(g, w, strict=True):
            digit = 10.0 ** (np.floor(np.log10(abs(h["score"]))) + 1 - printed)
            out.append(max(abs(score - h["score"]) - digit / 2, 0.0))
    return np.array(out)


def forced_score_errors(bundle_dir: Path, fixture: Path) -> tuple[np.ndarray, np.ndarray]:
    """A toolkit's own forced-decoding scores (``fixture``: a ``score.json`` of
    ``{"pairs": [{"source", "target", "target_tokens", "token_log_probs", "log_prob"}]}``,
    made by the toolkit) against the bundle's ``Score`` path (each target forced whole,
    EOS included, under the bundle's decoding defaults): the differences of every token's
    log-prob (where the toolkit gives them) and of every total, each divided by the larger
    of 1 and the toolkit's magnitude (float32 in another order: relative where large).
    The bundle's target tokenizer must split each target into the toolkit's tokens."""
    from nmt_api.nmt.v1 import translator_pb2 as pb
    from service.messages import to_score_options

    pairs = json.loads(fixture.read_text(encoding="utf-8"))["pairs"]
    bundle = load_bundle(bundle_dir, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    tgt, eos = bundle.tgt_tokenizer, bundle.special.eos
    sources = [bundle.src_tokenizer.encode(p["source"]) for p in pairs]
    targets = [tuple(tgt.encode(p["target"])) for p in pairs]
    assert [tgt.pieces(t) for t in targets] == [p["target_tokens"] for p in pairs]
    options = to_score_options(pb.ScoreOptions(), max_length=512, defaults=bundle.decoding)
    forced = [(*t, eos) for t in targets]
    got = decode(bundle.model, sources, options=options, special=bundle.special, prefixes=forced)
    tokens, totals = [], []
    for (h,), p in zip(got, pairs, strict=True):
        assert h.tokens == tuple(forced[len(totals)][:-1])
        if p["token_log_probs"] is not None:
            pairs_of = zip(h.token_log_probs, p["token_log_probs"], strict=True)
            tokens += [abs(g - w) / max(1.0, abs(w)) for g, w in pairs_of]
        totals.append(abs(h.log_prob - p["log_prob"]) / max(1.0, abs(p["log_prob"])))
    return np.array(tokens), np.array(totals)


def write_tf_score_pairs(rows: list[dict], path: Path) -> Path:
    """TensorFlow's teacher-forced scores (the Keras fixtures' ``score.json`` lines:
    ``source``, ``target`` words ending with the end token, ``token_log_probs``,
    ``log_prob``) as the ``score.json`` :func:`forced_score_errors` reads; ``path``."""
    pairs = [
        {"source": r["source"], "target": " ".join(r["target"][:-1]),
         "target_tokens": r["target"][:-1], "token_log_probs": r["token_log_probs"],
         "log_prob": r["log_prob"]}
        for r in rows
    ]  # fmt: skip
    path.write_text(json.dumps({"pairs": pairs}))
    return path


def served_with_attention(repo: Path, texts: list[str]) -> list[tuple[object, np.ndarray]]:
    """Each text's best hypothesis (the proto) and its attention ``(rows, cols)``, from a
    real gRPC server on the model repository ``repo`` (one Translate request)."""
    from nmt_api.nmt.v1 import translator_pb2 as pb
    from tests.service.server_fixtures import ServerFactory
    from tests.service.server_helpers import proto_options, stub_for

    factory = ServerFactory(repo)
    try:
        server = factory()
        channel, stub = stub_for(server.port)
        reply = stub.Translate(
            pb.TranslateRequest(texts=texts, options=proto_options(return_attention=True)),
            timeout=60,
        )
        channel.close()
    finally:
        factory.close()
    out = []
    for t in reply.translations:
        hyp = t.hypotheses[0]
        att = np.array(hyp.attention.values).reshape(hyp.attention.rows, hyp.attention.cols)
        out.append((hyp, att))
    return out
