"""Elementwise kernels: unary maps and their derivatives, broadcasting binary ops, comparisons.

Each kernel branches once on its integer ``op`` and then runs one tight loop specialised for
that op: the scalar function of the op is passed to a generic loop that is inlined, so Numba
compiles (and caches) one vectorisable loop per op and dtype.
"""

import numba

from numtile import opcodes
from numtile.ops_cpu.helpers import (
    as_type_of,
    inlined,
    inner_axis,
    is_c_contiguous,
    row_offsets,
    unsigned,
)
from numtile.ops_cpu.scalar_math import (
    _abs,
    _acos,
    _acosh,
    _add,
    _asin,
    _asinh,
    _atan,
    _atan2,
    _atanh,
    _ceil,
    _copysign,
    _cos,
    _cosh,
    _divide,
    _equal,
    _exp,
    _exp_backward,
    _expm1,
    _floor,
    _floor_divide,
    _gelu_tanh,
    _gelu_tanh_backward,
    _greater,
    _greater_equal,
    _hypot,
    _less,
    _less_equal,
    _log,
    _log1p,
    _log2,
    _log10,
    _log_backward,
    _logaddexp,
    _logical_and,
    _logical_or,
    _logical_xor,
    _maximum,
    _minimum,
    _multiply,
    _negative,
    _not_equal,
    _power,
    _reciprocal,
    _relu,
    _relu_backward,
    _remainder,
    _round,
    _sigmoid,
    _sigmoid_backward,
    _sign,
    _silu,
    _silu_backward,
    _sin,
    _sinh,
    _sqrt,
    _sqrt_backward,
    _square,
    _subtract,
    _tan,
    _tanh,
    _tanh_backward,
    _trunc,
)

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
    if op == opcodes.NEGATIVE:
        _map(_negative, x, out)
    elif op == opcodes.ABS:
        _map(_abs, x, out)
    elif op == opcodes.EXP:
        _map(_exp, x, out)
    elif op == opcodes.LOG:
        _map(_log, x, out)
    elif op == opcodes.SQRT:
        _map(_sqrt, x, out)
    elif op == opcodes.TANH:
        _map(_tanh, x, out)
    elif op == opcodes.RELU:
        _map(_relu, x, out)
    elif op == opcodes.GELU_TANH:
        _map(_gelu_tanh, x, out)
    elif op == opcodes.SILU:
        _map(_silu, x, out)
    elif op == opcodes.SIN:
        _map(_sin, x, out)
    elif op == opcodes.COS:
        _map(_cos, x, out)
    elif op == opcodes.SQUARE:
        _map(_square, x, out)
    elif op == opcodes.RECIPROCAL:
        _map(_reciprocal, x, out)
    elif op == opcodes.SIGMOID:
        _map(_sigmoid, x, out)
    elif op == opcodes.EXPM1:
        _map(_expm1, x, out)
    elif op == opcodes.LOG1P:
        _map(_log1p, x, out)
    elif op == opcodes.FLOOR:
        _map(_floor, x, out)
    elif op == opcodes.CEIL:
        _map(_ceil, x, out)
    elif op == opcodes.SIGN:
        _map(_sign, x, out)
    elif op == opcodes.ACOS:
        _map(_acos, x, out)
    elif op == opcodes.ACOSH:
        _map(_acosh, x, out)
    elif op == opcodes.ASIN:
        _map(_asin, x, out)
    elif op == opcodes.ASINH:
        _map(_asinh, x, out)
    elif op == opcodes.ATAN:
        _map(_atan, x, out)
    elif op == opcodes.ATANH:
        _map(_atanh, x, out)
    elif op == opcodes.COSH:
        _map(_cosh, x, out)
    elif op == opcodes.SINH:
        _map(_sinh, x, out)
    elif op == opcodes.TAN:
        _map(_tan, x, out)
    elif op == opcodes.LOG2:
        _map(_log2, x, out)
    elif op == opcodes.LOG10:
        _map(_log10, x, out)
    elif op == opcodes.TRUNC:
        _map(_trunc, x, out)
    elif op == opcodes.ROUND:
        _map(_round, x, out)
    else:
        raise ValueError("unary: unknown op code")


@numba.njit(nogil=True, cache=True, error_model="numpy")
def unary_backward(x, grad_out, grad_in, op):
    """grad_in[i] = grad_out[i] * f'(x[i]) for ``op`` (a code of UNARY_BACKWARD_OPS); x is the
    forward input."""
    if op == opcodes.RELU_BACKWARD:
        _zip(_relu_backward, x, grad_out, grad_in)
    elif op == opcodes.GELU_TANH_BACKWARD:
        _zip(_gelu_tanh_backward, x, grad_out, grad_in)
    elif op == opcodes.SILU_BACKWARD:
        _zip(_silu_backward, x, grad_out, grad_in)
    elif op == opcodes.TANH_BACKWARD:
        _zip(_tanh_backward, x, grad_out, grad_in)
    elif op == opcodes.SIGMOID_BACKWARD:
        _zip(_sigmoid_backward, x, grad_out, grad_in)
    elif op == opcodes.EXP_BACKWARD:
        _zip(_exp_backward, x, grad_out, grad_in)
    elif op == opcodes.LOG_BACKWARD:
        _zip(_log_backward, x, grad_out, grad_in)
    elif op == opcodes.SQRT_BACKWARD:
        _zip(_sqrt_backward, x, grad_out, grad_in)
    else:
        raise ValueError("unary_backward: unknown op code")


@numba.njit(nogil=True, cache=True, error_model="numpy")
def binary(a, a_strides, b, b_strides, out, shape, op):
    """out = op(a, b) broadcast over ``shape`` (a code of BINARY_OPS; strides 0 on broadcast
    axes)."""
    if op == opcodes.ADD:
        _broadcast(_add, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.SUBTRACT:
        _broadcast(_subtract, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.MULTIPLY:
        _broadcast(_multiply, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.DIVIDE:
        _broadcast(_divide, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.MAXIMUM:
        _broadcast(_maximum, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.MINIMUM:
        _broadcast(_minimum, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.POWER:
        _broadcast(_power, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.FLOOR_DIVIDE:
        _broadcast(_floor_divide, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.REMAINDER:
        _broadcast(_remainder, a, a_strides, b, b_strides, out, shape)
    else:
        raise ValueError("binary: unknown op code")


@numba.njit(nogil=True, cache=True, error_model="numpy")
def binary_math(a, a_strides, b, b_strides, out, shape, op):
    """out = op(a, b) broadcast over ``shape`` for the floating-point functions of two
    arguments (atan2, copysign, hypot, logaddexp: codes of BINARY_MATH). A kernel of its own:
    ``binary`` compiles for every dtype, and these only for floats, when first used."""
    if op == opcodes.ATAN2:
        _broadcast(_atan2, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.COPYSIGN:
        _broadcast(_copysign, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.HYPOT:
        _broadcast(_hypot, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.LOGADDEXP:
        _broadcast(_logaddexp, a, a_strides, b, b_strides, out, shape)
    else:
        raise ValueError("binary_math: unknown op code")


@numba.njit(nogil=True, cache=True, error_model="numpy")
def compare(a, a_strides, b, b_strides, out, shape, op):
    """Boolean out = op(a, b) broadcast over ``shape`` (a code of COMPARE_OPS)."""
    if op == opcodes.EQUAL:
        _broadcast(_equal, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.NOT_EQUAL:
        _broadcast(_not_equal, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.LESS:
        _broadcast(_less, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.LESS_EQUAL:
        _broadcast(_less_equal, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.GREATER:
        _broadcast(_greater, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.GREATER_EQUAL:
        _broadcast(_greater_equal, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.LOGICAL_AND:
        _broadcast(_logical_and, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.LOGICAL_OR:
        _broadcast(_logical_or, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.LOGICAL_XOR:
        _broadcast(_logical_xor, a, a_strides, b, b_strides, out, shape)
    else:
        raise ValueError("compare: unknown op code")


@numba.njit(nogil=True, cache=True, error_model="numpy")
def axpy(alpha, x, y):
    """y[i] += alpha * x[i] in place, alpha converted to y's dtype."""
    alpha = as_type_of(alpha, y)
    for i in range(y.size):
        y[i] += alpha * x[i]
