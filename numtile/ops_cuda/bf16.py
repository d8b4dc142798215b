"""CUDA bfloat16 and float16 bit conversions (twins of ``ops_cpu.bf16``): a 16-bit float tile
reaches a kernel as its uint16 view, a float32 one as its uint32 view.

Widening is a shift; narrowing rounds to nearest, ties to even, by integer arithmetic, NaN to
the quiet NaN of its sign, as ``ml_dtypes`` converts (and as ``__float2bfloat16_rn`` does).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from numtile.ops_cuda.bf16_kernels import _as_bits, _as_float, _rounded
from numtile.ops_cuda.launch import DeviceArray, cached_kernel, launch

__all__ = [
    "bf16_from",
    "bf16_narrow",
    "bf16_narrow_sum",
    "bf16_widen",
    "f16_from",
    "f16_narrow",
    "f16_widen",
]


@cached_kernel
def _widen_kernel(bits, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = np.uint32(bits[i]) << np.uint32(16)


@cached_kernel
def _narrow_kernel(x, bits):
    for i in range(cuda.grid(1), bits.size, cuda.gridsize(1)):
        value = np.uint32(x[i])
        upper = value >> np.uint32(16)
        if (value & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
            bits[i] = np.uint16((upper & np.uint32(0x8000)) | np.uint32(0x7FC0))
        else:
            rounding = np.uint32(0x7FFF) + (upper & np.uint32(1))
            bits[i] = np.uint16((value + rounding) >> np.uint32(16))


def bf16_widen(bits: DeviceArray, out: DeviceArray, *, stream=0) -> None:
    """out[i] = the float32 bits of the bfloat16 bits[i] (uint16 in, uint32 out: exact)."""
    launch(_widen_kernel, out.size, stream, bits, out)


def bf16_narrow(x: DeviceArray, bits: DeviceArray, *, stream=0) -> None:
    """bits[i] = the bfloat16 nearest the float32 whose bits are x[i] (uint32 in, uint16 out;
    ties to even, NaN to the quiet NaN of its sign)."""
    launch(_narrow_kernel, bits.size, stream, x, bits)


@cached_kernel
def _from_kernel(x, bits):
    for i in range(cuda.grid(1), bits.size, cuda.gridsize(1)):
        value = np.float64(x[i])
        # float32 rounded to odd, then to bfloat16: one rounding in all (as the CPU twin)
        nearest = np.float32(value)
        word = _as_bits(nearest)
        if abs(np.float64(nearest)) > abs(value):
            word = np.uint32(word - np.uint32(1))
        if np.float64(_as_float(word)) != value:
            word = np.uint32(word | np.uint32(1))
        bits[i] = _rounded(_as_float(word))


def bf16_from(x: DeviceArray, bits: DeviceArray, *, stream=0) -> None:
    """bits[i] = the bfloat16 nearest x[i] (float64, integer or bool in; one rounding, to
    nearest even; integers beyond 2**53 round to float64 first)."""
    launch(_from_kernel, bits.size, stream, x, bits)


@cached_kernel
def _narrow_sum_kernel(acc, partial, bias, bits, has_partial, has_bias):
    columns = bits.shape[1]
    for t in range(cuda.grid(1), bits.size, cuda.gridsize(1)):
        i = t // columns
        j = t - i * columns
        extra = np.float32(0)
        if has_bias:
            extra = bias[j]
        if has_partial:
            extra = np.float32(extra + partial[i, j])
        bits[i, j] = _rounded(np.float32(acc[i, j] + extra))


def bf16_narrow_sum(
    acc: DeviceArray,
    partial: DeviceArray,
    bias: DeviceArray,
    bits: DeviceArray,
    has_partial: bool,
    has_bias: bool,
    *,
    stream=0,
) -> None:
    """bits[i, j] = the bfloat16 nearest acc[i, j] + (bias[j] + partial[i, j]) (float32 sums;
    bias and partial only where their flags say)."""
    args = (acc, partial, bias, bits, bool(has_partial), bool(has_bias))
    launch(_narrow_sum_kernel, bits.size, stream, *args)


# --- float16 (IEEE half): by float64 arithmetic, exact both ways, nearest-even as NumPy -------


@cuda.jit(device=True)
def _half_bits(v):
    """The float16 bits nearest the float64 ``v`` (ties to even; NaN: the quiet NaN)."""
    sign = np.uint16(0x8000) if math.copysign(1.0, v) < 0 else np.uint16(0)
    size = abs(v)
    if size != size:
        return np.uint16(sign | np.uint16(0x7E00))
    if size >= 65520.0:  # halfway past the largest half (65504) rounds to infinity
        return np.uint16(sign | np.uint16(0x7C00))
    exponent = -14  # subnormals: multiples of 2**-24
    if size >= 2.0**-14:
        exponent = math.frexp(size)[1] - 1
    scaled = size * 2.0 ** (10 - exponent)  # exact: in [0, 2048)
    whole = math.floor(scaled)
    fraction = scaled - whole
    if fraction > 0.5 or fraction == 0.5 and whole % 2 == 1:
        whole += 1.0
    if size < 2.0**-14:  # 1024 is the smallest normal: the same bits
        return np.uint16(sign | np.uint16(whole))
    # 2048 carries into the exponent through the addition
    return np.uint16(sign | np.uint16((exponent + 14) * 1024 + int(whole)))


@cuda.jit(device=True)
def _half_value(h):
    """The float64 value of the float16 bits ``h`` (exact)."""
    exponent = (h >> 10) & 0x1F
    fraction = float(h & 0x3FF)
    if exponent == 0x1F:
        size = math.inf if fraction == 0 else math.nan
    elif exponent == 0:
        size = fraction * 2.0**-24
    else:
        size = (1024.0 + fraction) * 2.0 ** (exponent - 25)
    return -size if h & 0x8000 else size


@cached_kernel
def _f16_widen_kernel(bits, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = _half_value(np.int64(bits[i]))


@cached_kernel
def _f16_from_kernel(x, bits):
    for i in range(cuda.grid(1), bits.size, cuda.gridsize(1)):
        bits[i] = _half_bits(np.float64(x[i]))


def f16_widen(bits: DeviceArray, out: DeviceArray, *, stream=0) -> None:
    """out[i] = the float32 bits of the float16 bits[i] (uint16 in, uint32 out: exact)."""
    launch(_f16_widen_kernel, out.size, stream, bits, out.view(np.float32))


def f16_narrow(x: DeviceArray, bits: DeviceArray, *, stream=0) -> None:
    """bits[i] = the float16 nearest the float32 whose bits are x[i] (uint32 in, uint16 out;
    ties to even)."""
    launch(_f16_from_kernel, bits.size, stream, x.view(np.float32), bits)


def f16_from(x: DeviceArray, bits: DeviceArray, *, stream=0) -> None:
    """bits[i] = the float16 nearest x[i] (any real dtype; rounded once)."""
    launch(_f16_from_kernel, bits.size, stream, x, bits)
