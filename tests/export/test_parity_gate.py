"""The parity gate cannot pass vacuously: non-finite outputs fail it, and it refuses to
check nothing (no sentences, no beam sample)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from export.cli import main
from export.parity import ParityError, ParityInputError, max_abs_diff, run_gate
from tests.export.helpers import cli_args, export_onnx, one_error_line, random_sources, tiny_model

NO_SENTENCES = "no parity sentences: give --parity-src with at least one non-empty line"


@pytest.fixture(scope="module")
def exported_tiny(tmp_path_factory):
    model = tiny_model(seed=0, rnn_type="lstm", placement="luong")
    return model, export_onnx(model, tmp_path_factory.mktemp("gate"))


def gate(model, onnx_model, sources=None, **kwargs):
    if sources is None:
        sources = random_sources(model.config.src_vocab_size, n=8, max_len=6, seed=5)
    kwargs.setdefault("beam_sentences", 3)
    return run_gate(model, onnx_model, sources, max_len=12, **kwargs)


class Poisoned:
    """The exported model with one value of one output replaced (``value``)."""

    def __init__(self, inner, output: str, value: float) -> None:
        self.inner, self.output, self.value = inner, output, value

    def new_pool(self):
        return self.inner.new_pool()

    def encode(self, src_ids, src_lengths):
        enc = self.inner.encode(src_ids, src_lengths)
        if self.output != "memory":
            return enc
        memory = enc.memory.copy()
        memory[0, 0, 0] = self.value  # row 0 has length >= 1: position 0 is compared
        return dataclasses.replace(enc, memory=memory)

    def step(self, **kwargs):
        out = self.inner.step(**kwargs)
        if self.output not in ("topk_values", "attention"):
            return out
        values = getattr(out, self.output).copy()
        values[0, 0] = self.value
        return dataclasses.replace(out, **{self.output: values})


def test_a_clean_export_passes(exported_tiny):
    model, onnx_model = exported_tiny
    report = gate(model, onnx_model)
    assert report.greedy_sentences == 8 and report.beam_sentences == 3
    assert math.isfinite(report.max_log_prob_diff) and report.max_log_prob_diff <= 1e-4


@pytest.mark.parametrize(
    ("output", "value", "message"),
    [
        ("topk_values", np.nan, "non-finite values in decoder log-probs"),
        ("topk_values", np.inf, "non-finite values in decoder log-probs"),
        ("topk_values", -np.inf, "non-finite values in decoder log-probs"),
        ("attention", np.nan, "non-finite values in attention"),
        ("attention", np.inf, "non-finite values in attention"),
        ("memory", np.nan, "non-finite values in encoder memory"),
        ("memory", np.inf, "non-finite values in encoder memory"),
    ],
    ids=["logp-nan", "logp-inf", "logp-neg-inf", "attn-nan", "attn-inf", "mem-nan", "mem-inf"],
)
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_non_finite_outputs_fail_the_gate(exported_tiny, output, value, message):
    model, onnx_model = exported_tiny
    with pytest.raises(ParityError, match=message):
        gate(model, Poisoned(onnx_model, output, value))


def test_max_abs_diff():
    inf, nan = math.inf, math.nan
    assert max_abs_diff([-inf, 1.0, 2.0], [-inf, 1.0, 2.5]) == 0.5  # -inf on both: no diff
    assert max_abs_diff([], []) == 0.0
    assert max_abs_diff(1.0, 1.0 + 1e-3) == pytest.approx(1e-3)
    for got, want in [(nan, 1.0), (1.0, nan), (nan, nan), (-inf, 1.0), (1.0, inf), (inf, -inf)]:
        assert max_abs_diff([0.0, got], [0.0, want]) == inf, (got, want)


def test_hypothesis_scores_must_be_finite(exported_tiny, monkeypatch):
    import export.parity

    model, onnx_model = exported_tiny
    real = export.parity.decode

    def decode(*args, **kwargs):
        nbest = real(*args, **kwargs)
        nbest[0][0] = dataclasses.replace(nbest[0][0], score=math.nan)
        return nbest

    monkeypatch.setattr(export.parity, "decode", decode)
    with pytest.raises(ParityError, match="non-finite values in hypothesis scores"):
        gate(model, onnx_model)


@pytest.mark.parametrize("sources", [[], [[], []]], ids=["none", "all-empty"])
def test_no_sentences_is_an_error(exported_tiny, sources):
    model, onnx_model = exported_tiny
    with pytest.raises(ParityInputError, match=NO_SENTENCES):
        gate(model, onnx_model, sources)


@pytest.mark.parametrize("beam_sentences", [0, -1])
def test_the_beam_check_cannot_be_skipped(exported_tiny, beam_sentences):
    model, onnx_model = exported_tiny
    with pytest.raises(
        ParityInputError, match="beam_sentences must be >= 1; the beam check cannot be skipped"
    ):
        gate(model, onnx_model, beam_sentences=beam_sentences)


def test_reference_batch_size_is_passed_to_the_greedy_reference(exported_tiny, monkeypatch):
    import export.parity

    model, onnx_model = exported_tiny
    seen = []
    real = export.parity.translate_ids

    def translate_ids(*args, options, batch_size=64, **kwargs):
        seen.append((options.beam_size, batch_size))
        return real(*args, options=options, batch_size=batch_size, **kwargs)

    monkeypatch.setattr(export.parity, "translate_ids", translate_ids)
    gate(model, onnx_model, reference_batch_size=1)
    assert (1, 1) in seen


# -- the CLI ------------------------------------------------------------------------


def test_cli_refuses_zero_beam_sentences(tmp_path, checkpoint, capsys):
    out = tmp_path / "m" / "1"
    assert main(cli_args(checkpoint, out, "--beam-sentences", "0")) == 2
    assert "--beam-sentences must be >= 1" in one_error_line(capsys)
    assert not out.exists()


def test_cli_refuses_a_blank_parity_file(tmp_path, checkpoint, capsys):
    blank = tmp_path / "blank.en"
    blank.write_text("\n  \n\t\n")
    out = tmp_path / "m" / "1"
    args = [str(checkpoint), "--out", str(out), "--parity-src", str(blank)]
    assert main(args) == 2
    assert NO_SENTENCES in one_error_line(capsys)
    assert not out.exists() and not list(tmp_path.glob("m/.export-*"))
