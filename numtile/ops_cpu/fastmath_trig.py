"""Vectorisable sin, cos and tan of float32 and float64 for the elementwise kernels.

libm's ``sin``/``cos``/``tan`` are one call per element (no SVML here), which blocks SIMD.
float32 is ``fastmath_f32``'s (evaluated in float32: eight AVX2 lanes); float64 is fdlibm's
(musl's) kernels written as pure arithmetic with selects, so a loop over them vectorises:

- the argument is reduced to ``r = x - n pi/2``, ``|r| <= pi/4``, by Cody-Waite: pi/2 split in
  three 33-bit parts, so ``n * part`` is exact for ``|n| < 2**20``, and the subtractions are
  exact (Sterbenz, then TwoSum), which keeps ``r`` exact to about 2**-100 even next to a
  multiple of pi/2;
- sin and cos evaluate fdlibm's ``__kernel_sin``/``__kernel_cos`` on the double-double ``r``,
  tan is fdlibm's ``__kernel_tan`` with selects for its branches (all under 1 ulp).

The reductions hold for ``|x| < 2**19`` (float64) and ``|x| < 2**17`` (float32);
``map_reduced`` runs the fast function over a tile and redoes, with libm, the few elements
beyond that range (infinities included). NaN stays NaN through the arithmetic, and f(-0) = -0
for sin and tan by a select.
"""

import numpy as np
from numba.core import types
from numba.extending import overload

from numtile.ops_cpu.fastmath import _f64_bits, _f64_from, opaque, select
from numtile.ops_cpu.fastmath_f32 import LIMIT_F32, sin_cos_f32, tan_f32
from numtile.ops_cpu.helpers import inlined

# Cody-Waite: pi/2 = P1 + P2 + P3 + P3T, P1..P3 of 33 significant bits (fdlibm's pio2_1..3t)
_INV_PIO2 = 6.36619772367581382433e-01
_P1, _P2, _P3 = 1.57079632673412561417e00, 6.07710050630396597660e-11, 2.02226624871116645580e-21
_P2T, _P3T = 2.02226624879595063154e-21, 8.47842766036889956997e-32
_LIMIT = 524288.0  # 2**19: n < 2**19 and every product n * P is exact
# fdlibm __kernel_sin / __kernel_cos, |r| <= pi/4
_S = (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04)
_S += (2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10)
_C = (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05)
_C += (-2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)
# fdlibm __kernel_tan, |r| <= pi/4; pi/4 = _PIO4 + _PIO4_LOW
_T = (3.33333333333334091986e-01, 1.33333333333201242699e-01, 5.39682539762260521377e-02)
_T += (2.18694882948595424599e-02, 8.86323982359930005737e-03, 3.59207910759131235356e-03)
_T += (1.45620945432529025516e-03, 5.88041240820264096874e-04, 2.46463134818469906812e-04)
_T += (7.81794442939557092300e-05, 7.14072491382608190305e-05, -1.85586374855275456654e-05)
_T += (2.59073051863633712884e-05,)
_PIO4, _PIO4_LOW = 7.85398163397448278999e-01, 3.06161699786838301793e-17
_HIGH_WORD = -(1 << 32)  # the mask keeping a float64's upper 32 bits


def sin_of(v):
    """sin(v), vectorisable for float32 and float64 where not ``beyond_reduction(v)``."""
    raise NotImplementedError("sin_of is only callable from numba-compiled code")


def cos_of(v):
    """cos(v), vectorisable for float32 and float64 where not ``beyond_reduction(v)``."""
    raise NotImplementedError("cos_of is only callable from numba-compiled code")


def tan_of(v):
    """tan(v), vectorisable for float32 and float64 where not ``beyond_reduction(v)``."""
    raise NotImplementedError("tan_of is only callable from numba-compiled code")


def beyond_reduction(v):
    """True where the fast functions do not hold: float64 with ``|v| >= 2**19``, float32 with
    ``|v| >= 2**17`` (infinities too; NaN goes through the fast functions, which return NaN);
    never for other types (their fast functions are NumPy's)."""
    raise NotImplementedError("beyond_reduction is only callable from numba-compiled code")


@inlined
def _two_sum(a, b):
    """(s, e) with s = fl(a + b) and a + b = s + e exactly."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


# The constants of the loops pass through ``fastmath.opaque``: same values and operations, so
# the same bits, but LLVM then interleaves the float64 sin/cos/tan loops four vectors deep
@inlined
def _opaque6(t):
    """The six values of the tuple ``t``, each through ``opaque``."""
    return opaque(t[0]), opaque(t[1]), opaque(t[2]), opaque(t[3]), opaque(t[4]), opaque(t[5])


@inlined
def _reduce(x):
    """(n, r_high, r_low): x = n pi/2 + r_high + r_low, |r| <= pi/4 (about), for |x| < 2**19."""
    n = np.floor(x * opaque(_INV_PIO2) + opaque(0.5))
    high, low = _two_sum(x - n * opaque(_P1), -(n * opaque(_P2)))
    high, low2 = _two_sum(high, -(n * opaque(_P3)))
    tail = (low + low2) - n * opaque(_P3T)
    r = high + tail
    return np.int32(n), r, (high - r) + tail


@inlined
def _sin_kernel(x, y):
    """fdlibm __kernel_sin(x, y, 1): sin(x + y) for |x + y| <= pi/4, |y| tiny."""
    s1, s2, s3, s4, s5, s6 = _opaque6(_S)
    z = x * x
    w = z * z
    r = s2 + z * (s3 + z * s4) + z * w * (s5 + z * s6)
    v = z * x
    return x - ((z * (0.5 * y - v * r) - y) - v * s1)


@inlined
def _cos_kernel(x, y):
    """fdlibm __kernel_cos(x, y): cos(x + y) for |x + y| <= pi/4, |y| tiny."""
    c1, c2, c3, c4, c5, c6 = _opaque6(_C)
    z = x * x
    w = z * z
    r = z * (c1 + z * (c2 + z * c3)) + w * w * (c4 + z * (c5 + z * c6))
    half_z = 0.5 * z
    w = 1.0 - half_z
    return w + (((1.0 - w) - half_z) + (z * r - x * y))


@inlined
def _tan_kernel(x, y, odd):
    """fdlibm __kernel_tan(x, y, odd) with selects for its branches: tan(x + y), or
    -1 / tan(x + y) when ``odd``, for |x + y| <= pi/4 (under 1 ulp)."""
    t0, t1, t2, t3, t4, t5 = _opaque6(_T[:6])
    t6, t7, t8, t9, t10, t11 = _opaque6(_T[6:12])
    t12 = opaque(_T[12])
    big = abs(x) >= 0.6744  # tan(pi/4 - x) instead: the series converges slowly there
    negative = x < 0.0
    x_abs, y_abs = select(negative, -x, x), select(negative, -y, y)
    x = select(big, (_PIO4 - x_abs) + (_PIO4_LOW - y_abs), x)
    y = select(big, 0.0, y)
    z = x * x
    w = z * z
    r = t1 + w * (t3 + w * (t5 + w * (t7 + w * (t9 + w * t11))))
    v = z * (t2 + w * (t4 + w * (t6 + w * (t8 + w * (t10 + w * t12)))))
    s = z * x
    r = y + z * (s * (r + v) + y) + s * t0
    w = x + r
    one = select(odd, -1.0, 1.0)
    near_quarter = one - 2.0 * (x + (r - w * w / (w + one)))
    near_quarter = select(negative, -near_quarter, near_quarter)
    # -1 / (x + r) has up to 2 ulp error: a0 + a (1 + a0 w0 + a0 v) with 32-bit halves
    w0 = _f64_from(_f64_bits(w) & _HIGH_WORD)
    v = r - (w0 - x)  # w0 + v = x + r
    a = -1.0 / w
    a0 = _f64_from(_f64_bits(a) & _HIGH_WORD)
    reciprocal = a0 + a * (1.0 + a0 * w0 + a0 * v)
    return select(big, near_quarter, select(odd, reciprocal, w))


@inlined
def _sin_cos_f64(x):
    """(quadrant n & 3, sin(r), cos(r)) of the reduced float64 argument."""
    n, high, low = _reduce(x)
    return n & 3, _sin_kernel(high, low), _cos_kernel(high, low)


@inlined
def _quadrant_sin(q, sine, cosine):
    """sin(x) from the quadrant q of x and sin/cos of the reduced argument."""
    value = select(q & 1 == 0, sine, cosine)
    return select(q & 2 == 0, value, -value)


@inlined
def _quadrant_cos(q, sine, cosine):
    """cos(x) from the quadrant q of x and sin/cos of the reduced argument."""
    value = select(q & 1 == 0, cosine, -sine)
    return select(q & 2 == 0, value, -value)


def _trig(quadrant_function, keeps_zero_sign):
    """The overload of a trigonometric function: float32 and float64 through the reduction,
    NumPy's function of the same name otherwise; ``keeps_zero_sign``: f(-0) = -0."""

    def overload_of(numpy_function):
        def typer(v):
            if v == types.float32:

                def single(v):
                    q, sine, cosine = sin_cos_f32(v)
                    value = quadrant_function(q, sine, cosine)
                    return select(v == np.float32(0), v, value) if keeps_zero_sign else value

                return single
            if v == types.float64:

                def double(v):
                    q, sine, cosine = _sin_cos_f64(v)
                    value = quadrant_function(q, sine, cosine)
                    return select(v == 0.0, v, value) if keeps_zero_sign else value

                return double
            return lambda v: numpy_function(v)

        return typer

    return overload_of


overload(sin_of, inline="always")(_trig(_quadrant_sin, True)(np.sin))
overload(cos_of, inline="always")(_trig(_quadrant_cos, False)(np.cos))


@overload(tan_of, inline="always")
def _tan_of(v):
    if v == types.float32:
        return lambda v: select(v == np.float32(0), v, tan_f32(v))
    if v != types.float64:
        return lambda v: np.tan(v)

    def tan(v):
        n, high, low = _reduce(v)
        return select(v == 0.0, v, _tan_kernel(high, low, (n & 1) == 1))

    return tan


@overload(beyond_reduction, inline="always")
def _beyond_reduction(v):
    if isinstance(v, types.Float):
        limit = v(LIMIT_F32 if v == types.float32 else _LIMIT)
        return lambda v: abs(v) >= limit
    return lambda v: False


_BLOCK = 512  # elements per block of the fix-up pass


@inlined
def map_reduced(fast, exact, x, out):
    """out[i] = fast(x[i]), or exact(x[i]) where ``beyond_reduction(x[i])``: one loop over the
    tile, which vectorises, then only if an element was beyond the range a pass that looks for
    it block by block (a vectorised test) and redoes those elements one by one."""
    size = out.size
    beyond = False
    # one flat loop: the same loop cut into blocks ran 7x slower whenever out - x was within
    # 32 bytes of a multiple of 2**24 (measured: tiles laid out one after another by malloc)
    for i in range(size):
        value = x[i]  # one load, before the store to out[i]
        out[i] = fast(value)
        beyond |= beyond_reduction(value)
    if not beyond:
        return
    for start in range(0, size, _BLOCK):
        stop = min(start + _BLOCK, size)
        block_beyond = False
        for i in range(start, stop):
            block_beyond |= beyond_reduction(x[i])
        if block_beyond:
            for i in range(start, stop):
                if beyond_reduction(x[i]):
                    out[i] = exact(x[i])
