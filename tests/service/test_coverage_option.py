"""The ``coverage_penalty`` request option, proto -> domain (:mod:`service.messages`)."""

from __future__ import annotations

import pytest

from models.options import DecodeOptions
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.errors import InvalidRequest
from service.messages import to_options


def test_coverage_penalty_defaults_to_the_model_then_zero():
    assert to_options(pb.DecodeOptions(), default_max_length=256).coverage_penalty == 0.0
    model = DecodeOptions(coverage_penalty=0.2)
    got = to_options(pb.DecodeOptions(), default_max_length=256, defaults=model)
    assert got.coverage_penalty == pytest.approx(0.2)
    msg = pb.DecodeOptions(coverage_penalty=0.5)
    assert to_options(msg, default_max_length=256, defaults=model).coverage_penalty == 0.5


@pytest.mark.parametrize("value", [-1.0, 1e38, 100.5, float("nan"), float("inf")])
def test_a_coverage_penalty_out_of_range_is_invalid(value):
    """1e38 made every score -inf (helper-88); the other weights had caps already."""
    with pytest.raises(InvalidRequest, match="coverage_penalty must be >= 0 and <= 100"):
        to_options(pb.DecodeOptions(coverage_penalty=value), default_max_length=256)
    assert to_options(pb.DecodeOptions(coverage_penalty=100.0), default_max_length=256)
