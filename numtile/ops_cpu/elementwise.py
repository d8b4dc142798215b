"""Elementwise kernels: unary maps and their derivatives, broadcasting binary ops, comparisons.

Each kernel branches once on its integer ``op`` and then runs one tight loop specialised for
that op: the scalar function of the op is passed to a generic loop that is inlined, so Numba
compiles (and caches) one vectorisable loop per op and dtype.
"""

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

from numtile.opcodes import (
    ABS,
    ADD,
    CEIL,
    COS,
    DIVIDE,
    EQUAL,
    EXP,
    EXP_BACKWARD,
    EXPM1,
    FLOOR,
    FLOOR_DIVIDE,
    GELU_TANH,
    GELU_TANH_BACKWARD,
    GREATER,
    GREATER_EQUAL,
    LESS,
    LESS_EQUAL,
    LOG,
    LOG1P,
    LOG_BACKWARD,
    LOGICAL_AND,
    LOGICAL_OR,
    MAXIMUM,
    MINIMUM,
    MULTIPLY,
    NEGATIVE,
    NOT_EQUAL,
    POWER,
    RECIPROCAL,
    RELU,
    RELU_BACKWARD,
    REMAINDER,
    SIGMOID,
    SIGMOID_BACKWARD,
    SIGN,
    SILU,
    SILU_BACKWARD,
    SIN,
    SQRT,
    SQRT_BACKWARD,
    SQUARE,
    SUBTRACT,
    TANH,
    TANH_BACKWARD,
)
from numtile.ops_cpu.fastmath import tanh_of
from numtile.ops_cpu.memory import (
    as_type_of,
    inlined,
    inner_axis,
    is_c_contiguous,
    row_offsets,
    unsigned,
)

_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_CUBIC = 0.044715


# --- scalar functions of the unary ops ---------------------------------------------------------

_negative = inlined(lambda v: -v)
_abs = inlined(lambda v: abs(v))
_exp = inlined(lambda v: np.exp(v))
_log = inlined(lambda v: np.log(v))
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


_tanh = inlined(lambda v: tanh_of(v))


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
_exp_backward = inlined(lambda v, grad: grad * np.exp(v))
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
_power = inlined(lambda a, b: a**b)
_floor_divide = inlined(lambda a, b: _floor_divide_scalar(a, b))
_remainder = inlined(lambda a, b: _remainder_scalar(a, b))

_equal = inlined(lambda a, b: a == b)
_not_equal = inlined(lambda a, b: a != b)
_less = inlined(lambda a, b: a < b)
_less_equal = inlined(lambda a, b: a <= b)
_greater = inlined(lambda a, b: a > b)
_greater_equal = inlined(lambda a, b: a >= b)
_logical_and = inlined(lambda a, b: (a != 0) & (b != 0))
_logical_or = inlined(lambda a, b: (a != 0) | (b != 0))


# --- generic loops -------------------------------------------------------------------------------


@inlined
def _map(function, x, out):
    """out[i] = function(x[i]) over flat arrays."""
    for i in range(out.size):
        out[i] = function(x[i])


@inlined
def _zip(function, a, b, out):
    """out[i] = function(a[i], b[i]) over flat arrays."""
    for i in range(out.size):
        out[i] = function(a[i], b[i])


@inlined
def _broadcast(function, a, a_strides, b, b_strides, out, shape):
    """out = function(a, b) over C-ordered ``shape``, a and b addressed by element strides."""
    size = out.size
    a_dense = a.size == size and is_c_contiguous(a_strides, shape)
    b_dense = b.size == size and is_c_contiguous(b_strides, shape)
    if a_dense and b_dense:
        for i in range(size):
            out[i] = function(a[i], b[i])
    elif a_dense and b.size == 1:
        b_value = b[0]
        for i in range(size):
            out[i] = function(a[i], b_value)
    elif b_dense and a.size == 1:
        a_value = a[0]
        for i in range(size):
            out[i] = function(a_value, b[i])
    elif size > 0:
        inner = inner_axis(shape)
        extent = shape[inner]
        a_step = a_strides[inner]
        b_step = b_strides[inner]
        for row in range(size // extent):
            a_start, b_start = row_offsets(row, shape, inner, a_strides, b_strides)
            start = row * extent
            for j in range(extent):
                a_value = a[unsigned(a_start + j * a_step)]
                out[unsigned(start + j)] = function(a_value, b[unsigned(b_start + j * b_step)])


# --- kernels -------------------------------------------------------------------------------------


@numba.njit(nogil=True, cache=True, error_model="numpy")
def unary(x, out, op):
    """out[i] = f(x[i]) for the unary op ``op`` (a code of UNARY_OPS)."""
    if op == NEGATIVE:
        _map(_negative, x, out)
    elif op == ABS:
        _map(_abs, x, out)
    elif op == EXP:
        _map(_exp, x, out)
    elif op == LOG:
        _map(_log, x, out)
    elif op == SQRT:
        _map(_sqrt, x, out)
    elif op == TANH:
        _map(_tanh, x, out)
    elif op == RELU:
        _map(_relu, x, out)
    elif op == GELU_TANH:
        _map(_gelu_tanh, x, out)
    elif op == SILU:
        _map(_silu, x, out)
    elif op == SIN:
        _map(_sin, x, out)
    elif op == COS:
        _map(_cos, x, out)
    elif op == SQUARE:
        _map(_square, x, out)
    elif op == RECIPROCAL:
        _map(_reciprocal, x, out)
    elif op == SIGMOID:
        _map(_sigmoid, x, out)
    elif op == EXPM1:
        _map(_expm1, x, out)
    elif op == LOG1P:
        _map(_log1p, x, out)
    elif op == FLOOR:
        _map(_floor, x, out)
    elif op == CEIL:
        _map(_ceil, x, out)
    elif op == SIGN:
        _map(_sign, x, out)
    else:
        raise ValueError("unary: unknown op code")


@numba.njit(nogil=True, cache=True, error_model="numpy")
def unary_backward(x, grad_out, grad_in, op):
    """grad_in[i] = grad_out[i] * f'(x[i]) for ``op`` (a code of UNARY_BACKWARD_OPS); x is the
    forward input."""
    if op == RELU_BACKWARD:
        _zip(_relu_backward, x, grad_out, grad_in)
    elif op == GELU_TANH_BACKWARD:
        _zip(_gelu_tanh_backward, x, grad_out, grad_in)
    elif op == SILU_BACKWARD:
        _zip(_silu_backward, x, grad_out, grad_in)
    elif op == TANH_BACKWARD:
        _zip(_tanh_backward, x, grad_out, grad_in)
    elif op == SIGMOID_BACKWARD:
        _zip(_sigmoid_backward, x, grad_out, grad_in)
    elif op == EXP_BACKWARD:
        _zip(_exp_backward, x, grad_out, grad_in)
    elif op == LOG_BACKWARD:
        _zip(_log_backward, x, grad_out, grad_in)
    elif op == SQRT_BACKWARD:
        _zip(_sqrt_backward, x, grad_out, grad_in)
    else:
        raise ValueError("unary_backward: unknown op code")


@numba.njit(nogil=True, cache=True, error_model="numpy")
def binary(a, a_strides, b, b_strides, out, shape, op):
    """out = op(a, b) broadcast over ``shape`` (a code of BINARY_OPS; strides 0 on broadcast
    axes)."""
    if op == ADD:
        _broadcast(_add, a, a_strides, b, b_strides, out, shape)
    elif op == SUBTRACT:
        _broadcast(_subtract, a, a_strides, b, b_strides, out, shape)
    elif op == MULTIPLY:
        _broadcast(_multiply, a, a_strides, b, b_strides, out, shape)
    elif op == DIVIDE:
        _broadcast(_divide, a, a_strides, b, b_strides, out, shape)
    elif op == MAXIMUM:
        _broadcast(_maximum, a, a_strides, b, b_strides, out, shape)
    elif op == MINIMUM:
        _broadcast(_minimum, a, a_strides, b, b_strides, out, shape)
    elif op == POWER:
        _broadcast(_power, a, a_strides, b, b_strides, out, shape)
    elif op == FLOOR_DIVIDE:
        _broadcast(_floor_divide, a, a_strides, b, b_strides, out, shape)
    elif op == REMAINDER:
        _broadcast(_remainder, a, a_strides, b, b_strides, out, shape)
    else:
        raise ValueError("binary: unknown op code")


@numba.njit(nogil=True, cache=True, error_model="numpy")
def compare(a, a_strides, b, b_strides, out, shape, op):
    """Boolean out = op(a, b) broadcast over ``shape`` (a code of COMPARE_OPS)."""
    if op == EQUAL:
        _broadcast(_equal, a, a_strides, b, b_strides, out, shape)
    elif op == NOT_EQUAL:
        _broadcast(_not_equal, a, a_strides, b, b_strides, out, shape)
    elif op == LESS:
        _broadcast(_less, a, a_strides, b, b_strides, out, shape)
    elif op == LESS_EQUAL:
        _broadcast(_less_equal, a, a_strides, b, b_strides, out, shape)
    elif op == GREATER:
        _broadcast(_greater, a, a_strides, b, b_strides, out, shape)
    elif op == GREATER_EQUAL:
        _broadcast(_greater_equal, a, a_strides, b, b_strides, out, shape)
    elif op == LOGICAL_AND:
        _broadcast(_logical_and, a, a_strides, b, b_strides, out, shape)
    elif op == LOGICAL_OR:
        _broadcast(_logical_or, a, a_strides, b, b_strides, out, shape)
    else:
        raise ValueError("compare: unknown op code")


@numba.njit(nogil=True, cache=True, error_model="numpy")
def scale(x, alpha, out):
    """out[i] = alpha * x[i], alpha converted to out's dtype."""
    alpha = as_type_of(alpha, out)
    for i in range(out.size):
        out[i] = alpha * x[i]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def axpy(alpha, x, y):
    """y[i] += alpha * x[i] in place, alpha converted to y's dtype."""
    alpha = as_type_of(alpha, y)
    for i in range(y.size):
        y[i] += alpha * x[i]
