"""``nmt-train`` end to end on a tiny corpus, plus the batching it relies on."""

from __future__ import annotations

import functools
import json
import math
import shutil

import pytest
import torch

from models import train as train_module
from models.batching import ParallelData, bucket_batches, make_batch, pad
from models.checkpoint import load_checkpoint, read_payload
from models.config import BOS_ID, EOS_ID, PAD_ID
from models.corpus import train_tokenizers, write_split
from models.tokenizer import Tokenizer

TINY_MODEL = [
    "--embed-dim", "16",
    "--encoder-hidden", "16",
    "--decoder-hidden", "32",
    "--attention-dim", "16",
    "--output-dim", "16",
    "--bleu-sentences", "20",
    "--no-progress",
    "--threads", "1",
]  # fmt: skip


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, sample_lines):
    """train/valid split of the committed sample with vocab-150 tokenizers."""
    en, es = sample_lines
    pairs = list(zip(en, es, strict=True))
    out = tmp_path_factory.mktemp("data")
    write_split(out, {"train": pairs[:260], "valid": pairs[260:]})
    train_tokenizers(out, vocab_size=150)
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory, data_dir):
    """A two-epoch run; returns (run_dir, exit code, stdout)."""
    run_dir = tmp_path_factory.mktemp("run")
    capture = pytest.MonkeyPatch()
    lines: list[str] = []
    capture.setattr("builtins.print", lambda *a, **k: lines.append(" ".join(map(str, a))))
    before = torch.get_num_threads()
    try:
        code = train_module.main(
            ["--data", str(data_dir), "--out", str(run_dir), "--epochs", "2", *TINY_MODEL]
        )
    finally:
        capture.undo()
        torch.set_num_threads(before)
    return run_dir, code, lines


def test_train_writes_checkpoints_and_summary(trained, data_dir) -> None:
    run_dir, code, lines = trained
    assert code == 0
    for name in ("best.pt", "last.pt", "summary.json"):
        assert (run_dir / name).is_file(), name
    assert not list(run_dir.glob("*.tmp"))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["epochs"] == 2
    assert [r["epoch"] for r in summary["history"]] == [1, 2]
    src_tok = Tokenizer.from_file(data_dir / "spm.en.model")
    tgt_tok = Tokenizer.from_file(data_dir / "spm.es.model")
    kept = ParallelData.load(data_dir, "train", src_tok, tgt_tok, max_len=64)  # default --max-len
    assert 200 < summary["train_pairs"] == len(kept) <= 260
    for record in summary["history"]:
        assert record["train_loss"] > 0 and record["valid_loss"] > 0
        assert 0.0 <= record["valid_bleu"] <= 100.0
    assert summary["history"][1]["train_loss"] < summary["history"][0]["train_loss"]
    assert lines[-1].startswith("best valid BLEU") and "after 2 epochs" in lines[-1]
    assert [json.loads(line)["epoch"] for line in lines[:2]] == [1, 2]

    ckpt = load_checkpoint(run_dir / "best.pt")
    cfg = ckpt.config
    assert (cfg.embed_dim, cfg.encoder_hidden, cfg.decoder_hidden) == (16, 16, 32)
    assert (cfg.attention_dim, cfg.output_dim) == (16, 16)
    assert cfg.src_vocab_size == cfg.tgt_vocab_size == 150
    assert summary["parameters"] == ckpt.model.parameter_count()
    assert ckpt.src_tokenizer.model_proto == src_tok.model_proto
    assert ckpt.meta["epoch"] in (1, 2)
    last = read_payload(run_dir / "last.pt")
    assert last["train_state"]["epoch"] == 2
    assert {"optimizer", "scheduler", "rng"} <= set(last)


def test_resume_continues_to_more_epochs(trained, data_dir, tmp_path) -> None:
    first_dir, _, _ = trained
    run_dir = tmp_path / "resumed"
    shutil.copytree(first_dir, run_dir)
    before = json.loads((run_dir / "summary.json").read_text())
    code = train_module.main(
        ["--data", str(data_dir), "--out", str(run_dir), "--epochs", "3", "--resume", *TINY_MODEL]
    )
    assert code == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["epochs"] == 3
    assert [r["epoch"] for r in summary["history"]] == [1, 2, 3]
    assert summary["history"][:2] == before["history"]
    assert read_payload(run_dir / "last.pt")["train_state"]["epoch"] == 3


def test_resume_with_another_config_is_refused(trained, data_dir, tmp_path, capsys) -> None:
    first_dir, _, _ = trained
    run_dir = tmp_path / "resumed"
    shutil.copytree(first_dir, run_dir)
    args = ["--data", str(data_dir), "--out", str(run_dir), "--resume", *TINY_MODEL]
    args[args.index("--embed-dim") + 1] = "24"
    assert train_module.main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("nmt-train: error: ") and "another model config" in err[0]


def test_missing_data_is_a_one_line_error(tmp_path, capsys) -> None:
    code = train_module.main(
        ["--data", str(tmp_path / "none"), "--out", str(tmp_path / "run"), *TINY_MODEL]
    )
    assert code == 2
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("nmt-train: error: ")
    assert "spm.en.model not found; run `nmt-data build` first" in err[0]
    assert not (tmp_path / "run").exists()


def test_bad_model_config_is_a_one_line_error(data_dir, tmp_path, capsys) -> None:
    args = ["--data", str(data_dir), "--out", str(tmp_path / "run"), *TINY_MODEL]
    args += ["--attention", "dot"]  # decoder_hidden 32 == 2 x 16: valid
    args += ["--no-bidirectional"]  # now the memory is 16 wide: invalid for dot
    assert train_module.main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "dot attention needs decoder_hidden" in err[0]


def test_coverage_loss_needs_a_coverage_model(data_dir, tmp_path, capsys) -> None:
    args = ["--data", str(data_dir), "--out", str(tmp_path / "run"), *TINY_MODEL]
    assert train_module.main([*args, "--coverage-loss", "0.5"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert "coverage_loss=0.5 needs a coverage model: add --coverage" in err[0]
    with pytest.raises(train_module.ConfigError, match="coverage_loss must be >= 0, got -1"):
        train_module.TrainConfig(coverage_loss=-1.0)


@pytest.mark.parametrize("flag", ["--coverage", "--attention-coverage"])
def test_coverage_model_trains_with_the_coverage_loss(data_dir, tmp_path, flag) -> None:
    run_dir = tmp_path / "run"
    args = ["--data", str(data_dir), "--out", str(run_dir), "--epochs", "1", *TINY_MODEL]
    assert train_module.main([*args, flag, "--coverage-loss", "1.0"]) == 0
    checkpoint = load_checkpoint(run_dir / "best.pt")
    assert checkpoint.config.coverage
    assert checkpoint.config.state_names == ("hidden", "coverage")


def test_coverage_loss_sums_min_of_attention_and_coverage_so_far() -> None:
    # one sentence, three steps over two source positions; the last step is padding
    attention = torch.tensor([[[0.75, 0.25], [0.5, 0.5], [0.0, 1.0]]])
    tgt_out = torch.tensor([[5, EOS_ID, PAD_ID]])
    # step 0: nothing covered yet (0); step 1: min(.5, .75) + min(.5, .25) = .75
    loss = train_module.coverage_loss(attention, tgt_out, PAD_ID)
    assert float(loss) == pytest.approx(0.75)


def test_select_on_chooses_by_bleu_on_named_sources(data_dir, tmp_path) -> None:
    """--select-on: the best checkpoint is the epoch with the best BLEU on the valid lines
    of the named sources (valid.origin), recorded per epoch as select_bleu."""
    data = tmp_path / "data"
    shutil.copytree(data_dir, data)
    valid = (data / "valid.en").read_text(encoding="utf-8").splitlines()
    origin = ["wordnet" if i % 3 else "ding" for i in range(len(valid))]
    (data / "valid.origin").write_text("".join(o + "\n" for o in origin), encoding="utf-8")
    run_dir = tmp_path / "run"
    args = ["--data", str(data), "--out", str(run_dir), "--epochs", "3", *TINY_MODEL]
    assert train_module.main([*args, "--select-on", "ding", "--patience", "5"]) == 0
    history = json.loads((run_dir / "summary.json").read_text())["history"]
    assert all(0.0 <= r["select_bleu"] <= 100.0 for r in history)
    best = max(history, key=lambda r: r["select_bleu"])  # first maximum, as the trainer
    assert load_checkpoint(run_dir / "best.pt").meta["epoch"] == best["epoch"]
    lines = train_module.selection_lines(data, "ding", len(valid))
    assert lines == [i for i in range(len(valid)) if i % 3 == 0]
    assert train_module.selection_lines(data, " , ", len(valid)) is None


def test_select_on_errors(data_dir, tmp_path) -> None:
    with pytest.raises(train_module.CheckpointError, match="--select-on needs .*valid.origin"):
        train_module.selection_lines(data_dir, "ding", 40)
    (tmp_path / "valid.origin").write_text("ding\nwordnet\n", encoding="utf-8")
    with pytest.raises(train_module.CheckpointError, match="has 2 lines, valid.en has 3"):
        train_module.selection_lines(tmp_path, "ding", 3)
    with pytest.raises(train_module.CheckpointError, match="--select-on fortunes: no valid line"):
        train_module.selection_lines(tmp_path, "ding,fortunes", 2)


def _run(data_dir, run_dir, *extra) -> dict:
    """nmt-train with TINY_MODEL and ``extra`` flags; returns its summary.json."""
    argv = ["--data", str(data_dir), "--out", str(run_dir), *TINY_MODEL, *extra]
    assert train_module.main(argv) == 0
    return json.loads((run_dir / "summary.json").read_text())


def test_budget_schedule_stops_mid_epoch_annealed(data_dir, tmp_path, monkeypatch) -> None:
    """--lr-schedule budget: the rate falls linearly to 0 over --max-minutes and training
    stops when the budget is spent, inside the epoch, then validates and saves."""
    ticks = iter(range(0, 10**6, 4))  # a clock that advances 4 s per reading
    clocked = functools.partial(train_module.train, clock=lambda: float(next(ticks)))
    monkeypatch.setattr(train_module, "train", clocked)
    budget = ("--max-minutes", "1", "--lr-schedule", "budget")
    summary = _run(data_dir, tmp_path / "run", "--epochs", "3", "--max-tokens", "100", *budget)
    (record,) = summary["history"]
    assert 0 < record["pairs"] < summary["train_pairs"]
    assert 0.0 < record["lr"] < train_module.TrainConfig.lr / 2
    assert load_checkpoint(tmp_path / "run" / "best.pt").meta["epoch"] == 1


def test_plateau_schedule_keeps_the_rate_within_an_epoch(data_dir, tmp_path) -> None:
    summary = _run(data_dir, tmp_path / "run", "--epochs", "1", "--max-tokens", "100")
    (record,) = summary["history"]
    assert record["lr"] == train_module.TrainConfig.lr
    assert record["pairs"] == summary["train_pairs"]


def test_bf16_training_saves_a_float32_checkpoint(data_dir, tmp_path, monkeypatch) -> None:
    # On a CPU without bf16 kernels nmt-train refuses bf16 (next test); correctness of the
    # autocast path does not depend on speed, so run it here whatever the CPU.
    monkeypatch.setattr(train_module, "cpu_has_bf16", lambda: True)
    summary = _run(data_dir, tmp_path / "run", "--epochs", "1", "--precision", "bf16")
    (record,) = summary["history"]
    assert math.isfinite(record["train_loss"]) and math.isfinite(record["valid_loss"])
    payload = read_payload(tmp_path / "run" / "best.pt")
    dtypes = {t.dtype for t in payload["state_dict"].values() if t.is_floating_point()}
    assert dtypes == {torch.float32}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--lr-schedule", "cosine"], "lr_schedule must be one of plateau, budget, got 'cosine'"),
        (["--lr-schedule", "budget"], "lr_schedule 'budget' decays over max_minutes: set"),
        (["--max-minutes", "-1"], "max_minutes must be >= 0, got -1.0"),
        (["--max-minutes", "nan"], "max_minutes must be >= 0, got nan"),
        (["--precision", "fp16"], "precision must be one of fp32, bf16, got 'fp16'"),
    ],
)
def test_schedule_and_precision_errors_are_one_line(data_dir, tmp_path, capsys, extra, message):
    args = ["--data", str(data_dir), "--out", str(tmp_path / "run"), *TINY_MODEL, *extra]
    assert train_module.main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and message in err[0]


def test_bf16_is_refused_on_a_cpu_without_bf16_kernels(data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(train_module, "cpu_has_bf16", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    args = ["--data", str(data_dir), "--out", str(tmp_path / "run"), *TINY_MODEL]
    assert train_module.main([*args, "--precision", "bf16"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert "no bfloat16 kernels for this CPU" in err[0] and "use --precision fp32" in err[0]
    assert not (tmp_path / "run" / "best.pt").exists()


# ---------------------------------------------------------------- batching


def test_pad_and_make_batch(data_dir) -> None:
    assert pad([[5, 6, 7], [8]]).tolist() == [[5, 6, 7], [8, PAD_ID, PAD_ID]]
    data = ParallelData(
        src_text=["a", "b"], tgt_text=["c", "d"], src_ids=[[4, 5, 6], [7]], tgt_ids=[[8], [9, 10]]
    )
    batch = make_batch(data, [1, 0])
    assert batch.src.tolist() == [[7, PAD_ID, PAD_ID], [4, 5, 6]]
    assert batch.lengths.tolist() == [1, 3]
    assert batch.tgt_in.tolist() == [[BOS_ID, 9, 10], [BOS_ID, 8, PAD_ID]]
    assert batch.tgt_out.tolist() == [[9, 10, EOS_ID], [8, EOS_ID, PAD_ID]]
    assert batch.target_tokens == 5
    assert batch.index == [1, 0]


def test_bucket_batches_cover_every_pair_once(data_dir) -> None:
    src_tok = Tokenizer.from_file(data_dir / "spm.en.model")
    tgt_tok = Tokenizer.from_file(data_dir / "spm.es.model")
    data = ParallelData.load(data_dir, "train", src_tok, tgt_tok)
    assert len(data) == 260
    short = ParallelData.load(data_dir, "train", src_tok, tgt_tok, max_len=20)
    assert 0 < len(short) < 260
    assert all(max(len(s), len(t)) < 20 for s, t in zip(short.src_ids, short.tgt_ids, strict=True))
    for shuffle in (False, True):
        batches = list(bucket_batches(data, max_tokens=400, shuffle=shuffle, seed=3))
        seen = sorted(i for b in batches for i in b.index)
        assert seen == list(range(260))
        for b in batches:
            assert b.src.numel() <= 400 and b.tgt_out.numel() <= 400
            assert b.lengths.tolist() == [len(data.src_ids[i]) for i in b.index]
    again = [b.index for b in bucket_batches(data, max_tokens=400, shuffle=True, seed=3)]
    assert again == [b.index for b in bucket_batches(data, max_tokens=400, shuffle=True, seed=3)]
