"""``nmt-export`` (export.cli.main): a bundle on success, one error line and nothing
written on failure."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

import export.cli
import export.parity
import export.writer
from export import spec
from export.cli import main
from export.parity import ParityError, ParityReport
from models.checkpoint import load_checkpoint
from models.options import DecodeOptions
from tests.export.helpers import SAMPLE, cli_args, one_error_line

BUNDLE_FILES = {
    spec.ENCODER_FILE,
    spec.DECODER_FILE,
    spec.SRC_SPM_FILE,
    spec.TGT_SPM_FILE,
    spec.MANIFEST_FILE,
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(parent: Path) -> list[str]:
    return [p.name for p in parent.glob(".export-*")] if parent.exists() else []


# -- success ------------------------------------------------------------------------


def test_export_writes_a_complete_bundle(exported, checkpoint):
    out, code, stdout, stderr = exported
    assert code == 0, stderr
    assert stderr == ""
    assert stdout.startswith(
        f"wrote {out}: greedy identical on 20 sentences, beam 5 identical on 5"
    )
    assert {p.name for p in out.iterdir()} == BUNDLE_FILES
    assert leftovers(out.parent) == []


def test_manifest_hashes_match_the_files(bundle_dir):
    manifest = json.loads((bundle_dir / spec.MANIFEST_FILE).read_text())
    files = manifest["files"]
    assert set(files) == BUNDLE_FILES - {spec.MANIFEST_FILE}
    for name, digest in files.items():
        assert digest == sha256(bundle_dir / name), name


def test_manifest_contents(bundle_dir, checkpoint):
    manifest = json.loads((bundle_dir / spec.MANIFEST_FILE).read_text())
    ckpt = load_checkpoint(checkpoint)
    cfg = ckpt.config
    assert manifest["format"] == spec.BUNDLE_FORMAT
    assert manifest["opset"] == spec.OPSET
    assert manifest["name"] == "en-es" and manifest["version"] == "1"
    assert manifest["precision"] == "fp32"
    assert manifest["model_config"] == cfg.to_dict()
    assert manifest["state_names"] == list(cfg.state_names) == ["hidden", "cell", "feed"]
    assert manifest["src_vocab_size"] == cfg.src_vocab_size == ckpt.src_tokenizer.vocab_size
    assert manifest["tgt_vocab_size"] == cfg.tgt_vocab_size == ckpt.tgt_tokenizer.vocab_size
    assert manifest["special_ids"] == {"pad": 0, "unk": 1, "bos": 2, "eos": 3}
    assert manifest["parameters"] == ckpt.model.parameter_count()
    assert manifest["checkpoint"]["file"] == "model.pt"
    assert manifest["checkpoint"]["sha256"] == sha256(checkpoint)
    assert manifest["checkpoint"]["meta"] == {"step": 0}, "training history is left out"
    assert set(manifest["versions"]) >= {"torch", "onnx", "onnxruntime", "numpy"}

    p = manifest["parity"]
    assert p["source"] == str(SAMPLE / "sample.en")
    assert p["greedy_sentences"] == 20 and p["greedy_mismatches"] == 0
    assert p["beam_sentences"] == 5 and p["beam_mismatches"] == 0 and p["beam_size"] == 5
    assert 0 <= p["max_log_prob_diff"] <= 1e-4
    assert 0 <= p["max_attention_diff"] <= 1e-5
    assert "failures" not in p

    names = cfg.state_names
    graphs = manifest["graphs"]
    enc_in = [i["name"] for i in graphs["encoder"]["inputs"]]
    enc_out = [o["name"] for o in graphs["encoder"]["outputs"]]
    dec_in = [i["name"] for i in graphs["decoder"]["inputs"]]
    dec_out = [o["name"] for o in graphs["decoder"]["outputs"]]
    assert enc_in == spec.encoder_inputs()
    assert enc_out == spec.encoder_outputs(names)
    # top_k is appended after tracing, so the decoder's input *order* differs from the
    # spec list; ONNX Runtime feeds by name.
    assert sorted(dec_in) == sorted(spec.decoder_inputs(names))
    assert dec_out == spec.decoder_outputs(names)
    dtypes = {i["name"]: i["dtype"] for i in graphs["decoder"]["inputs"]}
    assert dtypes[spec.TOP_K] == dtypes[spec.PREV_TOKENS] == "int64"
    assert dtypes[spec.SRC_MASK] == "bool" and dtypes[spec.MEMORY] == "float32"
    axes = {"batch", "src_len", "sentences", "rows", "prev_rows", "k"}
    for values in (*graphs["encoder"].values(), *graphs["decoder"].values()):
        for value in values:  # a size, or a dynamic axis we declared: no tracer names
            assert all(isinstance(d, int) or d in axes for d in value["shape"]), value
    assert {o["name"]: o["shape"] for o in graphs["decoder"]["outputs"]}[spec.TOPK_IDS] == [
        "rows",
        "k",
    ]


def test_export_into_an_existing_empty_dir_needs_no_force(tmp_path, checkpoint, monkeypatch):
    monkeypatch.setattr(export.parity, "run_gate", lambda *a, **k: ParityReport())
    out = tmp_path / "m" / "1"
    out.mkdir(parents=True)
    assert main(cli_args(checkpoint, out)) == 0
    assert {p.name for p in out.iterdir()} == BUNDLE_FILES


# -- errors -------------------------------------------------------------------------


def test_not_our_checkpoint(tmp_path, capsys):
    path = tmp_path / "other.pt"
    torch.save({"a": 1}, path)
    out = tmp_path / "out" / "1"
    assert main(cli_args(path, out)) == 2
    assert "not an rnn-nmt checkpoint" in one_error_line(capsys)
    assert not out.exists() and leftovers(out.parent) == []


def test_random_bytes_checkpoint(tmp_path, capsys):
    path = tmp_path / "junk.pt"
    path.write_bytes(bytes(range(256)) * 8)
    out = tmp_path / "out" / "1"
    assert main(cli_args(path, out)) == 2
    assert "is not a readable PyTorch checkpoint" in one_error_line(capsys)
    assert not out.exists()


def test_missing_checkpoint(tmp_path, capsys):
    out = tmp_path / "out" / "1"
    assert main(cli_args(tmp_path / "nope.pt", out)) == 2
    assert "checkpoint not found" in one_error_line(capsys)
    assert not out.exists()


def _mismatched_checkpoint(tmp_path: Path, checkpoint: Path) -> Path:
    payload = torch.load(checkpoint, weights_only=True)
    payload["config"]["decoder_hidden"] = 24
    path = tmp_path / "mismatch.pt"
    torch.save(payload, path)
    return path


def test_checkpoint_whose_weights_do_not_match_its_config(tmp_path, checkpoint, capsys):
    path = _mismatched_checkpoint(tmp_path, checkpoint)
    assert main(cli_args(path, tmp_path / "out" / "1")) == 2
    err = capsys.readouterr().err
    assert err.startswith("nmt-export: error:") and "weights do not match its config" in err
    assert not (tmp_path / "out").exists()


def test_checkpoint_whose_weights_do_not_match_its_config_one_line(tmp_path, checkpoint, capsys):
    path = _mismatched_checkpoint(tmp_path, checkpoint)
    assert main(cli_args(path, tmp_path / "out" / "1")) == 2
    one_error_line(capsys)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_checkpoint_of_a_diverged_training_names_its_bad_weights(
    tmp_path, checkpoint, capsys, value
):
    """It failed in the parity gate, after tracing, with "non-finite values in the
    logits" and no word of which weights."""
    payload = torch.load(checkpoint, weights_only=True)
    weights = payload["state_dict"]
    name = next(k for k, v in weights.items() if k.startswith("decoder") and v.dim() == 2)
    weights[name][0, :3] = value
    path = tmp_path / "diverged.pt"
    torch.save(payload, path)
    assert main(cli_args(path, tmp_path / "out" / "1")) == 2
    err = one_error_line(capsys)
    assert f"the model's weights hold NaN or inf: {name} (3 of " in err
    assert "convert an earlier one" in err
    assert not (tmp_path / "out").exists()


def test_missing_parity_source(tmp_path, checkpoint, capsys):
    out = tmp_path / "out" / "1"
    args = [str(checkpoint), "--out", str(out), "--parity-src", str(tmp_path / "none.en")]
    assert main(args) == 2
    assert "parity source file not found" in one_error_line(capsys)
    assert not out.exists() and leftovers(out.parent) == []


def test_existing_output_needs_force(tmp_path, checkpoint, capsys):
    out = tmp_path / "repo" / "en-es" / "1"
    out.mkdir(parents=True)
    (out / "old.txt").write_text("previous version")
    assert main(cli_args(checkpoint, out)) == 2
    assert "pass --force" in one_error_line(capsys)
    assert (out / "old.txt").read_text() == "previous version"

    assert main(cli_args(checkpoint, out, "--force")) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.startswith("wrote ")
    assert {p.name for p in out.iterdir()} == BUNDLE_FILES
    assert leftovers(out.parent) == []


def test_output_that_is_a_file_needs_force(tmp_path, checkpoint, capsys):
    out = tmp_path / "bundle"
    out.write_text("not a directory")
    assert main(cli_args(checkpoint, out)) == 2
    assert "pass --force" in one_error_line(capsys)


@pytest.mark.parametrize("where", ["under-a-file", "read-only"])
def test_an_output_that_cannot_be_written_is_one_line_before_any_work(
    tmp_path, checkpoint, capsys, monkeypatch, where
):
    """It used to fail after the gate, with a traceback (helper-79's audit)."""
    monkeypatch.setattr(export.parity, "run_gate", _not_reached)
    if where == "under-a-file":
        (tmp_path / "test.en").write_text("a file")
        out, message = tmp_path / "test.en" / "1", "test.en is a file, not a directory"
    else:  # as root every directory is writable: the check asks os.access, told no
        locked = tmp_path / "locked"
        locked.mkdir()
        monkeypatch.setattr(export.writer.os, "access", lambda path, mode: Path(path) != locked)
        out, message = locked / "m" / "1", "locked is not writable"
    assert main(cli_args(checkpoint, out)) == 2
    assert message in one_error_line(capsys)


def test_a_bundle_outside_the_serving_layout_gets_a_note(tmp_path, checkpoint, capsys, monkeypatch):
    monkeypatch.setattr(export.parity, "run_gate", lambda *a, **k: ParityReport())
    assert main(cli_args(checkpoint, tmp_path / "models" / "latest")) == 0
    err = capsys.readouterr().err
    assert "nmt-serve serves <repository>/<name>/<version>/ with a whole-number version" in err
    assert "not 'latest'" in err and len(err.splitlines()) == 1
    assert main(cli_args(checkpoint, tmp_path / "repo" / "m" / "1")) == 0
    assert capsys.readouterr().err == ""


def _not_reached(*args, **kwargs):
    raise AssertionError("the gate ran before the output was checked")


def test_force_replaces_an_output_file(tmp_path, checkpoint, monkeypatch):
    monkeypatch.setattr(export.parity, "run_gate", lambda *a, **k: ParityReport())
    out = tmp_path / "bundle"
    out.write_text("not a directory")
    assert main(cli_args(checkpoint, out, "--force")) == 0
    assert {p.name for p in out.iterdir()} == BUNDLE_FILES


def _failing_gate(*args, **kwargs):
    raise ParityError("log-probs differ by 1.00e-02 > 1e-04")


def _onnx_runtime_fails(*args, **kwargs):
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail

    raise Fail(
        "[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running MatMul "
        "node. Name:'MatMul_592' Status Message: matmul_helper.h:164 Compute MatMul "
        "dimension mismatch\nmore lines"
    )


def test_graphs_onnx_runtime_cannot_run_fail_the_gate_in_one_line(
    tmp_path, checkpoint, capsys, monkeypatch
):
    """torch ran the modules but ONNX Runtime cannot run the traced graphs (an exporter
    quirk): one line saying so, not ONNX Runtime's traceback."""
    monkeypatch.setattr(export.parity, "run_gate", _onnx_runtime_fails)
    out = tmp_path / "repo" / "en-es" / "1"
    assert main(cli_args(checkpoint, out)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gate failed, nothing written: ONNX Runtime cannot run" in err[0]
    assert "MatMul dimension mismatch" in err[0] and "more lines" not in err[0]
    assert not out.exists()


def test_failing_parity_gate_writes_nothing(tmp_path, checkpoint, capsys, monkeypatch):
    monkeypatch.setattr(export.parity, "run_gate", _failing_gate)
    out = tmp_path / "repo" / "en-es" / "1"
    assert main(cli_args(checkpoint, out)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nmt-export: ")
    assert "gate failed, nothing written" in err[0] and "log-probs differ" in err[0]
    assert not out.exists()
    assert leftovers(out.parent) == []


def test_failing_parity_gate_keeps_the_previous_bundle(tmp_path, checkpoint, monkeypatch):
    monkeypatch.setattr(export.parity, "run_gate", _failing_gate)
    out = tmp_path / "repo" / "en-es" / "1"
    out.mkdir(parents=True)
    (out / "manifest.json").write_text("{}")
    assert main(cli_args(checkpoint, out, "--force")) == 1
    assert [p.name for p in out.iterdir()] == ["manifest.json"]
    assert (out / "manifest.json").read_text() == "{}"
    assert leftovers(out.parent) == []


def test_random_parity_sources_without_data(tmp_path, checkpoint, monkeypatch):
    """Without --parity-src and no test.en beside the checkpoint the gate gets random ids."""
    seen = {}

    def fake_gate(model, onnx_model, sources, **kwargs):
        seen["sources"], seen["kwargs"] = sources, kwargs
        return ParityReport()

    monkeypatch.setattr(export.parity, "run_gate", fake_gate)
    out = tmp_path / "m" / "1"
    assert main([str(checkpoint), "--out", str(out), "--parity-limit", "7"]) == 0
    vocab = load_checkpoint(checkpoint).config.src_vocab_size
    assert len(seen["sources"]) == 7
    assert all(len(s) >= 1 and all(4 <= t < vocab for t in s) for s in seen["sources"])
    assert seen["kwargs"]["beam_sentences"] == 200
    manifest = json.loads((out / spec.MANIFEST_FILE).read_text())
    assert manifest["parity"]["source"] == "random"


# -- reduced-precision variants --------------------------------------------------------


@pytest.mark.parametrize(
    ("precision", "weight_type"),
    [("int8", onnx.TensorProto.INT8), ("fp16", onnx.TensorProto.FLOAT16)],
)
def test_variant_bundle(tmp_path, checkpoint, capsys, precision, weight_type):
    """A variant is gated on BLEU against fp32 (side by side), stores its weights in the
    reduced type, keeps fp32 graph I/O and serves like any bundle."""
    import onnxruntime as ort

    from service.bundle import load_bundle
    from service.loop import decode
    from service.sessions import RuntimeConfig

    # The fp16 gate runs on CUDA where this ONNX Runtime has it, int8 always on the CPU.
    cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    provider = "CUDAExecutionProvider" if precision == "fp16" and cuda else "CPUExecutionProvider"
    out = tmp_path / "m" / "2"
    assert main(cli_args(checkpoint, out, f"--{precision}")) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"{precision}: BLEU ")
    assert printed[0].endswith(f"the fp32 speed on {provider}")
    manifest = json.loads((out / spec.MANIFEST_FILE).read_text())
    assert manifest["precision"] == precision
    v = manifest["variant"]
    assert v["precision"] == precision and v["sentences"] == 20
    assert v["provider"] == provider
    assert v["bleu_delta"] == pytest.approx(v["bleu_variant"] - v["bleu_fp32"], abs=0.011)
    assert v["speedup"] > 0
    decoder = onnx.load(str(out / spec.DECODER_FILE))
    assert any(t.data_type == weight_type for t in decoder.graph.initializer)
    memory = next(i for i in manifest["graphs"]["decoder"]["inputs"] if i["name"] == spec.MEMORY)
    assert memory["dtype"] == "float32"
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",)))
    (nbest,) = decode(bundle.model, [[5, 6, 7]], options=DecodeOptions(), special=bundle.special)
    assert nbest[0].tokens and np.isfinite(nbest[0].score)
    assert leftovers(out.parent) == []


def test_int8_and_fp16_together_is_an_error(tmp_path, checkpoint, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(cli_args(checkpoint, tmp_path / "m" / "2", "--int8", "--fp16"))
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert not (tmp_path / "m" / "2").exists()


def test_bundle_is_readable_by_other_users(bundle_dir):
    """The staging directory is renamed into place: it must not keep mkdtemp's 0700, or a
    server running as another user (the Docker image's uid 10001) cannot read the bundle."""
    import os
    import stat

    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(bundle_dir.stat().st_mode) == 0o777 & ~umask
    if not umask & 0o004:
        for f in bundle_dir.iterdir():
            assert f.stat().st_mode & stat.S_IROTH, f


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--from-module", "m:f", "--out", "o/1"], "nmt-export: error: unrecognized arguments: "
         "--from-module (did you mean --from-modules?)"),
        (["ckpt.pt", "--out", "o/1", "--parity-sr", "x"], "unrecognized arguments: --parity-sr "
         "(did you mean --parity-src?) x"),
    ],
)  # fmt: skip
def test_an_abbreviated_or_misspelt_option_is_refused_with_the_nearest(argv, message, capsys):
    """argparse took ``--from-module`` for ``--from-modules`` silently (helper-79's audit)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_misspelt_converter_option_names_its_converter(capsys):
    from export.convert import main as convert

    with pytest.raises(SystemExit):
        convert(["eole", "model", "--lowercse", "--out", "o/1"])
    err = capsys.readouterr().err
    assert "nmt-convert eole: error: unrecognized arguments: --lowercse (did you mean " in err
    assert "usage: nmt-convert eole " in err
    with pytest.raises(SystemExit):
        convert(["fairseq", "ckpt.pt", "--bpe-code", "codes", "--out", "o/1"])
    assert "--bpe-code (did you mean --bpe-codes?)" in capsys.readouterr().err
