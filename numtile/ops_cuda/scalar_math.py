"""Scalar maths of the CUDA kernels: NumPy's maximum/minimum, Python's max/min, and the device
functions of every elementwise op for one dtype (the twins of ``ops_cpu.scalar_math``).

``scalar_math(dtype)`` builds the device functions whose maths needs constants in the data's
precision (float32 arithmetic must stay float32, as on the CPU) once per dtype, freezing typed
constants into them. Transcendental functions guard the inputs where IEEE results are wanted
but Python's ``math`` (which runs the kernels under the simulator) would raise: the guards
return what CUDA's libdevice returns anyway.
"""

from __future__ import annotations

import functools
import math
import types

import numba
import numpy as np
from numba import cuda

from numtile.ops_cuda.launch import device_function

_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_CUBIC = 0.044715
# exp overflows float64 above this (and float32 far below it): larger inputs give inf
_EXP_LIMIT = 709.782712893384
# cosh and sinh overflow float64 above this
_COSH_LIMIT = 710.4758600739439
_INT64_MIN = np.int64(np.iinfo(np.int64).min)


@cuda.jit(device=True)
def maximum(a, b):
    """np.maximum of two scalars: NaN propagates, maximum(-0.0, +0.0) is +0.0 (llvm.maximum)."""
    if a > b:
        return a
    if b > a:
        return b
    if a == b:
        # equal: only -0.0 against +0.0 differs, and their sum is +0.0
        return a + b if a == 0 else a
    return a + b  # unordered: a NaN is involved


@cuda.jit(device=True)
def minimum(a, b):
    """np.minimum of two scalars: NaN propagates, minimum(-0.0, +0.0) is -0.0 (llvm.minimum)."""
    if a < b:
        return a
    if b < a:
        return b
    if a == b:
        return -(-a - b) if a == 0 else a
    return a + b


# Python's max and min of two numbers (a unless b is larger / smaller): numba.cuda cannot compile
# the builtins, whose implementation takes *args.
@device_function
def python_max(a, b):
    return b if b > a else a


@device_function
def python_min(a, b):
    return b if b < a else a


@functools.cache
def scalar_math(dtype: np.dtype):
    """Device functions for elements of ``dtype`` with constants frozen in its precision.

    Floats compute in their own precision. Integers compute transcendental functions in
    float64 with the formulas' constants converted to the integer type, exactly as the CPU
    twins do (the tiled ops convert integers to floats before such ops anyway).
    """
    dtype = np.dtype(dtype)
    floating = dtype.kind == "f"
    ftype = dtype.type if floating else np.float64
    real = numba.from_dtype(np.dtype(ftype))
    # constants of the formulas in the data's type, as the CPU's as_type_of (so for integers
    # 0.5 is 0, as there); the IEEE guards in the precision of the float results
    zero, one, minus_one, two, three, half = (dtype.type(c) for c in (0, 1, -1, 2, 3, 0.5))
    sqrt_2_over_pi, gelu_cubic = dtype.type(_SQRT_2_OVER_PI), dtype.type(_GELU_CUBIC)
    inf, nan = ftype(np.inf), ftype(np.nan)
    exp_limit = ftype(_EXP_LIMIT)
    cosh_limit = ftype(_COSH_LIMIT)
    ln2 = ftype(np.log(2.0))
    big = ftype(2.0**52)  # every float at least this large is an integer

    @cuda.jit(device=True)
    def exp(v):
        if v > exp_limit:
            return inf
        return real(math.exp(v))

    @cuda.jit(device=True)
    def expm1(v):
        if v > exp_limit:
            return inf
        return real(math.expm1(v))

    @cuda.jit(device=True)
    def log(v):
        if v < zero:
            return nan
        if v == zero:
            return -inf
        return real(math.log(v))

    @cuda.jit(device=True)
    def log1p(v):
        if v < -one:
            return nan
        if v == -one:
            return -inf
        return real(math.log1p(v))

    @cuda.jit(device=True)
    def sqrt(v):
        if v < zero:
            return nan
        return real(math.sqrt(v))

    @cuda.jit(device=True)
    def sin(v):
        if math.isinf(v):
            return nan
        return real(math.sin(v))

    @cuda.jit(device=True)
    def cos(v):
        if math.isinf(v):
            return nan
        return real(math.cos(v))

    @cuda.jit(device=True)
    def tanh(v):
        return real(math.tanh(v))

    @cuda.jit(device=True)
    def acos(v):
        if abs(v) > one:
            return nan
        return real(math.acos(v))

    @cuda.jit(device=True)
    def asin(v):
        if abs(v) > one:
            return nan
        return real(math.asin(v))

    @cuda.jit(device=True)
    def acosh(v):
        if v < one:
            return nan
        return real(math.acosh(v))

    @cuda.jit(device=True)
    def asinh(v):
        return real(math.asinh(v))

    @cuda.jit(device=True)
    def atan(v):
        return real(math.atan(v))

    @cuda.jit(device=True)
    def atanh(v):
        if abs(v) > one:
            return nan
        if abs(v) == one:
            return real(math.copysign(inf, v))
        return real(math.atanh(v))

    @cuda.jit(device=True)
    def cosh(v):
        if abs(v) > cosh_limit:
            return inf
        return real(math.cosh(v))

    @cuda.jit(device=True)
    def sinh(v):
        if abs(v) > cosh_limit:
            return real(math.copysign(inf, v))
        return real(math.sinh(v))

    @cuda.jit(device=True)
    def tan(v):
        if math.isinf(v):
            return nan
        return real(math.tan(v))

    @cuda.jit(device=True)
    def log2(v):
        if v < zero:
            return nan
        if v == zero:
            return -inf
        return real(math.log2(v))

    @cuda.jit(device=True)
    def log10(v):
        if v < zero:
            return nan
        if v == zero:
            return -inf
        return real(math.log10(v))

    @cuda.jit(device=True)
    def atan2(a, b):
        return real(math.atan2(a, b))

    @cuda.jit(device=True)
    def hypot(a, b):
        return real(math.hypot(a, b))

    @cuda.jit(device=True)
    def logaddexp(a, b):
        # npy_logaddexp, as the CPU twin: equal arguments (infinities too) give a + log(2)
        if a == b:
            return a + ln2
        difference = a - b
        if difference > zero:
            return a + log1p(exp(-difference))
        if difference <= zero:
            return b + log1p(exp(difference))
        return difference

    @cuda.jit(device=True)
    def fmod(a, b):
        if math.isinf(a) or b == zero:
            return nan
        return real(math.fmod(a, b))

    @cuda.jit(device=True)
    def copysign(a, b):
        return real(math.copysign(a, b))

    if floating:

        @cuda.jit(device=True)
        def floor(v):
            # math.floor returns an integer in Numba: floor through fmod keeps a float
            if not v < big or not v > -big or v == zero:
                return v  # inf, NaN, signed zeros and floats too large to have a fraction
            whole = v - real(math.fmod(v, one))
            return whole - one if whole > v else whole

        @cuda.jit(device=True)
        def ceil(v):
            if not v < big or not v > -big or v == zero:
                return v
            whole = real(math.copysign(v - real(math.fmod(v, one)), v))
            return whole + one if whole < v else whole

        @cuda.jit(device=True)
        def trunc(v):
            if not v < big or not v > -big or v == zero:
                return v
            return real(math.copysign(v - real(math.fmod(v, one)), v))

        @cuda.jit(device=True)
        def round_half_even(v):
            if not v < big or not v > -big or v == zero:
                return v
            whole = floor(v)
            fraction = v - whole
            if fraction > half or fraction == half and real(math.fmod(whole, two)) != zero:
                whole += one
            return real(math.copysign(whole, v))

        @cuda.jit(device=True)
        def floor_divide(a, b):
            # npy_divmod from NumPy's npy_math, as the CPU twin: exact quotient of
            # a - fmod(a, b), then rounding
            if b == zero:
                return a / b
            mod = fmod(a, b)
            div = (a - mod) / b
            if mod != zero and (b < zero) != (mod < zero):
                div -= one
            if div == zero:
                return copysign(zero, a / b)
            whole = floor(div)
            if div - whole > half:
                whole += one
            return whole

        @cuda.jit(device=True)
        def remainder(a, b):
            mod = fmod(a, b)
            if b == zero:
                return mod
            if mod == zero:
                return copysign(zero, b)
            return mod + b if (b < zero) != (mod < zero) else mod

        @cuda.jit(device=True)
        def power(a, b):
            return a**b

    else:

        @cuda.jit(device=True)
        def floor(v):
            return real(v)  # NumPy's floor of an integer is the float of it

        ceil = trunc = round_half_even = floor

        @cuda.jit(device=True)
        def floor_divide(a, b):
            # Python's floor division; x // 0 is 0 (NumPy's error model) and -a wraps INT_MIN
            # to INT_MIN as NumPy does
            if b == zero:
                return zero
            if b == minus_one:
                return -a
            return a // b

        @cuda.jit(device=True)
        def remainder(a, b):
            if b == zero or b == minus_one:
                return zero
            return a % b

        @cuda.jit(device=True)
        def power(a, b):
            # as Numba's integer power (the CPU twin): a negative exponent gives 1 / a**-b
            # truncated to an integer, and the INT_MIN of converting inf for a == 0
            if b < zero:
                if a == one:
                    return one
                if a == minus_one:
                    return one if b % 2 == 0 else minus_one
                if a == zero:
                    return _INT64_MIN
                return zero
            result = one
            base = a
            exponent = b
            while exponent != 0:
                if exponent & 1:
                    result *= base
                exponent >>= 1
                base *= base
            return result

    @cuda.jit(device=True)
    def sign(v):
        # NumPy: sign(nan) is nan and sign(-0.0) is +0.0
        if v > zero:
            return one
        if v < zero:
            return minus_one
        return v if v != v else zero

    @cuda.jit(device=True)
    def sigmoid(v):
        # exp of a non-positive number only: no overflow for any input
        decay = exp(-abs(v))
        return one / (one + decay) if v >= zero else decay / (one + decay)

    @cuda.jit(device=True)
    def gelu_tanh(v):
        inner = sqrt_2_over_pi * (v + gelu_cubic * v * v * v)
        return half * v * (one + tanh(inner))

    @cuda.jit(device=True)
    def gelu_tanh_backward(v, grad):
        t = tanh(sqrt_2_over_pi * (v + gelu_cubic * v * v * v))
        inner_slope = sqrt_2_over_pi * (one + three * gelu_cubic * v * v)
        return grad * (half * (one + t) + half * v * (one - t * t) * inner_slope)

    @cuda.jit(device=True)
    def silu_backward(v, grad):
        s = sigmoid(v)
        return grad * s * (one + v * (one - s))

    return types.SimpleNamespace(**locals())
