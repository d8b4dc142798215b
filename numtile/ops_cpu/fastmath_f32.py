"""float32-native sin, cos and tan: eight lanes of AVX2 where the float64 evaluation has four.

For ``|x| < LIMIT_F32`` = 2**17 (``fastmath_trig.map_reduced`` sends the rest to libm):

- the reduction ``x = q pi/2 + r`` is Cody-Waite with pi/2 = A + B + C in float32 and fused
  multiply-adds: ``x - q A`` is exact (a multiple of 2**-23 below 1 in magnitude), ``q B`` is
  split exactly by ``fma(q, B, -q B)``, and a TwoSum keeps ``r`` as a pair ``r_high + r_low``;
  the nearest float32 to a multiple of pi/2 is 2**-27.8 away from it or more, and the pair
  holds ``r`` to about 2**-56 absolute (q 2**-73 from the rest of pi/2, q < 2**17);
- sin(r) = r + r**3 S(r**2) and cos(r) = 1 - r**2 / 2 + r**4 C(r**2), S and C fitted here in
  float32 (relative error 2**-32.2 for sin and absolute 2**-32.9 for cos on |r| <= 0.8), with the
  low part of r and of r**2 carried into the last addition: one rounding at the end;
- tan is the quotient of those two pairs, corrected once by its residual (a second division).

Measured against float64 over every float32 next to a multiple of pi/2 below the limit and 4M
uniform arguments: at most 0.71 ulp (sin), 0.70 (cos), 0.95 (tan).

``fma`` is LLVM's ``llvm.fma``: one instruction on FMA hardware (it vectorises), a correctly
rounded libm call elsewhere.
"""

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from numtile.ops_cpu.fastmath import _f32_bits, select
from numtile.ops_cpu.helpers import inlined


@intrinsic
def fma(typingctx, a, b, c):
    """a * b + c with one rounding (LLVM's llvm.fma) for three floats of one type."""
    if not (isinstance(a, types.Float) and a == b == c):
        return None

    def codegen(context, builder, signature, args):
        value_type = context.get_value_type(signature.return_type)
        function_type = ir.FunctionType(value_type, [value_type] * 3)
        function = builder.module.declare_intrinsic("llvm.fma", [value_type], function_type)
        return builder.call(function, args)

    return a(a, b, c), codegen


_f = np.float32
LIMIT_F32 = 131072.0  # 2**17: q < 2**17, the tails q B and q C stay 2**-28 of the smallest r
_TWO_OVER_PI = _f(0.6366197466850281)
_ROUNDER = _f(12582912.0)  # 1.5 * 2**23: (t + it) - it rounds t to an integer, even ties
_A = _f(1.5707963705062866)  # float32(pi/2)
_B = _f(-4.371138828673793e-08)  # float32(pi/2 - A)
_C = _f(-1.7150994166548195e-15)  # float32(pi/2 - A - B)
_S1, _S2 = _f(-0.1666666716337204), _f(0.008333371952176094)
_S3, _S4 = _f(-0.00019849761156365275), _f(2.7976043384114746e-06)
_C1, _C2, _C3 = _f(0.04166664555668831), _f(-0.0013887292006984353), _f(2.4428834876744077e-05)
_HALF, _ONE = _f(0.5), _f(1.0)


@inlined
def _reduce_f32(x):
    """(q & 3, r_high, r_low): x = q pi/2 + r_high + r_low for |x| < LIMIT_F32."""
    shifted = x * _TWO_OVER_PI + _ROUNDER
    q = shifted - _ROUNDER
    high = fma(-q, _A, x)  # exact
    product = q * _B
    product_low = fma(q, _B, -product)  # q B = product + product_low exactly
    s = high - product
    bb = s - high
    low = (high - (s - bb)) + (-product - bb)  # TwoSum: high - product = s + low exactly
    low = (low - product_low) - q * _C
    r = s + low
    return _f32_bits(shifted) & 3, r, low - (r - s)


@inlined
def _sin_pair(r, low):
    """(r, tail): sin(r + low) = r + tail to float32 precision plus about 2**-30 relative."""
    z = r * r
    poly = fma(z, fma(z, fma(z, _S4, _S3), _S2), _S1)  # Horner's rule with fused steps
    return r, fma(r * z, poly, fma(-_HALF * z, low, low))


@inlined
def _cos_pair(r, low):
    """(w, tail): cos(r + low) = w + tail, |tail| small against w >= 0.7."""
    z = r * r
    z_low = fma(r, r, -z)  # r * r = z + z_low exactly
    half_z = _HALF * z
    w = _ONE - half_z
    poly = fma(z, fma(z, _C3, _C2), _C1)
    tail = ((_ONE - w) - half_z) + (fma(z * z, poly, -_HALF * z_low) - r * low)
    return w, tail


@inlined
def sin_cos_f32(x):
    """(quadrant, sin(r), cos(r)) in float32 of the reduced argument r of x (one rounding each)."""
    q, r, low = _reduce_f32(x)
    s_high, s_tail = _sin_pair(r, low)
    c_high, c_tail = _cos_pair(r, low)
    return q, s_high + s_tail, c_high + c_tail


@inlined
def tan_f32(x):
    """tan(x) in float32: sin(r) / cos(r), or -cos(r) / sin(r) in odd quadrants, from the
    unrounded pairs, corrected once by the residual of the first quotient."""
    q, r, low = _reduce_f32(x)
    s_high, s_tail = _sin_pair(r, low)
    c_high, c_tail = _cos_pair(r, low)
    odd = (q & 1) == 1
    top_high, top_tail = select(odd, c_high, s_high), select(odd, c_tail, s_tail)
    bottom_high, bottom_tail = select(odd, s_high, c_high), select(odd, s_tail, c_tail)
    bottom = bottom_high + bottom_tail
    quotient = (top_high + top_tail) / bottom
    residual = fma(-quotient, bottom_high, top_high) + (top_tail - quotient * bottom_tail)
    value = quotient + residual / bottom
    return select(odd, -value, value)
