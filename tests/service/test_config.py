"""nmt-serve's flags are derived from the config dataclasses once: defaults, NMT_
variables, --help and the README's configuration table agree."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from service.calls import RpcConfig
from service.config import SECTIONS, ServerConfig, TransportConfig
from service.flags import FLAGS, build_parser, parse_args
from service.limits import EngineConfig

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_flags() -> set[str]:
    text = README.read_text()
    section = text.split("## Configuration (`nmt-serve --help`)", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `--")]
    return {flag for row in rows for flag in re.findall(r"`(--[a-z-]+)`", row.split("|")[1])}


def test_readme_table_lists_exactly_the_flags():
    assert _readme_flags() == {flag.option for flag in FLAGS}


def test_every_flag_sets_a_real_field_once():
    targets = [(f.section, f.name) for f in FLAGS]
    assert len(targets) == len(set(targets))
    for section, name in targets:
        assert name in {f.name for f in dataclasses.fields(SECTIONS[section])}


def test_no_flags_give_the_dataclass_defaults():
    assert parse_args([], environ={}) == ServerConfig()


def test_help_shows_each_default_and_variable():
    text = " ".join(build_parser({}).format_help().split())
    for flag in FLAGS:
        assert flag.variable in text, flag.option
    assert "(default: 50051; NMT_PORT)" in text
    assert "(default: 120; NMT_MAX_INFLIGHT)" in text
    assert "(default: on; NMT_ENCODER_THREAD)" in text
    assert "(default: cuda,cpu; NMT_PROVIDERS)" in text


def test_variables_override_defaults_and_flags_override_variables():
    env = {"NMT_MAX_LIVE_ROWS": "64", "NMT_LOG_FORMAT": "json", "NMT_ACCESS_LOG": "yes"}
    config = parse_args([], environ=env)
    assert config.engine.max_live_rows == 64
    assert config.log.format == "json" and config.log.access_log is True
    assert parse_args(["--max-live-rows", "32"], environ=env).engine.max_live_rows == 32
    assert parse_args(["--providers", "cpu"], environ={}).runtime.providers == ("cpu",)
    assert parse_args(["--tls-client-ca", ""], environ={}).tls_client_ca is None


def test_admission_settings_are_the_devices_unless_given():
    """auto (the default) leaves each admission setting to the device (limits.ADMISSION,
    resolved by EngineConfig.for_device); a number, from a flag or NMT_*, is kept on both."""
    from service.limits import ADMISSION

    auto = parse_args([], environ={}).engine
    assert auto.encode_max_padding is auto.admit_batch is auto.encode_batch_sentences is None
    for gpu in (False, True):
        assert auto.for_device(gpu).encode_max_padding == ADMISSION[gpu]["encode_max_padding"]
    env = {"NMT_ENCODE_MAX_PADDING": "4096", "NMT_ADMIT_BATCH": "auto"}
    given = parse_args(["--encode-batch-sentences", "64"], environ=env).engine
    for gpu in (False, True):
        resolved = given.for_device(gpu)
        assert (resolved.encode_max_padding, resolved.encode_batch_sentences) == (4096, 64)
        assert resolved.admit_batch == ADMISSION[gpu]["admit_batch"]
    shown = " ".join(build_parser({}).format_help().split())
    cpu, gpu = ADMISSION[False]["admit_batch"], ADMISSION[True]["admit_batch"]
    assert f"admitted together (auto: {cpu} on a CPU, {gpu} on CUDA)" in shown


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--log-format", "xml"], "--log-format: 'xml': --log-format must be one of text, json"),
        (["--port", "x"], "--port: 'x' is not an integer"),
        (["--shutdown-grace", "nan"], "shutdown grace must be >= 0"),
        (["--engine-process", "maybe"], "--engine-process must be one of auto, on, off"),
        (["--encode-max-padding", "x"], "--encode-max-padding: 'x' is not an integer or auto"),
        (["--admit-batch", "0"], "admit_batch must be >= 1, got 0"),
        (["--encode-max-padding", "-1"], "encode_max_padding must be >= 0, got -1"),
        (["--admit-wait-steps", "-2"], "admit_wait_steps must be >= 0, got -2"),
        (["--max-message-bytes", str(2**31)], "max_message_bytes must be in 1024..2147483647"),
        (["--max-message-bytes", "99999999999"], "(gRPC's largest), got 99999999999"),
        (["--max-streams-per-connection", str(2**31)], "in 1..2147483647 (gRPC's largest)"),
    ],
)
def test_bad_values_are_one_line_errors(argv, message, capsys):
    with pytest.raises((SystemExit, ValueError)) as err:
        parse_args(argv, environ={})
    shown = str(err.value) if err.type is ValueError else capsys.readouterr().err
    assert message in shown


DURATIONS = [f.option for f in FLAGS if isinstance(f.default, float)]


def test_every_float_flag_is_a_duration_checked_here():
    assert len(DURATIONS) == 11 and {"--keepalive-time", "--http-send-timeout"} <= set(DURATIONS)


@pytest.mark.parametrize("value", ["inf", "1e30"])
@pytest.mark.parametrize("option", DURATIONS)
def test_infinite_durations_are_one_line_errors(option, value, capsys):
    """inf reached int(seconds * 1000) of the gRPC channel arguments (or time.sleep) as
    an OverflowError traceback."""
    with pytest.raises(SystemExit):
        parse_args([option, value], environ={})
    assert f"{option} must be a finite number of seconds, at most" in capsys.readouterr().err
    variable = "NMT_" + option[2:].replace("-", "_").upper()
    with pytest.raises(ValueError, match=f"{variable}='{value}': {option} must be a finite"):
        parse_args([], environ={variable: value})


def test_transport_durations_beyond_a_c_int_of_ms_are_refused():
    with pytest.raises(ValueError, match="keepalive_time must be at most 2147483 seconds"):
        TransportConfig(keepalive_time=float("inf"))
    with pytest.raises(ValueError, match=r"max_connection_age must be .* \(0: never\)"):
        TransportConfig(max_connection_age=1e10)
    assert (
        dict(TransportConfig(max_connection_idle=2_147_483.0).options())[
            "grpc.max_connection_idle_ms"
        ]
        == 2**31 - 1 - 647
    )


@pytest.mark.parametrize("value", [float("inf"), 1e10, float("nan"), 0.0])
@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda v: RpcConfig(default_timeout=v), "default_timeout"),
        (lambda v: RpcConfig(receive_timeout=v), "receive_timeout"),
        (lambda v: EngineConfig(stall_timeout=v), "stall_timeout"),
    ],
)
def test_durations_built_in_code_are_capped_too(make, name, value):
    least = ">= 1" if name == "stall_timeout" else "> 0"
    with pytest.raises(ValueError, match=f"{name} must be {least} and <= 2147483 seconds"):
        make(value)


@pytest.mark.parametrize(
    "argv, environ",
    [
        (["--drain-announce", "20"], {}),
        (["--drain-announce", "10"], {}),
        (["--drain-announce", "5", "--shutdown-grace", "4"], {}),
        (["--shutdown-grace", "4"], {"NMT_DRAIN_ANNOUNCE": "5"}),
        (["--drain-announce", "1"], {"NMT_SHUTDOWN_GRACE": "0"}),
    ],
)
def test_an_announce_as_long_as_the_grace_is_refused(argv, environ):
    with pytest.raises(ValueError, match="leaves no time to drain within --shutdown-grace") as e:
        parse_args(argv, environ=environ)
    assert "raise --shutdown-grace or lower --drain-announce" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_short_grace_alone_still_caps_the_default_announce():
    assert parse_args(["--shutdown-grace", "1"], environ={}).drain_announce == 2.0
    config = parse_args(["--shutdown-grace", "0", "--drain-announce", "0"], environ={})
    assert config.shutdown_grace == config.drain_announce == 0
    assert parse_args(["--drain-announce", "9"], environ={}).drain_announce == 9


@pytest.mark.parametrize(
    ("variable", "word", "on"),
    [
        ("NMT_ENCODER_THREAD", "1", True),
        ("NMT_ENCODER_THREAD", "OFF", False),
        ("NMT_ENCODER_THREAD", "No", False),
        ("NMT_ENCODER_THREAD", "TRUE", True),
        ("NMT_ENGINE_PROCESS", "Yes", "on"),
        ("NMT_IO_BINDING", "ON", "on"),
        ("NMT_CUDA_GRAPHS", "false", "off"),
        ("NMT_CHUNKED_TOPK", "AUTO", "auto"),
    ],
)
def test_switches_take_every_on_off_word_in_any_case(variable, word, on):
    """As the README says of on/off flags: 1/true/yes/on or 0/false/no/off, any case, for
    the switches written {on,off} and the modes that take on and off beside auto."""
    (flag,) = [f for f in FLAGS if f.variable == variable]
    for config in (parse_args([], environ={variable: word}), parse_args([flag.option, word], {})):
        section = getattr(config, flag.section) if flag.section else config
        assert getattr(section, flag.name) == on


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"NMT_ENCODE_BATCH_SENTENCES": "x"}, "NMT_ENCODE_BATCH_SENTENCES='x': 'x' is not an"),
        ({"NMT_LOG_LEVEL": "foo"}, "NMT_LOG_LEVEL='foo': log level 'foo' is not one of"),
        ({"NMT_SHUTDOWN_GRACE": "-3"}, "NMT_SHUTDOWN_GRACE='-3': shutdown grace must be >= 0"),
        ({"NMT_ADMIT_BATCH": "0"}, "NMT_ADMIT_BATCH='0': admit_batch must be >= 1, got 0"),
    ],
)
def test_a_bad_variable_is_named_in_its_error(environ, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_args([], environ=environ)
    flag = next(f for f in FLAGS if f.variable in environ)
    with pytest.raises((ValueError, SystemExit)):  # the same value as a flag: named by it
        parse_args([flag.option, next(iter(environ.values()))], environ={})


def test_an_empty_variable_is_unset_and_a_near_miss_is_reported():
    from service.flags import misspelt_variables

    assert parse_args([], environ={"NMT_MODEL_REPOSITORY": "", "NMT_PORT": ""}) == parse_args(
        [], environ={}
    )
    assert parse_args([], environ={"NMT_ACCESS_LOG": ""}).log.access_log is False
    # a switch that defaults to on stays on (helper-82: it was refused)
    assert parse_args([], environ={"NMT_ENCODER_THREAD": ""}).engine.background_encoder
    env = {"NMT_MAX_QUEU": "3", "NMT_SHUTDOWN_GRCE": "5", "NMT_SLO_P": "95", "NMT_PORT": "1"}
    assert misspelt_variables(env) == [
        "NMT_MAX_QUEU is not an nmt-serve variable (ignored): NMT_MAX_QUEUE?",
        "NMT_SHUTDOWN_GRCE is not an nmt-serve variable (ignored): NMT_SHUTDOWN_GRACE?",
    ]  # Locust's NMT_SLO_P is nobody's near miss
    assert misspelt_variables({}) == []
    # words added or left off; compose's and Locust's own variables never flagged
    env = {"NMT_SHUTDOWN_GRACE_SECONDS": "5", "NMT_MODEL_REPO": "/m", "NMT_SENTENCES": "f",
           "NMT_METRICS_HOST_PORT": "9464", "NMT_MODEL_REPOSITORY_DIR": "/m"}  # fmt: skip
    assert misspelt_variables(env) == [
        "NMT_MODEL_REPO is not an nmt-serve variable (ignored): NMT_MODEL_REPOSITORY?",
        "NMT_SHUTDOWN_GRACE_SECONDS is not an nmt-serve variable (ignored): NMT_SHUTDOWN_GRACE?",
    ]


def test_the_projects_other_variables_are_listed_as_such():
    """Every NMT_* name docker-compose.yml and the Locust file read is a flag's variable
    or one of flags.OTHER_VARIABLES (which the near-miss warning leaves alone)."""
    import re

    from service.flags import OTHER_VARIABLES
    from tests.committed import ROOT

    text = (ROOT / "docker-compose.yml").read_text() + (
        ROOT / "loadtest" / "locustfile.py"
    ).read_text()
    named = set(re.findall(r"NMT_[A-Z0-9_]+", text))
    flags = {flag.variable for flag in FLAGS}
    assert named - flags == OTHER_VARIABLES
