"""service/limits.py: the engine's admission settings and live rows, left to the device
by default."""

from __future__ import annotations

import pytest

from service.limits import ADMISSION, LIVE_ROWS, EngineConfig

FIELDS = ("encode_batch_sentences", "encode_max_padding", "admit_batch")


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu"])
def test_unset_admission_settings_take_the_devices_defaults(gpu):
    config = EngineConfig().for_device(gpu)
    assert {name: getattr(config, name) for name in FIELDS} == ADMISSION[gpu]
    assert config.max_live_rows == LIVE_ROWS[gpu]
    assert config.max_queue == EngineConfig().max_queue  # nothing else changes


def test_the_gpu_decodes_more_rows_a_step_and_a_given_count_is_kept():
    assert LIVE_ROWS[True] > LIVE_ROWS[False] >= EngineConfig().max_beam_size
    for gpu in (False, True):
        assert EngineConfig(max_live_rows=40).for_device(gpu).max_live_rows == 40
    # the largest beam allowed always fits, whatever the device's default
    assert EngineConfig(max_beam_size=300).for_device(False).max_live_rows == 300


def test_bad_live_rows_are_refused():
    with pytest.raises(ValueError, match=r"max_live_rows must be >= 0 \(0: auto\), got -1"):
        EngineConfig(max_live_rows=-1)
    with pytest.raises(ValueError, match="max_beam_size cannot exceed max_live_rows"):
        EngineConfig(max_live_rows=8, max_beam_size=9)


def test_the_gpu_admits_more_at_once_than_the_cpu():
    # on a GPU an encoder call costs about the same whatever its batch (launch-bound)
    for name in FIELDS:
        assert ADMISSION[True][name] > ADMISSION[False][name]


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu"])
def test_settings_given_are_kept_on_either_device(gpu):
    config = EngineConfig(encode_batch_sentences=2, encode_max_padding=0, admit_batch=1)
    resolved = config.for_device(gpu)
    assert (resolved.encode_batch_sentences, resolved.encode_max_padding) == (2, 0)
    assert resolved.admit_batch == 1


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("encode_batch_sentences", 0, "encode_batch_sentences must be >= 1, got 0"),
        ("admit_batch", 0, "admit_batch must be >= 1, got 0"),
        ("encode_max_padding", -1, "encode_max_padding must be >= 0, got -1"),
    ],
)
def test_bad_admission_settings_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(**{field: value})


def test_an_engine_on_the_cpu_admits_with_the_cpu_defaults(server_factory):
    from tests.service.server_fixtures import TINY_MODEL

    server = server_factory()
    engine = server.engines[TINY_MODEL]
    assert {name: getattr(engine.config, name) for name in FIELDS} == ADMISSION[False]
    assert engine.config.max_live_rows == LIVE_ROWS[False]


def test_a_request_without_max_length_gets_256_or_the_servers_limit():
    """One rule for the server and the --bundle CLIs (service.offline)."""
    from service.limits import DEFAULT_MAX_LENGTH, EngineConfig

    assert EngineConfig().default_max_length == DEFAULT_MAX_LENGTH == 256
    assert EngineConfig(max_target_length=100).default_max_length == 100
    assert EngineConfig(max_target_length=3000).default_max_length == 256
