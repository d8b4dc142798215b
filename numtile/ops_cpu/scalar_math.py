"""Scalar maths of the CPU kernels, in the precision of the data and written so that the loops
over it vectorise: the function of every elementwise op and its derivative, NumPy's
floor_divide/remainder/maximum/minimum semantics, and branch-free float32 tanh and exp.

Each function is ``inlined`` at Numba IR level, so a kernel that passes one to a generic loop
compiles one specialised loop and stays cacheable.
"""

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

from numtile.ops_cpu.fastmath import exp_of, log_of, pow_of
from numtile.ops_cpu.fastmath_trig import cos_of, sin_of, tan_of
from numtile.ops_cpu.helpers import as_type_of, inlined


def tanh_of(v):
    """tanh in the precision of ``v``: a vectorisable rational approximation for float32."""
    raise NotImplementedError("tanh_of is only callable from numba-compiled code")


# Rational minimax approximation of tanh on [-7.905, 7.905] for float32 (the coefficients of
# Eigen's generic_fast_tanh_float, max error a few float32 ulps). Pure arithmetic, so the
# loops around it vectorise; libm's tanhf (no SVML here) is a scalar call per element.
_TANH_CLAMP = 7.90531110763549805
_TANH_ALPHA = (
    -2.76076847742355e-16,
    2.00018790482477e-13,
    -8.60467152213735e-11,
    5.12229709037114e-08,
    1.48572235717979e-05,
    6.37261928875436e-04,
    4.89352455891786e-03,
)
_TANH_BETA = (
    1.19825839466702e-06,
    1.18534705686654e-04,
    2.26843463243900e-03,
    4.89352518554385e-03,
)


@overload(tanh_of, inline="always")
def _tanh_of(v):
    if v != types.float32:
        return lambda v: np.tanh(v)
    f = np.float32
    clamp = f(_TANH_CLAMP)
    a0, a1, a2, a3, a4, a5, a6 = (f(c) for c in _TANH_ALPHA)
    b0, b1, b2, b3 = (f(c) for c in _TANH_BETA)

    def approximate(v):
        x = min(max(v, -clamp), clamp)
        x2 = x * x
        p = ((((((a0 * x2 + a1) * x2 + a2) * x2 + a3) * x2 + a4) * x2 + a5) * x2 + a6) * x
        q = ((b0 * x2 + b1) * x2 + b2) * x2 + b3
        return p / q

    return approximate


_tanh = inlined(lambda v: tanh_of(v))


# --- exp of attention scores ---------------------------------------------------------------

# Cephes' expf: exp(x) = 2**n * exp(r) with n = round(x / ln 2) and r = x - n ln 2 (ln 2 split in
# two so that n * high is exact), exp(r) = 1 + r + r**2 * polynomial(r); about 1 ulp.
_LOG2_E = 1.44269504088896341
_LN2_HIGH = 0.693359375
_LN2_LOW = -2.12194440e-4
_EXPF_C0, _EXPF_C1, _EXPF_C2 = 5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2
_EXPF_C3, _EXPF_C4, _EXPF_C5 = 8.3334519073e-3, 1.3981999507e-3, 1.9875691500e-4
# exp(x) of float32 is below the smallest normal number for x < -87.33 and overflows above 88.72.
_EXPF_LOWEST = -87.33
_EXPF_HIGHEST = 88.72


@intrinsic
def _float32_from_bits(typingctx, bits):
    """The float32 whose IEEE bit pattern is the int32 ``bits``."""
    if bits != types.int32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


def softmax_exp(x):
    """exp(x) of a scores-minus-max value, vectorisable for float32 (Numba-only)."""
    raise NotImplementedError("softmax_exp is only callable from numba-compiled code")


@overload(softmax_exp, inline="always")
def softmax_exp_overload(x):
    if x != types.float32:
        return lambda x: np.exp(x)

    def expf(x):
        # libm's expf is a call per element, and this is the inner loop of attention; this
        # version has no call and no branch, so whole rows go through SIMD registers. Below
        # -87.33 it flushes to 0, above 88.03 it gives inf, and NaN propagates (the clamps keep
        # n in range).
        clamped = _minimum(_maximum(x, np.float32(_EXPF_LOWEST)), np.float32(_EXPF_HIGHEST))
        n = np.floor(clamped * np.float32(_LOG2_E) + np.float32(0.5))
        r = clamped - n * np.float32(_LN2_HIGH) - n * np.float32(_LN2_LOW)
        polynomial = np.float32(_EXPF_C5) * r + np.float32(_EXPF_C4)
        polynomial = polynomial * r + np.float32(_EXPF_C3)
        polynomial = polynomial * r + np.float32(_EXPF_C2)
        polynomial = polynomial * r + np.float32(_EXPF_C1)
        polynomial = polynomial * r + np.float32(_EXPF_C0)
        power = _float32_from_bits(np.int32((np.int32(n) + 127) << 23))
        value = (polynomial * r * r + r + np.float32(1)) * power
        return np.float32(0) if x < np.float32(_EXPF_LOWEST) else value

    return expf


_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_CUBIC = 0.044715


# --- scalar functions of the unary ops ---------------------------------------------------------

_negative = inlined(lambda v: -v)
_abs = inlined(lambda v: abs(v))
_exp = inlined(lambda v: exp_of(v))
_log = inlined(lambda v: log_of(v))
_sqrt = inlined(lambda v: np.sqrt(v))
# A select, not max(v, 0), so that NaN propagates as in np.maximum(v, 0).
_relu = inlined(lambda v: as_type_of(0, v) if v < 0 else v)
_sin = inlined(lambda v: np.sin(v))
_cos = inlined(lambda v: np.cos(v))
_square = inlined(lambda v: v * v)
_reciprocal = inlined(lambda v: as_type_of(1, v) / v)
_expm1 = inlined(lambda v: np.expm1(v))
_log1p = inlined(lambda v: np.log1p(v))
_floor = inlined(lambda v: np.floor(v))
_ceil = inlined(lambda v: np.ceil(v))
_acos = inlined(lambda v: np.arccos(v))
_acosh = inlined(lambda v: np.arccosh(v))
_asin = inlined(lambda v: np.arcsin(v))
_asinh = inlined(lambda v: np.arcsinh(v))
_atan = inlined(lambda v: np.arctan(v))
_atanh = inlined(lambda v: np.arctanh(v))
_cosh = inlined(lambda v: np.cosh(v))
_sinh = inlined(lambda v: np.sinh(v))
_tan = inlined(lambda v: np.tan(v))
# the vectorised twins, exact only where not ``fastmath_trig.beyond_reduction`` (``map_reduced``)
_sin_reduced = inlined(lambda v: sin_of(v))
_cos_reduced = inlined(lambda v: cos_of(v))
_tan_reduced = inlined(lambda v: tan_of(v))
_log2 = inlined(lambda v: np.log2(v))
_log10 = inlined(lambda v: np.log10(v))
_trunc = inlined(lambda v: np.trunc(v))
# rint: half to even in the default rounding mode, as the standard's round
_round = inlined(lambda v: np.rint(v))


@inlined
def _gelu_tanh(v):
    inner = as_type_of(_SQRT_2_OVER_PI, v) * (v + as_type_of(_GELU_CUBIC, v) * v * v * v)
    return as_type_of(0.5, v) * v * (as_type_of(1, v) + tanh_of(inner))


@inlined
def _sigmoid(v):
    # exp of a non-positive number only: no overflow for any input.
    decay = np.exp(-abs(v))
    one = as_type_of(1, v)
    return one / (one + decay) if v >= 0 else decay / (one + decay)


_silu = inlined(lambda v: v * _sigmoid(v))


@inlined
def _sign(v):
    # NumPy: sign(nan) is nan and sign(-0.0) is +0.0.
    if v > 0:
        return as_type_of(1, v)
    if v < 0:
        return as_type_of(-1, v)
    return v if v != v else as_type_of(0, v)


# --- derivatives: grad_out * f'(x) -------------------------------------------------------------

_relu_backward = inlined(lambda v, grad: grad if v > 0 else as_type_of(0, grad))
_exp_backward = inlined(lambda v, grad: grad * exp_of(v))
_log_backward = inlined(lambda v, grad: grad / v)
_sqrt_backward = inlined(lambda v, grad: grad / (as_type_of(2, v) * np.sqrt(v)))


@inlined
def _gelu_tanh_backward(v, grad):
    scale = as_type_of(_SQRT_2_OVER_PI, v)
    cubic = as_type_of(_GELU_CUBIC, v)
    half = as_type_of(0.5, v)
    one = as_type_of(1, v)
    t = tanh_of(scale * (v + cubic * v * v * v))
    inner_slope = scale * (one + as_type_of(3, v) * cubic * v * v)
    return grad * (half * (one + t) + half * v * (one - t * t) * inner_slope)


@inlined
def _silu_backward(v, grad):
    s = _sigmoid(v)
    return grad * s * (as_type_of(1, v) + v * (as_type_of(1, v) - s))


@inlined
def _tanh_backward(v, grad):
    t = tanh_of(v)
    return grad * (as_type_of(1, v) - t * t)


@inlined
def _sigmoid_backward(v, grad):
    s = _sigmoid(v)
    return grad * s * (as_type_of(1, v) - s)


# --- binary ops, with NumPy's semantics ---------------------------------------------------------


def _floor_divide_scalar(a, b):
    """NumPy's floor_divide of two scalars of one type (Numba-only)."""
    raise NotImplementedError("only callable from numba-compiled code")


def _remainder_scalar(a, b):
    """NumPy's remainder of two scalars of one type (Numba-only)."""
    raise NotImplementedError("only callable from numba-compiled code")


@overload(_floor_divide_scalar)
def _floor_divide_overload(a, b):
    if isinstance(a, types.Integer):

        def integer(a, b):
            # -a wraps INT_MIN to INT_MIN as NumPy does; x // 0 is 0 under NumPy's error model.
            return -a if b == -1 else a // b

        return integer

    def real(a, b):
        # npy_divmod from NumPy's npy_math: exact quotient of a - fmod(a, b), then rounding.
        if b == 0:
            return a / b
        mod = np.fmod(a, b)
        div = (a - mod) / b
        if mod != 0 and (b < 0) != (mod < 0):
            div -= as_type_of(1, a)
        if div == 0:
            return np.copysign(as_type_of(0, a), a / b)
        floor = np.floor(div)
        if div - floor > as_type_of(0.5, a):
            floor += as_type_of(1, a)
        return floor

    return real


@overload(_remainder_scalar)
def _remainder_overload(a, b):
    if isinstance(a, types.Integer):

        def integer(a, b):
            return a % b

        return integer

    def real(a, b):
        mod = np.fmod(a, b)
        if b == 0:
            return mod
        if mod == 0:
            return np.copysign(as_type_of(0, a), b)
        return mod + b if (b < 0) != (mod < 0) else mod

    return real


def _llvm_extremum(float_name, signed_name, unsigned_name):
    """Numba intrinsic calling the LLVM max or min of two scalars of one type.

    For floats it is llvm.maximum/llvm.minimum: NaN propagates as in np.maximum, and unlike a
    compare-and-select it still lets LLVM vectorise reductions.
    """

    @intrinsic
    def extremum(typingctx, a, b):
        if a != b or not isinstance(a, (types.Float, types.Integer)):
            return None
        if isinstance(a, types.Float):
            name = float_name
        else:
            name = signed_name if a.signed else unsigned_name

        def codegen(context, builder, signature, args):
            value_type = context.get_value_type(signature.return_type)
            function_type = ir.FunctionType(value_type, [value_type, value_type])
            function = builder.module.declare_intrinsic(name, [value_type], function_type)
            return builder.call(function, args)

        return a(a, b), codegen

    return extremum


_llvm_maximum = _llvm_extremum("llvm.maximum", "llvm.smax", "llvm.umax")
_llvm_minimum = _llvm_extremum("llvm.minimum", "llvm.smin", "llvm.umin")

_add = inlined(lambda a, b: a + b)
_subtract = inlined(lambda a, b: a - b)
_multiply = inlined(lambda a, b: a * b)
_divide = inlined(lambda a, b: a / b)
_maximum = inlined(lambda a, b: _llvm_maximum(a, b))
_minimum = inlined(lambda a, b: _llvm_minimum(a, b))
_power = inlined(lambda a, b: pow_of(a, b))
_floor_divide = inlined(lambda a, b: _floor_divide_scalar(a, b))
_remainder = inlined(lambda a, b: _remainder_scalar(a, b))
_atan2 = inlined(lambda a, b: np.arctan2(a, b))
_copysign = inlined(lambda a, b: np.copysign(a, b))
_hypot = inlined(lambda a, b: np.hypot(a, b))


@inlined
def _logaddexp(a, b):
    # npy_logaddexp: equal arguments (infinities of one sign too) give a + log(2)
    if a == b:
        return a + as_type_of(0.6931471805599453, a)
    difference = a - b
    if difference > 0:
        return a + np.log1p(exp_of(-difference))
    if difference <= 0:
        return b + np.log1p(exp_of(difference))
    return difference  # NaN


_equal = inlined(lambda a, b: a == b)
_not_equal = inlined(lambda a, b: a != b)
_less = inlined(lambda a, b: a < b)
_less_equal = inlined(lambda a, b: a <= b)
_greater = inlined(lambda a, b: a > b)
_greater_equal = inlined(lambda a, b: a >= b)
_logical_and = inlined(lambda a, b: (a != 0) & (b != 0))
_logical_or = inlined(lambda a, b: (a != 0) | (b != 0))
_logical_xor = inlined(lambda a, b: (a != 0) ^ (b != 0))
