""":class:`service.runtime.OnnxModel` thread settings: small batches run on a
single-threaded twin session, large ones on the multi-threaded one, with identical
numbers either way."""

from __future__ import annotations

import numpy as np
import pytest

from service.bundle import load_bundle
from service.sessions import RuntimeConfig


def test_single_threaded_config_has_one_session_per_graph(tiny_bundle):
    model = load_bundle(tiny_bundle.bundle_dir, RuntimeConfig(("cpu",), intra_op_threads=1)).model
    assert model.parallel_rows == 0
    assert model._decoder_1 is model.decoder and model._encoder_1 is model.encoder


def test_parallel_rows_validation():
    with pytest.raises(ValueError, match="parallel_rows"):
        RuntimeConfig(("cpu",), parallel_rows=-1)


@pytest.mark.parametrize("name", ["intra_op_threads", "inter_op_threads"])
def test_more_threads_than_cpus_are_refused(name, monkeypatch):
    """100,000 intra-op threads started threads until the machine refused new processes
    (every session of every model starts its own pool)."""
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    RuntimeConfig(("cpu",), **{name: 4}).check_threads()
    flag = "--" + name.replace("_", "-")
    with pytest.raises(ValueError, match=f"{flag} 5 exceeds this machine's 4 CPUs: use at most"):
        RuntimeConfig(("cpu",), **{name: 5}).check_threads()
    with pytest.raises(ValueError, match="thread counts must be >= 0"):
        RuntimeConfig(("cpu",), **{name: -1})


@pytest.mark.parametrize("rows", [1, 2, 3, 7])
def test_small_and_large_batches_give_identical_numbers(tiny_bundle, rows, monkeypatch):
    one = load_bundle(tiny_bundle.bundle_dir, RuntimeConfig(("cpu",), intra_op_threads=1)).model
    two = load_bundle(
        tiny_bundle.bundle_dir, RuntimeConfig(("cpu",), intra_op_threads=2, parallel_rows=3)
    ).model
    assert two.parallel_rows == 3 and two._decoder_1 is not two.decoder
    used = []
    for name in ("encoder", "_encoder_1", "decoder", "_decoder_1"):
        session = getattr(two, name)
        run = session.run

        def spy(*args, _run=run, _name=name, **kwargs):
            used.append(_name)
            return _run(*args, **kwargs)

        monkeypatch.setattr(session, "run", spy)
    rng = np.random.default_rng(rows)
    lengths = rng.integers(1, 9, rows).astype(np.int64)
    ids = np.zeros((rows, int(lengths.max())), dtype=np.int64)
    for r, n in enumerate(lengths):
        ids[r, :n] = rng.integers(4, 100, n)
    enc_one, enc_two = one.encode(ids, lengths), two.encode(ids, lengths)
    for a, b in zip(
        (enc_one.memory, enc_one.keys, *enc_one.states),
        (enc_two.memory, enc_two.keys, *enc_two.states),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    index = np.arange(rows, dtype=np.int64)
    kwargs = dict(
        prev_tokens=rng.integers(4, 100, rows).astype(np.int64),
        parent_rows=index,
        row_sentence=index,
        memory=enc_one.memory,
        keys=enc_one.keys,
        mask=enc_one.mask,
        states=enc_one.states,
        top_k=5,
    )
    a, b = one.step(**kwargs), two.step(**kwargs)
    for x, y in zip(
        (a.topk_values, a.topk_ids, a.eos_values, a.attention, *a.states),
        (b.topk_values, b.topk_ids, b.eos_values, b.attention, *b.states),
        strict=True,
    ):
        np.testing.assert_array_equal(x, y)
    assert two.stats.decoder_rows == rows and two.stats.decoder_calls == 1
    assert used == (["encoder", "decoder"] if rows >= 3 else ["_encoder_1", "_decoder_1"])
