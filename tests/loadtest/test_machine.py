"""The machine line of benchmark reports names the vector extensions the figures hang on."""

from __future__ import annotations

import pytest

from loadtest.machine import cpu_name

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: {flags}

processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse2
"""


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("fpu sse2 fma avx f16c avx2", "AMD EPYC (avx2)"),
        ("avx2 avx512f avx512_vnni avx512_bf16 avx512bw", "AMD EPYC (avx512_bf16, avx512_vnni)"),
        ("fpu sse2", "AMD EPYC"),
    ],
)
def test_cpu_name_carries_the_widest_simd_extensions(tmp_path, flags, expected) -> None:
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO.format(flags=flags))
    assert cpu_name(path) == expected


def test_cpu_name_without_cpuinfo_falls_back(tmp_path) -> None:
    assert cpu_name(tmp_path / "missing")  # platform.processor() or "unknown", never raises
