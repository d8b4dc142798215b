"""bfloat16 conversions on bit patterns: Numba has no bfloat16 type, so a bfloat16 tile
reaches a kernel as its uint16 view and a float32 one as its uint32 view.

A bfloat16 is the upper half of a float32: widening is a shift; narrowing rounds the lower
half to nearest, ties to even, by integer arithmetic. NaNs become the quiet NaN of their sign
(0x7fc0 / 0xffc0) and infinities stay infinite, bit for bit as ``ml_dtypes`` converts.
"""

import numba
import numpy as np

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


# --- float16: NumPy's conversions (IEEE half; F16C where the CPU has it), on bit views --------


def f16_widen(bits, out) -> None:
    """out[i] = the float32 bits of the float16 bits[i] (uint16 in, uint32 out: exact)."""
    out.view(np.float32)[...] = bits.view(np.float16)


def f16_narrow(x, bits) -> None:
    """bits[i] = the float16 nearest the float32 whose bits are x[i] (uint32 in, uint16 out;
    ties to even, as NumPy's astype)."""
    with np.errstate(over="ignore"):  # past 65504: infinity, as intended
        bits.view(np.float16)[...] = x.view(np.float32)


def f16_from(x, bits) -> None:
    """bits[i] = the float16 nearest x[i] (any real dtype in, rounded once as NumPy's astype
    rounds: float64 straight to float16, not through float32)."""
    with np.errstate(over="ignore"):
        bits.view(np.float16)[...] = x
