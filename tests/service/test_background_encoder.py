"""The encoder thread: decoding goes on while admitted sentences are encoded, and the
inline mode (``background_encoder=False``) gives the same answers."""

from __future__ import annotations

import threading

import grpc
import pytest

from nmt_api.nmt.v1 import translator_pb2 as pb
from tests.service.server_helpers import (
    LOOP_SENTENCE,
    TIMEOUT,
    blocked_encoder,
    proto_options,
    rpc_error,
    stub_for,
    wait_until,
)

LIMITS = {"max_live_rows": 40, "max_beam_size": 6, "max_target_length": 4000}


def _long_request(tiny_bundle) -> pb.TranslateRequest:
    """Beam 5 on a sentence whose hypotheses never end before the length limit."""
    return pb.TranslateRequest(
        texts=[tiny_bundle.sentences[LOOP_SENTENCE]] * 2,
        options=proto_options(beam=5, max_length_ratio=100.0, max_length=600),
    )


def _short_request(tiny_bundle) -> pb.TranslateRequest:
    return pb.TranslateRequest(texts=tiny_bundle.sentences[1:4], options=proto_options(beam=2))


@pytest.mark.parametrize("background", [True, False], ids=["background", "inline"])
def test_both_modes_translate_alike(server_factory, tiny_bundle, background):
    reference = server_factory(**LIMITS, background_encoder=False)
    server = server_factory(**LIMITS, background_encoder=background)
    ref_channel, ref_stub = stub_for(reference.port)
    channel, stub = stub_for(server.port)
    try:
        requests = [_short_request(tiny_bundle), _long_request(tiny_bundle)]
        want = [ref_stub.Translate(r, timeout=TIMEOUT) for r in requests]
        futures = [stub.Translate.future(r, timeout=TIMEOUT) for r in requests]
        for future, expected in zip(futures, want, strict=True):
            assert future.result().translations == expected.translations
        assert server.engines["tiny"].config.background_encoder is background
        reg = server.registry
        assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)
    finally:
        channel.close()
        ref_channel.close()


def test_decoding_goes_on_while_a_batch_is_encoded(server_factory, tiny_bundle, monkeypatch):
    server = server_factory(**LIMITS)
    reg, model = server.registry, server.engines["tiny"].bundle.model
    channel, stub = stub_for(server.port)
    try:
        long = stub.Translate.future(_long_request(tiny_bundle), timeout=TIMEOUT)
        assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") > 0, timeout=5)
        entered, release = blocked_encoder(monkeypatch, model)
        short = stub.Translate.future(_short_request(tiny_bundle), timeout=TIMEOUT)
        assert entered.wait(5), "the short request was never encoded"
        steps = reg.get_sample_value("nmt_decoder_step_rows_count")
        # The long request keeps decoding while the encoder is stuck on the short one.
        assert wait_until(
            lambda: reg.get_sample_value("nmt_decoder_step_rows_count") > steps + 20, timeout=5
        ), "no decoder step ran while the encoder was busy"
        assert not short.done()
        release.set()
        assert len(short.result().translations) == 3
        assert len(long.result().translations) == 2
        assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)
    finally:
        channel.close()


def test_the_scheduler_encodes_when_nothing_decodes(server_factory, tiny_bundle, monkeypatch):
    """With no rows decoding there is nothing for an encoder call to overlap: the
    scheduler encodes the batch itself instead of handing it to the encoder thread and
    waiting for it; while rows decode, the encoder thread does."""
    server = server_factory(**LIMITS)
    reg, model = server.registry, server.engines["tiny"].bundle.model
    threads, real = [], model.encode

    def encode(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "encode", encode)
    channel, stub = stub_for(server.port)
    try:
        assert len(stub.Translate(_short_request(tiny_bundle), timeout=TIMEOUT).translations) == 3
        assert threads and set(threads) == {"nmt-scheduler"}
        long = stub.Translate.future(_long_request(tiny_bundle), timeout=TIMEOUT)
        assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") > 0, timeout=5)
        threads.clear()
        assert len(stub.Translate(_short_request(tiny_bundle), timeout=TIMEOUT).translations) == 3
        assert not long.done(), "the long request ended: nothing decoded beside the short one"
        assert threads and set(threads) == {"nmt-encoder"}
        assert len(long.result().translations) == 2
    finally:
        channel.close()


def test_deadline_passing_during_encoding_frees_the_rows(server_factory, tiny_bundle, monkeypatch):
    server = server_factory(**LIMITS)
    reg, model = server.registry, server.engines["tiny"].bundle.model
    channel, stub = stub_for(server.port)
    try:
        entered, release = blocked_encoder(monkeypatch, model)
        late = stub.Translate.future(_long_request(tiny_bundle), timeout=0.5)
        assert entered.wait(5)
        exc = rpc_error(late.result)
        assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        release.set()
        # Its sentences reach the loop after the deadline and leave it at once.
        assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)
        assert len(stub.Translate(_short_request(tiny_bundle), timeout=TIMEOUT).translations) == 3
    finally:
        channel.close()


def test_stop_drains_a_batch_being_encoded(server_factory, tiny_bundle, monkeypatch):
    server = server_factory(**LIMITS)
    model = server.engines["tiny"].bundle.model
    channel, stub = stub_for(server.port)
    try:
        entered, release = blocked_encoder(monkeypatch, model)
        future = stub.Translate.future(_short_request(tiny_bundle), timeout=TIMEOUT)
        assert entered.wait(5)
        stopper = threading.Thread(target=server.stop, args=(5.0,))
        stopper.start()
        release.set()
        assert len(future.result().translations) == 3
        stopper.join(TIMEOUT)
        assert not stopper.is_alive()
        engine = server.engines["tiny"]
        assert not engine._thread.is_alive() and not engine._encoder_thread.is_alive()
    finally:
        channel.close()


@pytest.mark.parametrize("background", [True, False], ids=["background", "inline"])
def test_failure_joining_the_loop_fails_only_that_request(
    server_factory, tiny_bundle, monkeypatch, background
):
    server = server_factory(**LIMITS, background_encoder=background)
    engine, reg = server.engines["tiny"], server.registry
    channel, stub = stub_for(server.port)
    try:
        alone = stub.Translate(_long_request(tiny_bundle), timeout=TIMEOUT)
        long = stub.Translate.future(_long_request(tiny_bundle), timeout=TIMEOUT)
        assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") > 0, timeout=5)
        real, calls = engine._loop.add_encoded, []

        def add_encoded(*args, **kwargs):
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("injected add_encoded failure")
            return real(*args, **kwargs)

        monkeypatch.setattr(engine._loop, "add_encoded", add_encoded)
        exc = rpc_error(lambda: stub.Translate(_short_request(tiny_bundle), timeout=TIMEOUT))
        assert exc.code() == grpc.StatusCode.INTERNAL
        assert long.result().translations == alone.translations
        assert len(stub.Translate(_short_request(tiny_bundle), timeout=TIMEOUT).translations) == 3
        assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)
        assert engine._rows_reserved == 0
    finally:
        channel.close()
