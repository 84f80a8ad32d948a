"""What a benchmark report says about the machine it ran on, and the paths it names."""

from __future__ import annotations

import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The widest vector extensions first: int8 and bf16 kernels, and so every CPU figure,
# depend on them more than on the model name ("AMD EPYC" covers AVX2-only and AVX-512 parts).
SIMD_FLAGS = ("amx_tile", "avx512_bf16", "avx512_vnni", "avx512f", "avx_vnni", "avx2")


def shown(path: Path) -> str:
    """``path`` relative to the repository when inside it (reports are committed: they
    name no home directory)."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name and its widest vector extensions, e.g. ``AMD EPYC (avx2)``."""
    name, flags = platform.processor() or "unknown", set()
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    simd = [f for f in SIMD_FLAGS if f in flags][:2]
    return f"{name} ({', '.join(simd)})" if simd else name
