"""Complex element-wise functions over real ``math``, with the special values of C99 annex G
(the array API standard's tables for complex inputs), written once for both kernel packages:
``build(jit)`` compiles them for one target (``ops_cpu`` passes its inlining ``njit``,
``ops_cuda`` its device-function ``cuda.jit``).

sin, cos and tan are sinh, cosh and tanh of ``i z`` (the standard defines their special values
that way); tanh is Kahan's formula (as FreeBSD's and glibc's ctanh), which neither overflows
nor cancels. Where the standard leaves the sign of a zero or of an infinity unspecified the
functions give what NumPy gives on Linux, except the few cases listed in the tests.
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


def build(jit) -> types.SimpleNamespace:
    """The functions of complex scalars (``sinh cosh tanh sin cos tan expm1 log log1p log2
    log10 sign round``), each compiled by ``jit``."""

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
        w = sinh(complex(-z.imag, z.real))  # sin(z) = -i sinh(iz)
        return complex(w.imag, -w.real)

    @jit
    def cos(z):
        return cosh(complex(-z.imag, z.real))  # cos(z) = cosh(iz)

    @jit
    def tan(z):
        w = tanh(complex(-z.imag, z.real))  # tan(z) = -i tanh(iz)
        return complex(w.imag, -w.real)

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
        sinh=sinh,
        cosh=cosh,
        tanh=tanh,
        sin=sin,
        cos=cos,
        tan=tan,
        expm1=expm1,
        log=log,
        log1p=log1p,
        log2=log2,
        log10=log10,
        sign=sign,
        round=round,
    )
