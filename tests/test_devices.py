"""`--dtype auto`: bfloat16 on a CPU with native bf16 (AMX or AVX512-BF16) for a causal LM only."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from decisiond.devices import cpu_flags, cpu_has_bf16, resolve_dtype

CPU = torch.device("cpu")
PLAIN_AVX2 = {"fpu", "sse4_2", "avx", "avx2", "fma"}


@pytest.mark.parametrize(
    ("flags", "backend", "expected"),
    [
        (PLAIN_AVX2 | {"avx512f", "avx512_bf16"}, "causal_lm", torch.bfloat16),
        (PLAIN_AVX2 | {"amx_bf16", "amx_tile"}, "causal_lm", torch.bfloat16),
        (PLAIN_AVX2 | {"avx512f", "avx512_vnni"}, "causal_lm", torch.float32),  # AVX-512 without bf16
        (PLAIN_AVX2, "causal_lm", torch.float32),
        (PLAIN_AVX2 | {"avx512_bf16", "amx_bf16"}, "bi_encoder", torch.float32),  # encoders stay fp32
        (PLAIN_AVX2 | {"avx512_bf16"}, "cross_encoder", torch.float32),
        (PLAIN_AVX2 | {"avx512_bf16"}, None, torch.float32),
    ],
)
def test_auto_on_a_cpu(flags: set[str], backend: str | None, expected: torch.dtype) -> None:
    assert resolve_dtype("auto", CPU, backend=backend, flags=flags) == expected


def test_an_explicit_dtype_wins_over_the_flags() -> None:
    assert resolve_dtype("float32", CPU, backend="causal_lm", flags={"amx_bf16"}) == torch.float32
    assert resolve_dtype("bfloat16", CPU, backend="bi_encoder", flags=PLAIN_AVX2) == torch.bfloat16


def test_without_cpuinfo_flags_torch_capability_decides() -> None:
    assert cpu_has_bf16(flags=set(), capability="AVX512_BF16") is True
    assert cpu_has_bf16(flags=set(), capability="AMX") is True
    assert cpu_has_bf16(flags=set(), capability="AVX2") is False


def test_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 amx_bf16 amx_tile\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(info) == {"fpu", "avx2", "amx_bf16", "amx_tile"}
    assert cpu_flags(tmp_path / "missing") == frozenset()
