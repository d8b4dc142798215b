"""bfloat16 and float16 conversions on bit patterns: Numba has no bfloat16 type (nor a
float16 one on the CPU), so a 16-bit float tile reaches a kernel as its uint16 view and a
float32 one as its uint32 view.

A bfloat16 is the upper half of a float32: widening is a shift; narrowing rounds the lower
half to nearest, ties to even, by integer arithmetic. NaNs become the quiet NaN of their sign
(0x7fc0 / 0xffc0) and infinities stay infinite, bit for bit as ``ml_dtypes`` converts.
float16 converts by integer arithmetic and selects too (``f16_kernels``), bit for bit as NumPy
(and about 8x as fast as NumPy's conversion here, which is not vectorised).
"""

import numba
import numpy as np

from numtile.ops_cpu.bf16_kernels import rounded
from numtile.ops_cpu.f16_kernels import f16_rounded, f16_value
from numtile.ops_cpu.fastmath import _f32_bits, _f32_from, select

_SIGN = np.uint32(0x8000)
_QUIET_NAN = np.uint32(0x7FC0)
_ABS = np.uint32(0x7FFFFFFF)
_INF = np.uint32(0x7F800000)
_HALF = np.uint32(0x7FFF)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def bf16_widen(bits, out):
    """out[i] = the float32 bits of the bfloat16 bits[i] (uint16 in, uint32 out: exact)."""
    for i in range(out.size):
        out[i] = np.uint32(bits[i]) << np.uint32(16)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def bf16_narrow(x, bits):
    """bits[i] = the bfloat16 nearest the float32 whose bits are x[i] (uint32 in, uint16 out;
    ties to even, NaN to the quiet NaN of its sign)."""
    for i in range(bits.size):
        value = np.uint32(x[i])
        upper = value >> np.uint32(16)
        if (value & _ABS) > _INF:
            bits[i] = np.uint16((upper & _SIGN) | _QUIET_NAN)
        else:
            bits[i] = np.uint16((value + _HALF + (upper & np.uint32(1))) >> np.uint32(16))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def bf16_from(x, bits):
    """bits[i] = the bfloat16 nearest x[i] (float64, integer or bool in; one rounding, to
    nearest even, as ml_dtypes converts; integers beyond 2**53 round to float64 first)."""
    for i in range(bits.size):
        value = np.float64(x[i])
        # float32 rounded to odd (truncated, its last bit set when inexact) keeps enough bits
        # that rounding it to bfloat16 gives value's nearest bfloat16: no double rounding
        nearest = np.float32(value)
        word = _f32_bits(nearest)
        word = select(abs(np.float64(nearest)) > abs(value), np.int32(word - 1), word)
        word = select(np.float64(_f32_from(word)) != value, np.int32(word | 1), word)
        bits[i] = rounded(_f32_from(word))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def bf16_narrow_sum(acc, partial, bias, bits, has_partial, has_bias):
    """bits[i, j] = the bfloat16 nearest acc[i, j] + (bias[j] + partial[i, j]) (float32 sums;
    bias and partial only where their flags say, else any arrays): a GEMM's float32 output
    rounded once with its bias and a chain's earlier products (the epilogue of bf16-mixed's
    linear layers)."""
    for i in range(bits.shape[0]):
        row = bits[i]
        for j in range(row.size):
            extra = np.float32(0)
            if has_bias:
                extra = bias[j]
            if has_partial:
                extra = extra + partial[i, j]
            row[j] = rounded(acc[i, j] + extra)


# --- float16 (IEEE half): converted in registers as NumPy converts (``f16_kernels``) --------


@numba.njit(nogil=True, cache=True, error_model="numpy")
def f16_widen(bits, out):
    """out[i] = the float32 bits of the float16 bits[i] (uint16 in, uint32 out: exact)."""
    for i in range(out.size):
        out[i] = np.uint32(_f32_bits(f16_value(bits[i])))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def f16_narrow(x, bits):
    """bits[i] = the float16 nearest the float32 whose bits are x[i] (uint32 in, uint16 out;
    ties to even, as NumPy's astype)."""
    for i in range(bits.size):
        bits[i] = f16_rounded(_f32_from(x[i]))


def f16_from(x, bits) -> None:
    """bits[i] = the float16 nearest x[i] (any real dtype in, rounded once as NumPy's astype
    rounds: float64 straight to float16, not through float32)."""
    with np.errstate(over="ignore"):
        bits.view(np.float16)[...] = x
