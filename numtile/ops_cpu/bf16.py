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

from numtile.ops_cpu.f16_kernels import f16_rounded, f16_value
from numtile.ops_cpu.fastmath import _f32_bits, _f32_from

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
