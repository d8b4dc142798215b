"""float16 (IEEE half) conversions in registers, for the kernels of 16-bit float bits
(``ops_cpu.bf16_kernels``: its ``f16_*`` families).

Numba has no float16 type on the CPU, so a float16 element reaches a kernel as its uint16 bit
pattern, and is converted by integer arithmetic and selects (no branch, so the loops around
them vectorise), bit for bit as NumPy converts float16 (``npy_halfbits_to_floatbits`` and
``npy_floatbits_to_halfbits``): subnormals exact both ways, round to nearest even, overflow to
infinity, and NaN payloads kept as far as they fit (a NaN whose kept payload would be zero
becomes 0x7c01, so it stays a NaN: NumPy's rule, not the quiet NaN of the hardware).
"""

import numpy as np

from numtile.ops_cpu.fastmath import _f32_bits, _f32_from, select
from numtile.ops_cpu.helpers import inlined

_SIGN = np.uint32(0x8000)
_MAGNITUDE = np.uint32(0x7FFF)
_HALF_INF = np.uint32(0x7C00)
_HALF_SMALLEST_NORMAL = np.uint32(0x0400)
_SHIFT = np.uint32(13)  # the mantissa bits float32 has beyond float16's 10
_REBIAS = np.uint32(112 << 23)  # float32's exponent bias (127) less float16's (15), in place
_INF = np.uint32(0x7F800000)
_ABS = np.uint32(0x7FFFFFFF)
_MANTISSA = np.uint32(0x007FFFFF)
_SUBNORMAL_UNIT = np.float32(2.0**-24)  # the value of float16's least bit
_HALF_RANGE = np.uint32(143 << 23)  # |x| >= 2**16: infinity (or NaN) in float16
_HALF_NORMAL = np.uint32(113 << 23)  # |x| < 2**-14: a subnormal (or zero) in float16
# 0.5: its float32 ulp is 2**-24, so adding it rounds |x| < 2**-14 to float16's subnormal grid
_ALIGN = np.uint32(126 << 23)
_ROUND_BELOW_HALF = np.uint32(0x0FFF)
_ONE = np.uint32(1)
_SIXTEEN = np.uint32(16)


@inlined
def f16_value(bits):
    """The float32 value of the float16 bit pattern ``bits`` (exact; NaN payloads shifted into
    place as NumPy widens)."""
    h = np.uint32(bits)
    magnitude = h & _MAGNITUDE
    normal = np.uint32((magnitude << _SHIFT) + _REBIAS)
    special = np.uint32((magnitude << _SHIFT) | _INF)  # exponent 31: infinity or NaN
    subnormal = np.uint32(_f32_bits(np.float32(magnitude) * _SUBNORMAL_UNIT))
    small = select(magnitude < _HALF_SMALLEST_NORMAL, subnormal, normal)
    body = select(magnitude >= _HALF_INF, special, small)
    return _f32_from(np.uint32(body | ((h & _SIGN) << _SIXTEEN)))


@inlined
def f16_rounded(value):
    """The float16 bits nearest the float32 ``value`` (ties to even; past 65520: infinity;
    NaN: its payload's upper 10 bits, at least 1, as NumPy narrows)."""
    u = np.uint32(_f32_bits(value))
    size = u & _ABS
    payload = np.uint32(_HALF_INF | ((size & _MANTISSA) >> _SHIFT))
    nan = select(payload == _HALF_INF, np.uint32(_HALF_INF | _ONE), payload)
    large = select(size > _INF, nan, _HALF_INF)
    aligned = np.uint32(_f32_bits(_f32_from(size) + _f32_from(_ALIGN)))
    subnormal = np.uint32(aligned - _ALIGN)
    odd = (size >> _SHIFT) & _ONE
    normal = np.uint32((size - _REBIAS + _ROUND_BELOW_HALF + odd) >> _SHIFT)
    small = select(size < _HALF_NORMAL, subnormal, normal)
    body = select(size >= _HALF_RANGE, large, small)
    return np.uint16(body | ((u >> _SIXTEEN) & _SIGN))
