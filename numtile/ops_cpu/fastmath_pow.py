"""float32 pow as 2**(b log2|a|) in float64 with no table, one division and no int64 to
float64 conversion (AVX2 has none: such a conversion is done one lane at a time).

- log2|a|: a float32 is m 2**e with m in [sqrt(1/2), sqrt(2)) read from its bits (subnormals
  scaled by 2**23 first); log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716, by the
  Taylor series of atanh to s**13 (relative error 2**-39.5);
- 2**y: y = n + f, n = rint(y), |f| <= 1/2, 2**f by a degree-7 polynomial fitted here (relative
  error 2**-34.1), 2**n put into the exponent field as two factors (no overflow of the field);
- every step is exact or within 2**-34 relative, so the float32 result is rounded once from a
  value within 0.002 float32 ulp of the exact one (0.5 ulp after the rounding, as before).

C99's special values (zeros, infinities, NaN, negative bases, +-1) come from selects, as in
``fastmath.pow_of``.
"""

import numpy as np

from numtile.ops_cpu.fastmath import _f32_bits, _f32_from, _f64_from, select
from numtile.ops_cpu.fastmath_f32 import fma
from numtile.ops_cpu.helpers import inlined

_TINY = np.float32(np.finfo(np.float32).tiny)
_SCALE_UP = np.float32(2.0**23)
_SQRT2_MANTISSA = 0x3504F3  # the mantissa bits of sqrt(2): m above it is halved
_LOG2_E = 1.4426950408889634
_ATANH = (2.0 / 3.0, 2.0 / 5.0, 2.0 / 7.0, 2.0 / 9.0, 2.0 / 11.0, 2.0 / 13.0)
_EXP2 = (0.6931471807889886, 0.2402265107197922, 0.055504101578502746, 0.009618037520310714)
_EXP2 += (0.0013334079942140462, 0.00015466918101879074, 1.5165811793666287e-05)
_ROUNDER = 6755399441055744.0  # 1.5 * 2**52: (y + it) - it rounds y to an integer
_Y_LIMIT = 300.0  # 2**300 overflows float32 and 2**-300 underflows it: clamp there


@inlined
def _log2_f32(magnitude):
    """log2(magnitude) in float64 for a finite float32 magnitude > 0."""
    subnormal = magnitude < _TINY
    x = select(subnormal, magnitude * _SCALE_UP, magnitude)
    bits = _f32_bits(x)
    mantissa = bits & 0x7FFFFF
    high = mantissa > _SQRT2_MANTISSA
    exponent = ((bits >> 23) & 0xFF) - select(high, 126, 127) - select(subnormal, 23, 0)
    m = np.float64(_f32_from(mantissa | select(high, 0x3F000000, 0x3F800000)))
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    a0, a1, a2, a3, a4, a5 = _ATANH
    p = fma(z, fma(z, fma(z, fma(z, fma(z, a5, a4), a3), a2), a1), a0)
    log_m = fma(s * z, p, s + s)
    return fma(log_m, _LOG2_E, np.float64(np.int32(exponent)))


@inlined
def _exp2_f64(y):
    """2**y in float64 for |y| <= _Y_LIMIT (to 2**-34 relative)."""
    n = (y + _ROUNDER) - _ROUNDER
    f = y - n
    c1, c2, c3, c4, c5, c6, c7 = _EXP2
    p = fma(f, fma(f, fma(f, fma(f, fma(f, fma(f, c7, c6), c5), c4), c3), c2), c1)
    k = np.int64(np.int32(n))  # int32: the conversion vectorises without AVX-512
    h = k >> 1
    scale = _f64_from((h + 1023) << 52) * _f64_from((k - h + 1023) << 52)
    return fma(f, p, 1.0) * scale


@inlined
def pow_f32(a, b):
    """a ** b for two float32 with C99's special values (within 0.5 ulp plus 0.002)."""
    f = np.float32
    magnitude = abs(a)
    finite_positive = (magnitude > f(0)) & (magnitude < f(np.inf))
    log2_a = _log2_f32(select(finite_positive, magnitude, f(1)))
    # log2(0) = -inf; inf and NaN stay
    special = select(magnitude == f(0), -np.inf, np.float64(magnitude))
    log2_a = select(finite_positive, log2_a, special)
    y = np.float64(b) * log2_a  # NaN for a or b NaN, and for 0 * inf (b = 0: the unit select)
    clamped = select(y > -_Y_LIMIT, select(y < _Y_LIMIT, y, _Y_LIMIT), -_Y_LIMIT)
    value = f(_exp2_f64(clamped))
    value = select(y == y, value, f(np.nan))
    integer = np.floor(b) == b  # infinities count as even integers
    odd = integer & (np.floor(b * f(0.5)) != b * f(0.5))
    value = select((_f32_bits(a) < 0) & odd, -value, value)  # -0 and -inf too
    fraction = np.floor(b) != b
    value = select((a < f(0)) & (a > -f(np.inf)) & fraction, f(np.nan), value)  # finite a < 0
    # pow(+1, b) = 1 and pow(a, +-0) = 1 even for NaN; pow(-1, +-inf) = 1
    unit = (a == f(1)) | (b == f(0)) | ((a == -f(1)) & (abs(b) == f(np.inf)))
    return select(unit, f(1), value)
