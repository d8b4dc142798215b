"""Precision modes: bf16/TF32 rounding against ml_dtypes and frexp, the GEMMs of each mode on
both backends, GPT-2 and LLaMA against transformers (under torch.autocast for bf16-mixed),
and the hardware fallback warnings."""

import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

import numtile as nt
from numtile.tiletensor.precision import (
    PrecisionFallbackWarning,
    cpu_fallback,
    gemm_rounding,
    using_precision,
)

SPECIAL = np.array(
    [
        0.0,
        -0.0,
        1.0,
        1 + 2.0**-8,
        1 + 3 * 2.0**-8,
        1 + 2.0**-11,
        -3.75e-39,
        3.4e38,
        np.inf,
        -np.inf,
        np.nan,
        1e-45,
    ],
    dtype=np.float32,
)


def _tf32(x):
    """TF32 rounding (10 mantissa bits, ties to even) through frexp: an independent reference."""
    mantissa, exponent = np.frexp(x.astype(np.float64))
    with np.errstate(invalid="ignore"):
        rounded = np.ldexp(np.round(mantissa * 2.0**11) / 2.0**11, exponent)
    return np.where(np.isfinite(x), rounded, x).astype(np.float32)


def _values(seed=0, n=(5, 7)):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5, n)).astype(np.float32)
    x.reshape(-1)[: SPECIAL.size] = SPECIAL[: x.size]
    return x


def test_round_mantissa_is_bfloat16_and_tf32(backend):
    x = _values()
    bf16, tf32 = np.empty_like(x), np.empty_like(x)
    backend.run("round_mantissa", x, bf16, 7, exact=True)
    backend.run("round_mantissa", x, tf32, 10, exact=True)
    expected = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(bf16, expected)
    normal = np.abs(x) >= np.finfo(np.float32).tiny  # frexp's subnormals differ by design
    np.testing.assert_array_equal(tf32[normal], _tf32(x)[normal])


def test_gemm_kernels_round_inputs_and_output(backend):
    rng = np.random.default_rng(1)
    a, b = (
        rng.standard_normal((6, 5)).astype(np.float32),
        rng.standard_normal((4, 5)).astype(np.float32),
    )
    bf = lambda v: v.astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    c = np.full((6, 4), 0.5, np.float32)
    backend.run("gemm_rounded", bf(a) * np.float32(1 + 2.0**-10), b, c, False, True, 2.0, 1.0, 7, 7)
    expected = bf(2.0 * (bf(a) @ bf(b).T) + 0.5)
    np.testing.assert_allclose(c, expected, rtol=2**-7)
    b = rng.standard_normal((4, 6)).astype(ml_dtypes.bfloat16)
    wide = np.zeros((5, 4), np.float32)
    bits = [x.astype(ml_dtypes.bfloat16).view(np.uint16) for x in (a, b)]
    backend.run("gemm_bf16", *bits, wide, True, True, 1.0, 0.0)
    np.testing.assert_allclose(wide, bf(a).T @ bf(b).T, rtol=1e-5, atol=1e-6)
