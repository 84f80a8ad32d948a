"""A sentence's translation does not depend on what else is decoded with it (issue 17,
item 2), for every bundle the server picks by default on CPU: the fp32 bundle and the
int8 one it serves.

* graph level: one encoder row and one decoder row held fixed while the rows around them
  change (other sentences, other lengths, more padding, batch sizes on both sides of the
  runtime's one-thread/two-thread switch) give the same outputs. The same check run on a
  graph quantized the former way (one activation scale per tensor) finds it differs: the
  check would catch the bug.
* end to end through :class:`service.engine.Engine`: test sentences translated one at a
  time and all submitted at once (greedy; beam 5 with 3-best) give the same tokens and
  scores within 1e-5.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from export import spec
from models.options import DecodeOptions
from models.tokenizer import read_lines
from tests.committed import EN_ES_FP32

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = ROOT / "model_repository"
FP32 = EN_ES_FP32
TEST_EN = ROOT / "models" / "pretrained" / "en-es" / "test.en"
TOLERANCE = 1e-5
GRAPH_TOLERANCE = 1e-6
TRIALS = 8


def served_on_cpu() -> Path:
    from service.server import find_bundles

    return find_bundles(REPOSITORY, gpu=False)["en-es"]


def default_cpu_bundles() -> list[Path]:
    return list(dict.fromkeys([FP32, served_on_cpu()]))


def bundle_id(path: Path) -> str:
    from service.bundle import read_manifest

    return f"{path.parent.name}/{path.name}-{read_manifest(path, verify=False)['precision']}"


BUNDLES = default_cpu_bundles()


def test_the_server_serves_the_int8_bundle_on_cpu():
    """The parametrization covers what CPU users get: the int8 bundle, gated as
    batch-invariant at export, and the fp32 one."""
    from service.bundle import read_manifest

    manifest = read_manifest(served_on_cpu())
    assert manifest["precision"] == "int8"
    report = manifest["variant"]["batch_invariance"]
    assert report["sentences"] >= 200 and report["options"] == ["greedy", "beam5-nbest3"]
    assert 0 <= report["max_score_diff"] <= TOLERANCE


# -- graph level ------------------------------------------------------------------------


def onnx_model(bundle_dir: Path):
    from service.bundle import read_manifest
    from service.runtime import OnnxModel
    from service.sessions import RuntimeConfig

    manifest = read_manifest(FP32, verify=False)  # the contract (same for every variant)
    # the server's runtime: steps of 32 rows and more run on two threads, smaller on one
    return OnnxModel(bundle_dir, tuple(manifest["state_names"]), RuntimeConfig(providers=("cpu",)))


def row_drift(model, seed: int = 0) -> dict[str, float]:
    """Largest change of one sentence's encoder outputs and of one decoder row's step
    outputs between running it alone and among ``TRIALS`` batches of other rows."""
    rng = np.random.default_rng(seed)
    vocab, length = 4000, 9
    src = rng.integers(4, vocab, length)
    alone = model.encode(src[None], np.array([length]))
    token = np.array([17])
    state = tuple(s[:1] for s in alone.states)
    one = np.zeros(1, dtype=np.int64)
    step_alone = model.step(
        prev_tokens=token,
        parent_rows=one,
        row_sentence=one,
        memory=alone.memory,
        keys=alone.keys,
        mask=alone.mask,
        states=state,
        top_k=5,
    )
    drift = {"encoder": 0.0, "decoder": 0.0, "top-k ids": 0.0}
    for batch in rng.permutation([2, 5, 13, 31, 32, 40, 64, 3])[:TRIALS]:
        width = int(rng.integers(length, 48))
        lengths = rng.integers(1, width + 1, batch)
        at = int(rng.integers(batch))
        lengths[at] = length
        ids = rng.integers(4, vocab, (batch, width))
        ids[np.arange(width)[None] >= lengths[:, None]] = 0
        ids[at, :length] = src
        enc = model.encode(ids, lengths)
        drift["encoder"] = max(
            drift["encoder"],
            float(np.abs(enc.memory[at, :length] - alone.memory[0]).max()),
            float(np.abs(enc.keys[at, :length] - alone.keys[0]).max()),
            *(
                float(np.abs(b[at] - a[0]).max())
                for a, b in zip(alone.states, enc.states, strict=True)
            ),
        )
        rows = np.arange(batch)
        states = tuple(
            np.where(
                (rows == at).reshape((-1,) + (1,) * (s.ndim - 1)),
                s,
                rng.standard_normal(s.shape).astype(s.dtype),
            )
            for s in enc.states
        )
        tokens = rng.integers(4, vocab, batch)
        tokens[at] = token[0]
        out = model.step(
            prev_tokens=tokens,
            parent_rows=rows,
            row_sentence=rows,
            memory=enc.memory,
            keys=enc.keys,
            mask=enc.mask,
            states=states,
            top_k=5,
        )
        drift["decoder"] = max(
            drift["decoder"],
            float(np.abs(out.topk_values[at] - step_alone.topk_values[0]).max()),
            float(np.abs(out.eos_values[at] - step_alone.eos_values[0]).max()),
            float(np.abs(out.attention[at, :length] - step_alone.attention[0]).max()),
            *(
                float(np.abs(np.asarray(b)[at] - np.asarray(a)[0]).max())
                for a, b in zip(step_alone.states, out.states, strict=True)
            ),
        )
        drift["top-k ids"] += float(np.any(out.topk_ids[at] != step_alone.topk_ids[0]))
    return drift


@pytest.mark.parametrize("bundle_dir", BUNDLES, ids=bundle_id)
def test_a_row_computes_the_same_whatever_its_batch(bundle_dir):
    drift = row_drift(onnx_model(bundle_dir))
    assert drift["top-k ids"] == 0, drift
    assert drift["encoder"] <= GRAPH_TOLERANCE and drift["decoder"] <= GRAPH_TOLERANCE, drift


@pytest.fixture(scope="module")
def per_tensor_int8(tmp_path_factory) -> Path:
    """en-es/5 quantized the former way: ONNX Runtime's quantize_dynamic."""
    from export.quantize import quantize_per_tensor_file

    out = tmp_path_factory.mktemp("per-tensor-int8")
    for name in (spec.ENCODER_FILE, spec.DECODER_FILE):
        quantize_per_tensor_file(FP32 / name, out / name)
    return out


def test_the_graph_check_catches_per_tensor_quantization(per_tensor_int8):
    drift = row_drift(onnx_model(per_tensor_int8))
    assert drift["encoder"] > 1e-3 and drift["decoder"] > 1e-3, drift


def test_the_export_gate_refuses_per_tensor_quantization(per_tensor_int8):
    """The int8 gate of nmt-export (check_batch_invariance) fails on the former graphs."""
    from export.variants import VariantError, check_batch_invariance
    from service.bundle import load_bundle

    fp32 = load_bundle(FP32)
    sources = fp32.src_tokenizer.encode_batch(read_lines(TEST_EN)[:40])
    with pytest.raises(VariantError, match=r"not batch-invariant \(beam5-nbest3, 40 sentences"):
        check_batch_invariance(
            onnx_model(per_tensor_int8),
            sources,
            fp32.special,
            options={"beam5-nbest3": DecodeOptions(beam_size=5, n_best=3)},
        )


# -- end to end -------------------------------------------------------------------------

SENTENCES = 200
GREEDY, BEAM = DecodeOptions(), DecodeOptions(beam_size=5, n_best=3)


def make_engine(bundle):
    from prometheus_client import CollectorRegistry

    from service.engine import Engine, EngineConfig
    from service.metrics import create_metrics

    engine = Engine(bundle, EngineConfig(max_queue=1024), create_metrics(CollectorRegistry()))
    engine.start()
    return engine


@pytest.fixture(scope="module", params=BUNDLES, ids=bundle_id)
def engine(request):
    from service.bundle import load_bundle
    from service.sessions import RuntimeConfig

    engine = make_engine(load_bundle(request.param, RuntimeConfig(providers=("cpu",))))
    yield engine
    engine.stop(30)


def nbest_lists(results) -> list[list[tuple[tuple[int, ...], float]]]:
    return [[(h.tokens, h.score) for _, _, h in r.hypotheses] for r in results]


def alone_and_together(engine, options: DecodeOptions, count: int) -> tuple[list[int], float]:
    """Translate the first ``count`` test sentences one request at a time, then submit them
    all at once (the engine batches them, new ones joining as others finish); returns the
    sentences whose n-best tokens differ and the largest score difference of the rest."""
    texts = [t for t in read_lines(TEST_EN) if t.strip()][:count]
    assert len(texts) == count
    alone = []
    for text in texts:
        _, results = engine.translate([text], options, timeout=60)
        alone += nbest_lists(results)
    jobs = [engine.submit([text], options, timeout=120) for text in texts]
    together = []
    for job in jobs:
        together += nbest_lists(engine.render(job, engine.wait(job, 120)))
    assert len(alone) == len(together) == count
    changed, worst = [], 0.0
    for i, (a, b) in enumerate(zip(alone, together, strict=True)):
        if [tokens for tokens, _ in a] != [tokens for tokens, _ in b]:
            changed.append(i)
            continue
        scores = np.array([[x for _, x in a], [y for _, y in b]])
        assert np.all(np.isfinite(scores)), (i, scores)
        worst = max(worst, float(np.abs(scores[0] - scores[1]).max()))
    return changed, worst


@pytest.mark.parametrize("options", [GREEDY, BEAM], ids=["greedy", "beam5-nbest3"])
def test_one_at_a_time_equals_all_at_once(engine, options):
    changed, worst = alone_and_together(engine, options, SENTENCES)
    assert changed == [], f"{len(changed)} of {SENTENCES} n-best lists changed: {changed[:10]}"
    assert worst <= TOLERANCE


def test_the_end_to_end_check_catches_per_tensor_quantization(per_tensor_int8):
    import dataclasses

    from service.bundle import load_bundle

    fp32 = load_bundle(FP32)
    engine = make_engine(dataclasses.replace(fp32, model=onnx_model(per_tensor_int8)))
    try:
        changed, _ = alone_and_together(engine, BEAM, 60)
    finally:
        engine.stop(30)
    assert changed, "the per-tensor graphs gave every sentence the same n-best list"
