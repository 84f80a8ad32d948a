"""The serving loop on the committed fp32 bundle reproduces the PyTorch reference search
(:mod:`models.search`) on a sample of the demo model's test split, for every rule the
two share (:mod:`models.scoring`): plain greedy and beam, EOS banned before
``min_length``, EOS forced at a short length limit, a length penalty other than 1.

The export gate checks plain greedy (2000 sentences) and beam (200) once, when the
bundle is written; this keeps checking the decoding code the bundle is served with.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from models.options import DecodeOptions
from models.scoring import ScoringRules
from service.bundle import load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig
from tests.committed import EN_ES_FP32

ROOT = Path(__file__).resolve().parents[2]
FP32 = EN_ES_FP32
TEST_SPLIT = ROOT / "models" / "pretrained" / "en-es" / "test.en"
SAMPLE = slice(0, 2000, 50)  # 40 sentences spread over the split
# Scores: fp32 ONNX Runtime vs PyTorch differ in the last bits (the gate's tolerance).
SCORE_ATOL = 1e-4

VARIANTS = {
    "greedy": DecodeOptions(),
    "beam5-n3": DecodeOptions(beam_size=5, n_best=3),
    "greedy-min5": DecodeOptions(min_length=5),
    "beam5-n3-min5": DecodeOptions(beam_size=5, n_best=3, min_length=5),
    "greedy-max6": DecodeOptions(max_length=6),
    "beam4-n4-max6": DecodeOptions(beam_size=4, n_best=4, max_length=6),
    "beam3-n2-ratio0.5": DecodeOptions(
        beam_size=3, n_best=2, max_length_ratio=0.5, max_length_offset=1
    ),
    "beam5-n3-lp0.6": DecodeOptions(beam_size=5, n_best=3, length_penalty=0.6),
    "greedy-cov0.4": DecodeOptions(coverage_penalty=0.4),
    "beam5-n3-cov0.4": DecodeOptions(beam_size=5, n_best=3, coverage_penalty=0.4),
    "greedy-ban-unk": DecodeOptions(ban_unk=True),
    "greedy-block2": DecodeOptions(block_ngram_repeat=2),
    "greedy-block1-ignore": DecodeOptions(block_ngram_repeat=1, ignore_when_blocking=(5, 6, 7)),
    "beam5-n3-block2": DecodeOptions(beam_size=5, n_best=3, block_ngram_repeat=2),
    "beam4-n2-block3-unk": DecodeOptions(beam_size=4, n_best=2, block_ngram_repeat=3, ban_unk=True),
}


@pytest.fixture(scope="module")
def fp32():
    return load_bundle(FP32, RuntimeConfig(providers=("cpu",), intra_op_threads=1))


@pytest.fixture(scope="module")
def demo():
    torch = pytest.importorskip("torch")
    from models.checkpoint import load_checkpoint
    from models.translate import DEMO_CHECKPOINT

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the CPU is shared; restored for the tests after these
    yield load_checkpoint(DEMO_CHECKPOINT)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def sample(fp32) -> list[list[int]]:
    texts = TEST_SPLIT.read_text(encoding="utf-8").splitlines()[SAMPLE]
    ids = [fp32.src_tokenizer.encode(t)[: fp32.max_source_tokens] for t in texts]
    assert len(ids) == 40 and all(ids)
    return ids


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_loop_reproduces_the_pytorch_reference(fp32, demo, sample, variant):
    from models.translate import translate_ids

    assert fp32.decoding == DecodeOptions()  # no model defaults to merge
    options = VARIANTS[variant]
    got = decode(fp32.model, sample, options=options, special=fp32.special)
    want = translate_ids(demo.model, sample, options=options)
    rules = ScoringRules.of(options)
    for src, g, w in zip(sample, got, want, strict=True):
        assert [h.tokens for h in g] == [h.tokens for h in w], demo.src_tokenizer.decode(src)
        assert len(g) == options.n_best
        for hg, hw in zip(g, w, strict=True):
            assert hg.score == pytest.approx(hw.score, abs=SCORE_ATOL)
            assert hg.log_prob == pytest.approx(hw.log_prob, abs=SCORE_ATOL)
            # both scored by the one shared rule, within the limit it sets
            if not rules.needs_coverage:
                assert hg.score == rules.score(hg.log_prob, len(hg.tokens))
                assert hw.score == rules.score(hw.log_prob, len(hw.tokens))
            else:  # the penalty only lowers scores
                no_cov = dataclasses.replace(rules, coverage_penalty=0.0)
                assert hg.score <= no_cov.score(hg.log_prob, len(hg.tokens)) + 1e-9
            assert len(hg.tokens) < rules.length_limit(len(src))
