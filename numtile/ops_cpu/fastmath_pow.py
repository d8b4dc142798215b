"""float32 and float64 pow, vectorisable (libm's ``pow``/``powf`` are one call per element).

float32: 2**(b log2|a|) in float64 with no table, no float64 division and no int64 to float64
conversion (AVX2 has none: such a conversion is done one lane at a time).

- log2|a|: a float32 is m 2**e with m in [sqrt(1/2), sqrt(2)) read from its bits (subnormals
  scaled by 2**23 first); log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716, by the
  Taylor series of atanh to s**13 (relative error 2**-39.5); 1 / (m + 1) is a float32 division
  (a float64 one costs about three times as long a lane) refined by one Newton step in float64;
- 2**y: y = n + f, n = rint(y), |f| <= 1/2, 2**f by a degree-7 polynomial fitted here (relative
  error 2**-34.1), n added to its exponent field (y is clamped to +-300: no overflow);
- every step is exact or within 2**-34 relative, so the float32 result is rounded once from a
  value within 0.002 float32 ulp of the exact one (0.5 ulp after the rounding, as before).

``pow_blocks`` runs the ordinary path on |a| (normal finite bases, finite exponents: no selects
for zeros, infinities, NaN and +-1) over a block, then ``_signed`` where a base is negative
and ``pow_f32`` / ``pow_f64`` again where ``ordinary_f32`` / ``ordinary_f64`` is false. The
constants of the loops pass through ``fastmath.opaque`` (same values, kept out of the loop).

float64: exp(b ln|a|), where ``b ln|a|`` must hold about 66 bits (|b ln|a|| reaches 745), so
ln|a| and the product are double-doubles, with one division and no table:

- ln|a| = e ln 2 + ln c + 2 atanh(s), m in [sqrt(1/2), sqrt(2)) against the nearest centre c of
  0.75, 1 and 1.5 (ln c and ln m of one sign: no cancellation), s = (m - c) / (m + c) as an
  exact-to-2**-100 pair from one reciprocal and an FMA residual, |s| <= 0.102; 2s and
  (2/3) s**3 in double-double, the Taylor tail to s**19 in double (about 2**-66 relative);
- the product y = b ln|a| as a pair (an FMA gives its error);
- exp(y): y = n ln 2 + r, r as a pair (Cody-Waite, TwoSum), 1 + r + r**2 / 2 summed exactly
  and the Taylor tail to r**14 added to the low part, one rounding, then 2**n as two factors
  applied one after the other (no overflow of the exponent field; a subnormal result is
  rounded a second time).

Measured against long double: at most 0.52 ulp for |b ln a| < 100 and 0.61 ulp up to the
overflow threshold (0.78 ulp of the subnormal spacing for subnormal results).

C99's special values (zeros, infinities, NaN, negative bases, +-1) come from selects, the same
for both types.
"""

import numpy as np

from numtile.ops_cpu.fastmath import _f32_bits, _f32_from, _f64_bits, _f64_from, opaque, select
from numtile.ops_cpu.fastmath_f32 import fma
from numtile.ops_cpu.helpers import as_type_of, inlined

_f = np.float32
_TINY = _f(np.finfo(np.float32).tiny)
_SCALE_UP = _f(2.0**23)
_SQRT_HALF_BITS = np.int32(0x3F3504F3)  # float32(sqrt(1/2))
_EXPONENT_FIELD = np.int32(-(1 << 23))  # 0xFF800000: sign and exponent bits
_LOG2_E = 1.4426950408889634
_ATANH = (2.0 / 3.0, 2.0 / 5.0, 2.0 / 7.0, 2.0 / 9.0, 2.0 / 11.0, 2.0 / 13.0)
_EXP2 = (1.0, 0.6931471807889886, 0.2402265107197922, 0.055504101578502746, 0.009618037520310714)
_EXP2 += (0.0013334079942140462, 0.00015466918101879074, 1.5165811793666287e-05)
_ROUNDER = 6755399441055744.0  # 1.5 * 2**52: (y + it) - it rounds y to an integer
_Y_LIMIT = 300.0  # 2**300 overflows float32 and 2**-300 underflows it: clamp there


@inlined
def _horner(x, coefficients):
    """sum(coefficients[k] x**k) by Horner's rule with fused multiply-adds."""
    value = opaque(coefficients[len(coefficients) - 1])
    for k in range(len(coefficients) - 2, -1, -1):
        value = fma(value, x, opaque(coefficients[k]))
    return value


@inlined
def _log2_normal_f32(x):
    """log2(x) in float64 for a normal positive finite float32 x."""
    bits = _f32_bits(x)
    # x = 2**e m, m in [sqrt(1/2), sqrt(2)): e in the top bits of ``shifted`` (int32 all along:
    # Numba's int64 arithmetic would take two vectors a lane's worth)
    shifted = np.int32(bits - opaque(_SQRT_HALF_BITS))
    m32 = _f32_from(np.int32(bits - (shifted & opaque(_EXPONENT_FIELD))))
    # 1 / (m + 1) to 2**-24 by a float32 division (16 lanes; float64's takes 3x as long a lane),
    # one Newton step in float64 (2**-46)
    one32 = opaque(_f(1))
    inverse32 = one32 / (m32 + one32)
    m, inverse = np.float64(m32), np.float64(inverse32)
    one = opaque(1.0)
    inverse = fma(inverse, fma(-(m + one), inverse, one), inverse)
    s = (m - one) * inverse
    z = s * s
    p = _horner(z, _ATANH)
    log_m = fma(s * z, p, s + s)
    # int32: the conversion vectorises without AVX-512
    return fma(log_m, opaque(_LOG2_E), np.float64(np.int32(shifted >> np.int32(23))))


@inlined
def _log2_f32(magnitude):
    """log2(magnitude) in float64 for a finite float32 magnitude > 0 (subnormals too)."""
    subnormal = magnitude < _TINY
    x = select(subnormal, magnitude * _SCALE_UP, magnitude)
    return _log2_normal_f32(x) - select(subnormal, 23.0, 0.0)


@inlined
def _exp2_f32(y):
    """2**y rounded once to float32, for y in float64 (clamped to +-_Y_LIMIT; NaN to the low
    end): n = rint(y), 2**(y - n) to 2**-34 relative, n added to the exponent field (the
    float64 holds every 2**n of the clamped range)."""
    limit, rounder = opaque(_Y_LIMIT), opaque(_ROUNDER)
    clamped = select(y > -limit, select(y < limit, y, limit), -limit)
    shifted = clamped + rounder  # n in the low bits of the mantissa
    f = clamped - (shifted - rounder)
    p = _horner(f, _EXP2)
    return _f(_f64_from(_f64_bits(p) + (_f64_bits(shifted) << 52)))


@inlined
def _signed(negative, a, b, value):
    """|a| ** b = ``value`` made a ** b: negated where a is negative (``negative``: its sign
    bit, so -0 and -inf too) and b an odd integer, NaN where a is finite and negative and b not
    an integer (infinities count as even integers)."""
    half = b * as_type_of(0.5, b)
    integer = np.floor(b) == b
    value = select(negative & integer & (np.floor(half) != half), -value, value)
    finite_negative = (a < as_type_of(0, a)) & (a > -as_type_of(np.inf, a))
    fraction = np.floor(b) != b
    return select(finite_negative & fraction, as_type_of(np.nan, value), value)


@inlined
def ordinary_f32(a, b):
    """True where ``pow_f32(a, b)`` is ``_signed`` of ``_exp2_f32(b log2|a|)``, with none of
    the selects of zeros, infinities, NaN and +-1: |a| normal finite, b finite."""
    return (abs(a) >= _TINY) & (abs(a) < _f(np.inf)) & (abs(b) < _f(np.inf))


@inlined
def pow_f32(a, b):
    """a ** b for two float32 with C99's special values (within 0.5 ulp plus 0.002)."""
    f = _f
    magnitude = abs(a)
    finite_positive = (magnitude > f(0)) & (magnitude < f(np.inf))
    log2_a = _log2_f32(select(finite_positive, magnitude, f(1)))
    # log2(0) = -inf; inf and NaN stay
    special = select(magnitude == f(0), -np.inf, np.float64(magnitude))
    log2_a = select(finite_positive, log2_a, special)
    y = np.float64(b) * log2_a  # NaN for a or b NaN, and for 0 * inf (b = 0: the unit select)
    value = _signed(_f32_bits(a) < 0, a, b, select(y == y, _exp2_f32(y), f(np.nan)))
    # pow(+1, b) = 1 and pow(a, +-0) = 1 even for NaN; pow(-1, +-inf) = 1
    unit = (a == f(1)) | (b == f(0)) | ((a == -f(1)) & (abs(b) == f(np.inf)))
    return select(unit, f(1), value)


# --- float64: exp(b ln|a|) with ln|a| and the product in double-double ----------------------
_TINY_F64 = np.finfo(np.float64).tiny
_MANTISSA_F64 = 0x000FFFFFFFFFFFFF
_SQRT2_MANTISSA_F64 = 0x6A09E667F3BCD  # the mantissa bits of sqrt(2): m above it is halved
_LN2_HIGH, _LN2_LOW = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # high: 32 bits
_LN0P75_HIGH, _LN0P75_LOW = -0.2876820724517809, -2.6071606164425507e-17  # ln 0.75
_LN1P5_HIGH, _LN1P5_LOW = 0.4054651081081644, -2.8811380259627058e-18  # ln 1.5
_TWO_THIRDS_HIGH, _TWO_THIRDS_LOW = 2.0 / 3.0, 3.700743415417215e-17
# m in [sqrt(1/2), sqrt(2)) against the centre 0.75, 1 or 1.5, split at geometric means
_SQRT0P75, _SQRT1P5 = 0.8660254037844386, 1.224744871391589
# 2 atanh(s) = 2s + (2/3) s**3 + s**5 (2/5 + (2/7) s**2 + ...): the tail to s**19 (|s| <= 0.102)
_ATANH_TAIL = tuple(2.0 / (2 * k + 1) for k in range(2, 10))
# exp(r) = 1 + r + r**2 / 2 + r**3 (1/3! + r/4! + ... + r**11/14!) for |r| <= 0.35
_EXP_TAIL = tuple(1.0 / np.prod(np.arange(1.0, k + 1.0)) for k in range(3, 15))
_ROUNDER_F64 = 6755399441055744.0  # 1.5 * 2**52: (y + it) - it rounds y to an integer
_Y_LIMIT_F64 = 1100.0  # exp(1100) overflows and exp(-1100) underflows float64: clamp there


@inlined
def _ln_f64(magnitude):
    """(high, low): ln(magnitude) as a double-double for a finite float64 magnitude > 0
    (subnormals scaled by 2**54 first)."""
    subnormal = magnitude < _TINY_F64
    x = select(subnormal, magnitude * 18014398509481984.0, magnitude)  # 2**54
    return _ln_scaled_f64(x, select(subnormal, 54, 0))


@inlined
def _ln_scaled_f64(x, scale):
    """(high, low): ln(x 2**-scale) as a double-double to about 2**-66 relative, for a normal
    positive finite float64 x: x = 2**e m, m in [sqrt(1/2), sqrt(2)) against a centre c of
    0.75, 1 or 1.5 (ln m and ln c of one sign), s = (m - c) / (m + c) as a pair from one
    reciprocal (|s| <= 0.102), and ln m = ln c + 2s + (2/3) s**3 + ..., the first three terms
    in double-double."""
    bits = _f64_bits(x)
    mantissa = bits & opaque(_MANTISSA_F64)
    high = mantissa > opaque(_SQRT2_MANTISSA_F64)
    exponent = ((bits >> 52) & 0x7FF) - select(high, 1022, 1023) - scale
    m = _f64_from(mantissa | select(high, opaque(0x3FE0000000000000), opaque(0x3FF0000000000000)))
    below, above = m < opaque(_SQRT0P75), m >= opaque(_SQRT1P5)
    centre = select(below, opaque(0.75), select(above, opaque(1.5), opaque(1.0)))
    e = np.float64(np.int32(exponent))
    numerator = m - centre  # exact (Sterbenz)
    denominator = m + centre
    denominator_low = m - (denominator - centre)  # Fast2Sum: m + c = denominator + low exactly
    inverse = opaque(1.0) / denominator
    s = numerator * inverse
    s_low = (fma(-s, denominator, numerator) - s * denominator_low) * inverse
    z = s * s
    z_low = fma(s, s, -z)
    cube = z * s  # s**3 = cube + cube_low (to 2**-100)
    cube_low = fma(z, s, -cube) + (z_low * s + 3.0 * z * s_low)
    third = opaque(_TWO_THIRDS_HIGH) * cube  # (2/3) s**3 = third + third_low
    third_low = fma(opaque(_TWO_THIRDS_HIGH), cube, -third)
    third_low += opaque(_TWO_THIRDS_HIGH) * cube_low + opaque(_TWO_THIRDS_LOW) * cube
    twice = s + s
    u = twice + third  # Fast2Sum: |third| < |twice|
    u_low = third - (u - twice)
    tail = cube * z * _horner(z, _ATANH_TAIL)
    low = u_low + (2.0 * s_low + third_low + tail)
    centre_ln = select(below, opaque(_LN0P75_HIGH), select(above, opaque(_LN1P5_HIGH), 0.0))
    w = centre_ln + u  # Fast2Sum: |u| < |ln c|, or ln c = 0
    centre_low = select(below, opaque(_LN0P75_LOW), select(above, opaque(_LN1P5_LOW), 0.0))
    low += (u - (w - centre_ln)) + centre_low
    u = w
    e_high = e * opaque(_LN2_HIGH)  # exact: e < 2**21 and _LN2_HIGH has 32 bits
    v = e_high + u  # TwoSum
    b = v - e_high
    v_low = (e_high - (v - b)) + (u - b)
    v_low += low + e * opaque(_LN2_LOW)
    w = v + v_low  # Fast2Sum: normalised
    return w, v_low - (w - v)


@inlined
def _exp_f64(y, y_low):
    """exp(y + y_low) for |y| <= _Y_LIMIT_F64, |y_low| <= ulp(y): the reduced argument r as a
    pair, 1 + r + r**2 / 2 summed exactly and the rest added to the low part, one rounding at
    the end (and one more for a subnormal result)."""
    rounder = opaque(_ROUNDER_F64)
    n = (y * opaque(1.4426950408889634) + rounder) - rounder
    t = y - n * opaque(_LN2_HIGH)  # exact (Sterbenz; n * _LN2_HIGH is exact)
    correction = n * opaque(_LN2_LOW)
    r = t - correction  # TwoSum: t - correction = r + r_low exactly, then y_low
    d = r - t
    r_low = ((t - (r - d)) - (correction + d)) + y_low
    half_square = 0.5 * r * r
    half_square_low = 0.5 * fma(r, r, -r * r)
    q = r + half_square  # Fast2Sum: |half_square| < |r|
    q_low = half_square - (q - r)
    q_low += half_square_low + r * r * r * _horner(r, _EXP_TAIL)
    value = 1.0 + q  # Fast2Sum: |q| < 1
    value_low = q - (value - 1.0) + q_low  # exp(r) = value + value_low, |value_low| < 0.006
    value_low += r_low * (value + value_low)  # exp(r + r_low) = exp(r) (1 + r_low)
    k = np.int64(np.int32(n))
    h = k >> 1  # 2**k as two factors, one after the other: no overflow, one rounding
    return ((value + value_low) * _f64_from((k - h + 1023) << 52)) * _f64_from((h + 1023) << 52)


@inlined
def _exp_product_f64(b, ln_high, ln_low):
    """exp(b (ln_high + ln_low)): the product as a pair (an FMA gives its error), clamped to
    +-_Y_LIMIT_F64 (NaN to the low end)."""
    y = b * ln_high
    y_low = fma(b, ln_high, -y) + b * ln_low
    inside = (y > -_Y_LIMIT_F64) & (y < _Y_LIMIT_F64)
    clamped = select(y > -_Y_LIMIT_F64, select(y < _Y_LIMIT_F64, y, _Y_LIMIT_F64), -_Y_LIMIT_F64)
    return _exp_f64(clamped, select(inside, y_low, 0.0))


@inlined
def ordinary_f64(a, b):
    """True where ``pow_f64(a, b)`` is ``_signed`` of ``_exp_product_f64(b, ln|a|)``, with none
    of the selects of zeros, infinities, NaN and +-1: |a| normal finite, b finite."""
    return (abs(a) >= _TINY_F64) & (abs(a) < np.inf) & (abs(b) < np.inf)


@inlined
def pow_f64(a, b):
    """a ** b for two float64 with C99's special values (within 0.52 ulp measured, see the
    module's tests; subnormal results within one ulp of the subnormal spacing)."""
    magnitude = abs(a)
    finite_positive = (magnitude > 0.0) & (magnitude < np.inf)
    ln_high, ln_low = _ln_f64(select(finite_positive, magnitude, 1.0))
    special = select(magnitude == 0.0, -np.inf, magnitude)  # ln 0 = -inf; inf and NaN stay
    ln_high = select(finite_positive, ln_high, special)
    y = b * ln_high  # NaN for a or b NaN, and for 0 * inf (b = 0: the unit select)
    value = select(y == y, _exp_product_f64(b, ln_high, ln_low), np.nan)
    value = _signed(_f64_bits(a) < 0, a, b, value)
    # pow(+1, b) = 1 and pow(a, +-0) = 1 even for NaN; pow(-1, +-inf) = 1
    unit = (a == 1.0) | (b == 0.0) | ((a == -1.0) & (abs(b) == np.inf))
    return select(unit, 1.0, value)
