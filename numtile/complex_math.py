"""Complex element-wise functions over real ``math``, with the special values of C99 annex G
(the array API standard's tables for complex inputs), written once for both kernel packages:
``build(jit)`` compiles them for one target (``ops_cpu`` passes its inlining ``njit``,
``ops_cuda`` its device-function ``cuda.jit``).

sin, cos and tan are sinh, cosh and tanh of ``i z`` (the standard defines their special values
that way); tanh is Kahan's formula (as FreeBSD's and glibc's ctanh), which neither overflows
nor cancels; asinh, acos and acosh follow CPython's ``cmath`` (products of the square roots of
1 +- z, no cancellation; asymptotic forms past 1e150); asin and atan are asinh and atanh of
``i z``. Where the standard leaves the sign of a zero or of an infinity unspecified the
functions give what NumPy gives on Linux, except the few cases listed in the tests.

``exp`` is annex G's cexp (``exp(x + 0j)`` is ``exp(x) + 0j`` even where exp(x) overflows, and
``exp(x) cis(y)`` does not overflow before its product does). ``power`` is the standard's rule for
complex operands, ``exp(w * log(z))`` with annex G's exp, log and multiply, so its special values
are theirs; two cases are treated "more carefully", as the standard allows and as NumPy and
CPython do: ``z ** 0`` is ``1 + 0j`` (even for a NaN z, as for real numbers), and a finite
nonzero z to a small integer power (|n| < 100) is a product of squares (``(1j) ** 2`` is
exactly -1) where that product is finite (finite operands: the textbook products are annex G's).

``multiply`` and ``divide`` are annex G's ``_Cmultd`` and ``_Cdivd`` (C11 G.5.1): an infinite
operand gives an infinite result even where the textbook formula gives NaN + NaN j
(``(inf + nan j) * (1 + 1j)`` is ``inf + inf j``); finite quotients are NumPy's (``smith``: Smith's
algorithm with a reciprocal, bit for bit) unless that gives a NaN, which from finite operands is
only overflow or underflow inside it. Both give the textbook value wherever it has no NaN
part (``smith`` where no operand is infinite either), so a kernel may run the textbook forms,
which vectorise, and redo with these only where a tile needs it.
"""

from __future__ import annotations

import math
import types

# |x| above which tanh(x + iy) is +-1 to double precision (FreeBSD's threshold)
_TANH_SATURATION = 22.0
# below 2**52 a float64 may have a fraction
_WHOLE = 4503599627370496.0
_LN2 = 0.6931471805599453
_LN10 = 2.302585092994046
_PI = 3.141592653589793
# above this |z|, asinh and atanh take their asymptotic forms (squares would overflow)
_LARGE = 1e150
# above this x, exp(x) overflows float64; twice it, so does exp(x / 2)
_EXP_OVERFLOW = 709.0
# below this |n|, z ** n is a product of squares (as NumPy's and CPython's)
_SMALL_POWER = 100


def build(jit) -> types.SimpleNamespace:
    """The functions of complex scalars (``multiply smith divide exp power sinh cosh tanh sin
    cos tan asinh acosh atanh asin acos atan expm1 log log1p log2 log10 sign round``), each
    compiled by ``jit``."""

    @jit
    def box(v):  # an infinity as +-1, anything else as +-0 (annex G's "box the infinity")
        return math.copysign(1.0 if math.isinf(v) else 0.0, v)

    @jit
    def zero_if_nan(v):
        return math.copysign(0.0, v) if v != v else v

    @jit
    def multiply_recovered(a, b, c, d, ac, bd, ad, bc):  # annex G's _Cmultd given NaN + NaN j
        recalc = False
        if math.isinf(a) or math.isinf(b):  # z is infinite
            a, b, c, d = box(a), box(b), zero_if_nan(c), zero_if_nan(d)
            recalc = True
        if math.isinf(c) or math.isinf(d):  # w is infinite
            a, b, c, d = zero_if_nan(a), zero_if_nan(b), box(c), box(d)
            recalc = True
        if not recalc and (math.isinf(ac) or math.isinf(bd) or math.isinf(ad) or math.isinf(bc)):
            a, b, c, d = zero_if_nan(a), zero_if_nan(b), zero_if_nan(c), zero_if_nan(d)
            recalc = True
        if recalc:
            return complex(math.inf * (a * c - b * d), math.inf * (a * d + b * c))
        return complex(math.nan, math.nan)

    @jit
    def multiply(z, w):
        a, b, c, d = z.real, z.imag, w.real, w.imag
        ac, bd, ad, bc = a * c, b * d, a * d, b * c
        x, y = ac - bd, ad + bc
        if x == x or y == y:
            return complex(x, y)
        return multiply_recovered(a, b, c, d, ac, bd, ad, bc)

    @jit
    def scaled(v, k):  # v * 2**k in two exact halves (ldexp raises on overflow in the simulator)
        half = k // 2
        return v * 2.0**half * 2.0 ** (k - half)

    @jit
    def divide_annex_g(a, b, c, d):  # annex G's _Cdivd: scaled by a power of two, then recovered
        large = abs(d) if abs(d) > abs(c) or c != c else abs(c)  # fmax: NaN loses
        scale = 0
        if math.isfinite(large) and large != 0:
            scale = math.frexp(large)[1] - 1  # logb
            c, d = math.ldexp(c, -scale), math.ldexp(d, -scale)
        denominator = c * c + d * d
        x = scaled((a * c + b * d) / denominator, -scale)
        y = scaled((b * c - a * d) / denominator, -scale)
        if x == x or y == y:
            return complex(x, y)
        if denominator == 0 and (a == a or b == b):
            infinity = math.copysign(math.inf, c)
            return complex(infinity * a, infinity * b)
        if (math.isinf(a) or math.isinf(b)) and math.isfinite(c) and math.isfinite(d):
            a, b = box(a), box(b)
            return complex(math.inf * (a * c + b * d), math.inf * (b * c - a * d))
        if math.isinf(large) and math.isfinite(a) and math.isfinite(b):
            c, d = box(c), box(d)
            return complex(0.0 * (a * c + b * d), 0.0 * (b * c - a * d))
        return complex(x, y)

    @jit
    def smith(z, w):
        # NumPy's quotient: Smith's algorithm, reciprocal included (no overflow of |w|**2);
        # c / c and d / d are an exact 1 of the parts' type (a literal 1.0 would widen float32)
        a, b, c, d = z.real, z.imag, w.real, w.imag
        if abs(c) >= abs(d):
            ratio = d / c
            inverse = c / c / (c + d * ratio)
            return complex((a + b * ratio) * inverse, (b - a * ratio) * inverse)
        ratio = c / d
        inverse = d / d / (d + c * ratio)
        return complex((a * ratio + b) * inverse, (b * ratio - a) * inverse)

    @jit
    def divide(z, w):
        a, b, c, d = z.real, z.imag, w.real, w.imag
        finite = math.isfinite(a) and math.isfinite(b) and math.isfinite(c) and math.isfinite(d)
        if finite and (c != 0 or d != 0):
            q = smith(z, w)
            if q.real == q.real and q.imag == q.imag:
                return q
        return divide_annex_g(a, b, c, d)

    @jit
    def times_i(z):  # exact: a swap and a sign, signed zeros and NaNs kept
        return complex(-z.imag, z.real)

    @jit
    def times_minus_i(w):
        return complex(w.imag, -w.real)

    @jit
    def sinh(z):
        x, y = z.real, z.imag
        if y == 0:  # sinh(x) + 0j, also for infinite and NaN x
            return complex(math.sinh(x), y)
        if not math.isfinite(y) and x == 0:
            return complex(x, y - y)  # +-0 + NaN j
        if not math.isfinite(y) and math.isinf(x):
            return complex(abs(x), y - y)  # inf + NaN j (the sign unspecified: NumPy's)
        return complex(math.sinh(x) * math.cos(y), math.cosh(x) * math.sin(y))

    @jit
    def cosh(z):
        x, y = z.real, z.imag
        if y == 0:  # cosh(x) + 0j with the sign of x * y (of y for a NaN x)
            return complex(math.cosh(x), y if x != x else y * math.copysign(1.0, x))
        if not math.isfinite(y) and x == 0:
            return complex(y - y, 0.0)
        if not math.isfinite(y) and math.isinf(x):
            return complex(abs(x), y - y)
        return complex(math.cosh(x) * math.cos(y), math.sinh(x) * math.sin(y))

    @jit
    def tanh(z):
        x, y = z.real, z.imag
        if math.isinf(x):  # +-1 + 0j, the zero signed as sin(2y)
            zero = math.copysign(0.0, math.sin(2 * y) if math.isfinite(y) else y)
            return complex(math.copysign(1.0, x), zero)
        if y == 0:
            return complex(math.tanh(x), y)
        if not math.isfinite(y):
            return complex(x if x == 0 else y - y, y - y)
        if abs(x) >= _TANH_SATURATION:
            decay = math.exp(-abs(x))
            return complex(math.copysign(1.0, x), 4 * math.sin(y) * math.cos(y) * decay * decay)
        t = math.tan(y)
        beta = 1.0 + t * t
        s = math.sinh(x)
        rho = math.sqrt(1.0 + s * s)
        denominator = 1.0 + beta * s * s
        return complex(beta * rho * s / denominator, t / denominator)

    @jit
    def sin(z):
        return times_minus_i(sinh(times_i(z)))  # sin(z) = -i sinh(iz)

    @jit
    def cos(z):
        return cosh(times_i(z))  # cos(z) = cosh(iz)

    @jit
    def tan(z):
        return times_minus_i(tanh(times_i(z)))  # tan(z) = -i tanh(iz)

    @jit
    def sqrt(z):
        # the principal root, the branch cut on the negative real axis following imag's sign
        x, y = z.real, z.imag
        if x == 0 and y == 0:
            return complex(0.0, y)
        r = math.sqrt((math.hypot(x, y) + abs(x)) / 2)
        if x >= 0:
            return complex(r, y / (2 * r))
        return complex(abs(y) / (2 * r), math.copysign(r, y))

    @jit
    def asinh(z):
        x, y = z.real, z.imag
        if math.isinf(x):  # +-inf + i(0, pi/4 or NaN), signed as y
            return complex(x, y if y != y else math.copysign(_PI / 4 if math.isinf(y) else 0.0, y))
        if math.isinf(y):  # +-inf + i pi/2 (NaN x: inf + NaN j)
            if x != x:
                return complex(math.inf, x)
            return complex(math.copysign(math.inf, x), math.copysign(_PI / 2, y))
        if x != x or y != y:  # NaN + 0j keeps its zero, all else NaN + NaN j
            return complex(x, y) if y == 0 else complex(math.nan, math.nan)
        if abs(x) > _LARGE or abs(y) > _LARGE:
            real = math.log(math.hypot(x / 2, y / 2)) + 2 * _LN2
            return complex(math.copysign(real, x), math.atan2(y, abs(x)))
        # CPython's cmath: from the square roots of 1 + iz and 1 - iz, no cancellation
        s1 = sqrt(complex(1.0 + y, -x))
        s2 = sqrt(complex(1.0 - y, x))
        real = math.asinh(s1.real * s2.imag - s2.real * s1.imag)
        return complex(real, math.atan2(y, s1.real * s2.real - s1.imag * s2.imag))

    @jit
    def atanh(z):
        x, y = z.real, z.imag
        if math.isinf(y):  # +-0 + i pi/2, signed as x and y
            return complex(math.copysign(0.0, x), math.copysign(_PI / 2, y))
        if math.isinf(x):
            return complex(math.copysign(0.0, x), y if y != y else math.copysign(_PI / 2, y))
        if x != x or y != y:  # +-0 + NaN j keeps its zero, all else NaN + NaN j
            return complex(x, math.nan) if x == 0 else complex(math.nan, math.nan)
        if abs(x) > _LARGE or abs(y) > _LARGE:  # 1/z to first order
            size = math.hypot(x, y)
            return complex(x / size / size, math.copysign(_PI / 2, y))
        one_minus = 1.0 - x
        real = 0.25 * math.log1p(4.0 * x / (one_minus * one_minus + y * y))
        return complex(real, 0.5 * math.atan2(2.0 * y, one_minus * (1.0 + x) - y * y))

    @jit
    def acos(z):
        x, y = z.real, z.imag
        if math.isinf(x):  # (0, pi/4, 3pi/4 or pi) -+ inf j; NaN + inf j
            if y != y:
                return complex(y, math.inf)
            if math.isinf(y):
                real = _PI / 4 if x > 0 else 3 * _PI / 4
            else:
                real = 0.0 if x > 0 else _PI
            return complex(real, -math.copysign(math.inf, y))
        if math.isinf(y):
            return complex(_PI / 2 if x == x else x, -math.copysign(math.inf, y))
        if x != x or y != y:  # +-0 + NaN j is pi/2 + NaN j, all else NaN + NaN j
            return complex(_PI / 2, math.nan) if x == 0 else complex(math.nan, math.nan)
        if abs(x) > _LARGE or abs(y) > _LARGE:
            size = math.log(math.hypot(x / 2, y / 2)) + 2 * _LN2
            imag = -math.copysign(size, y) if x < 0 else math.copysign(size, -y)
            return complex(math.atan2(abs(y), x), imag)
        s1 = sqrt(complex(1.0 - x, -y))  # CPython's cmath, as asinh
        s2 = sqrt(complex(1.0 + x, y))
        real = 2.0 * math.atan2(s1.real, s2.real)
        return complex(real, math.asinh(s2.real * s1.imag - s2.imag * s1.real))

    @jit
    def acosh(z):
        x, y = z.real, z.imag
        if math.isinf(x):  # inf + i(0, pi/4, 3pi/4 or pi), signed as y; inf + NaN j
            if y != y:
                return complex(math.inf, y)
            if math.isinf(y):
                imag = _PI / 4 if x > 0 else 3 * _PI / 4
            else:
                imag = 0.0 if x > 0 else _PI
            return complex(math.inf, math.copysign(imag, y))
        if math.isinf(y):
            return complex(math.inf, math.copysign(_PI / 2, y) if x == x else x)
        if x != x or y != y:  # +-0 + NaN j is NaN + i pi/2, all else NaN + NaN j
            return complex(math.nan, _PI / 2) if x == 0 else complex(math.nan, math.nan)
        if abs(x) > _LARGE or abs(y) > _LARGE:
            real = math.log(math.hypot(x / 2, y / 2)) + 2 * _LN2
            return complex(real, math.atan2(y, x))
        s1 = sqrt(complex(x - 1.0, y))
        s2 = sqrt(complex(x + 1.0, y))
        real = math.asinh(s1.real * s2.real + s1.imag * s2.imag)
        return complex(real, 2.0 * math.atan2(s1.imag, s2.real))

    @jit
    def asin(z):
        return times_minus_i(asinh(times_i(z)))  # asin(z) = -i asinh(iz)

    @jit
    def atan(z):
        return times_minus_i(atanh(times_i(z)))  # atan(z) = -i atanh(iz)

    @jit
    def expm1(z):
        x, y = z.real, z.imag
        if y == 0:
            return complex(math.expm1(x), y)
        if x == -math.inf:  # -1 + 0j, the zero signed as sin(y)
            return complex(-1.0, math.copysign(0.0, math.sin(y)) if math.isfinite(y) else 0.0)
        if x == math.inf and not math.isfinite(y):
            return complex(x, y - y)
        half = math.sin(y / 2)
        # exp(x) cos(y) - 1 without the cancellation near 0
        return complex(math.expm1(x) * math.cos(y) - 2 * half * half, math.exp(x) * math.sin(y))

    @jit
    def log(z):
        # hypot and atan2 carry annex G's special values: log(-0 + 0j) = -inf + pi j, ...
        x, y = z.real, z.imag
        large, small = abs(x), abs(y)  # (not max/min: numba-cuda cannot compile them here)
        if small > large:
            large, small = small, large
        if 0.5 <= large <= 1.5:  # log|z| near |z| = 1 without the cancellation
            real = 0.5 * math.log1p((large - 1.0) * (large + 1.0) + small * small)
        elif large == 0 and small == 0:  # (the simulator's math.log raises at 0)
            real = -math.inf
        else:
            real = math.log(math.hypot(x, y))
        return complex(real, math.atan2(y, x))

    @jit
    def log1p(z):
        x, y = z.real, z.imag
        if not (math.isfinite(x) and math.isfinite(y)):
            return log(complex(x + 1.0, y))
        if abs(x) < 0.5 and abs(y) < 0.5:  # log|1 + z| without the cancellation near 0
            real = 0.5 * math.log1p(x * (2.0 + x) + y * y)
        else:
            real = math.log(math.hypot(x + 1.0, y))
        return complex(real, math.atan2(y, x + 1.0))

    @jit
    def log2(z):
        w = log(z)
        return complex(w.real / _LN2, w.imag / _LN2)

    @jit
    def log10(z):
        w = log(z)
        return complex(w.real / _LN10, w.imag / _LN10)

    @jit
    def exp_halves(x):  # exp(x / 2) (inf, not the simulator's OverflowError, past 2 * 709)
        return math.inf if x > 2 * _EXP_OVERFLOW else math.exp(x / 2)

    @jit
    def exp(z):
        x, y = z.real, z.imag
        if y == 0:  # exp(x) + 0j, the zero signed as y, also where exp(x) overflows
            half = exp_halves(x)
            return complex(half * half, y)
        if not math.isfinite(y):  # -inf: 0 +- 0j; +inf: inf + NaN j; otherwise NaN + NaN j
            if x == -math.inf:  # (the signs unspecified: exp(conj(z)) = conj(exp(z)))
                return complex(0.0, math.copysign(0.0, y) if math.isinf(y) else 0.0)
            return complex(x if x == math.inf else y - y, y - y)
        if x > _EXP_OVERFLOW:  # exp(x) overflows before exp(x) cis(y) does
            half = exp_halves(x)
            return complex(half * math.cos(y) * half, half * math.sin(y) * half)
        scale = math.exp(x)
        return complex(scale * math.cos(y), scale * math.sin(y))

    @jit
    def integer_power(z, n):  # z ** n by squaring (textbook products), a quotient for n < 0
        m = abs(n)
        while m & 1 == 0:  # start at the lowest set bit: no 1 * z, which loses signed zeros
            z = z * z
            m >>= 1
        result = z
        m >>= 1
        while m:
            z = z * z
            if m & 1:
                result = result * z
            m >>= 1
        return smith(complex(1.0, 0.0), result) if n < 0 else result

    @jit
    def power(z, w):
        if w.real == 0 and w.imag == 0:
            return complex(1.0, 0.0)
        n = w.real
        if w.imag == 0 and abs(n) < _SMALL_POWER and n == math.floor(n):
            ordinary = math.isfinite(z.real) and math.isfinite(z.imag)
            if ordinary and (z.real != 0 or z.imag != 0):
                result = integer_power(z, int(n))
                if math.isfinite(result.real) and math.isfinite(result.imag):
                    return result  # (past overflow, the standard's rule below)
        return exp(multiply(w, log(z)))

    @jit
    def sign(z):
        x, y = z.real, z.imag
        if x != x or y != y:
            return complex(math.nan, math.nan)
        if x == 0 and y == 0:
            return complex(0.0, 0.0)
        if math.isinf(x) and math.isinf(y):  # inf / inf, as NumPy
            return complex(math.nan, math.nan)
        if math.isinf(x) or math.isinf(y):  # the direction of the infinite part
            x = math.copysign(1.0, x) if math.isinf(x) else 0.0
            y = math.copysign(1.0, y) if math.isinf(y) else 0.0
        size = math.hypot(x, y)
        return complex(x / size, y / size)

    @jit
    def round_half_even(v):
        if not abs(v) < _WHOLE:  # inf, NaN, or already whole
            return v
        whole = math.floor(v)
        fraction = v - whole  # exact below 2**52
        if fraction > 0.5 or fraction == 0.5 and whole - 2.0 * math.floor(whole / 2.0) != 0:
            whole += 1.0
        return math.copysign(whole, v)  # -0.4 rounds to -0.0

    @jit
    def round(z):  # noqa: A001  (the array API name)
        return complex(round_half_even(z.real), round_half_even(z.imag))

    return types.SimpleNamespace(
        multiply=multiply,
        smith=smith,
        divide=divide,
        exp=exp,
        power=power,
        sinh=sinh,
        cosh=cosh,
        tanh=tanh,
        sin=sin,
        cos=cos,
        tan=tan,
        expm1=expm1,
        log=log,
        asinh=asinh,
        atanh=atanh,
        acos=acos,
        acosh=acosh,
        asin=asin,
        atan=atan,
        log1p=log1p,
        log2=log2,
        log10=log10,
        sign=sign,
        round=round,
    )
