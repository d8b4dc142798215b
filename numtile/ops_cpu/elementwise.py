"""Elementwise kernels: unary maps and their derivatives, broadcasting binary ops, comparisons.

Each kernel family (``unary``, ``binary``...) is an ``OpKernel``: the first call with an op
code compiles the kernel of that op alone, a closure over the op's name whose branches on it
are pruned before typing (``per_op``). The scalar function of the op is passed to a generic
loop that is inlined, so Numba compiles (and caches) one vectorisable loop per op and dtype.
"""

import numba

from numtile import opcodes
from numtile.ops_cpu import mkl_vml, pow_avx512, pow_blocks
from numtile.ops_cpu.fastmath import broadcast_gathered
from numtile.ops_cpu.fastmath_blocks import map_cos, map_exp, map_sin
from numtile.ops_cpu.fastmath_trig import map_reduced
from numtile.ops_cpu.helpers import (
    as_type_of,
    inlined,
    inner_axis,
    is_c_contiguous,
    row_offsets,
    unsigned,
    wide_vectors,
)
from numtile.ops_cpu.per_op import LibraryFirst, Mirrored, OpKernel
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
    _cosh,
    _divide,
    _equal,
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
    _sinh,
    _sqrt,
    _sqrt_backward,
    _square,
    _subtract,
    _tan,
    _tan_reduced,
    _tanh,
    _tanh_backward,
    _trunc,
)
from numtile.ops_cpu.streaming import map_streamed, zip_streamed, zip_value_streamed

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


# --- kernels: one ``OpKernel`` per family, whose kernel of one op is a closure over its name ---


def _unary(op):
    """The kernel out[i] = f(x[i]) of the unary op named ``op`` (a name of UNARY_OPS)."""

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def unary_op(x, out):
        wide_vectors()
        if op == "negative":
            _map(_negative, x, out)
        elif op == "abs":
            _map(_abs, x, out)
        elif op == "exp":
            map_exp(x, out, False)
        elif op == "log":
            _map(_log, x, out)
        elif op == "sqrt":
            _map(_sqrt, x, out)
        elif op == "tanh":
            _map(_tanh, x, out)
        elif op == "relu":
            _map(_relu, x, out)
        elif op == "gelu_tanh":
            _map(_gelu_tanh, x, out)
        elif op == "silu":
            _map(_silu, x, out)
        elif op == "sin":
            map_sin(x, out, False)
        elif op == "cos":
            map_cos(x, out, False)
        elif op == "square":
            _map(_square, x, out)
        elif op == "reciprocal":
            _map(_reciprocal, x, out)
        elif op == "sigmoid":
            _map(_sigmoid, x, out)
        elif op == "expm1":
            _map(_expm1, x, out)
        elif op == "log1p":
            _map(_log1p, x, out)
        elif op == "floor":
            _map(_floor, x, out)
        elif op == "ceil":
            _map(_ceil, x, out)
        elif op == "sign":
            _map(_sign, x, out)
        elif op == "acos":
            _map(_acos, x, out)
        elif op == "acosh":
            _map(_acosh, x, out)
        elif op == "asin":
            _map(_asin, x, out)
        elif op == "asinh":
            _map(_asinh, x, out)
        elif op == "atan":
            _map(_atan, x, out)
        elif op == "atanh":
            _map(_atanh, x, out)
        elif op == "cosh":
            _map(_cosh, x, out)
        elif op == "sinh":
            _map(_sinh, x, out)
        elif op == "tan":
            map_reduced(_tan_reduced, _tan, x, out)
        elif op == "log2":
            _map(_log2, x, out)
        elif op == "log10":
            _map(_log10, x, out)
        elif op == "trunc":
            _map(_trunc, x, out)
        elif op == "round":
            _map(_round, x, out)

    return unary_op


# the ops bound by memory traffic, whose outputs stream (streaming.wanted), and float32 exp,
# sin, cos (fastmath_blocks: their short kernels hide under the stores); the others are bound
# by their arithmetic (float64 exp: streamed 1.02x the time of ordinary stores) and keep theirs
STREAMED_UNARY = ("negative", "abs", "sqrt", "relu", "square", "reciprocal", "floor", "ceil")
STREAMED_UNARY += ("sign", "trunc", "round", "exp", "sin", "cos")
STREAMED_UNARY_BACKWARD = ("relu", "log", "sqrt")
STREAMED_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum")


def _unary_streamed(op):
    """The kernel of ``op`` (a name of UNARY_OPS) streaming its output, None where not
    streamed."""
    if op not in STREAMED_UNARY:
        return None

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def unary_streamed_op(x, out):
        wide_vectors()
        if op == "negative":
            map_streamed(_negative, x, out)
        elif op == "abs":
            map_streamed(_abs, x, out)
        elif op == "sqrt":
            map_streamed(_sqrt, x, out)
        elif op == "relu":
            map_streamed(_relu, x, out)
        elif op == "square":
            map_streamed(_square, x, out)
        elif op == "reciprocal":
            map_streamed(_reciprocal, x, out)
        elif op == "floor":
            map_streamed(_floor, x, out)
        elif op == "ceil":
            map_streamed(_ceil, x, out)
        elif op == "sign":
            map_streamed(_sign, x, out)
        elif op == "trunc":
            map_streamed(_trunc, x, out)
        elif op == "round":
            map_streamed(_round, x, out)
        elif op == "exp":
            map_exp(x, out, True)
        elif op == "sin":
            map_sin(x, out, True)
        elif op == "cos":
            map_cos(x, out, True)

    return unary_streamed_op


def _unary_backward(op):
    """The kernel grad_in = grad_out * f'(x) of ``op`` (a name of UNARY_BACKWARD_OPS)."""

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def unary_backward_op(x, grad_out, grad_in):
        wide_vectors()
        if op == "relu":
            _zip(_relu_backward, x, grad_out, grad_in)
        elif op == "gelu_tanh":
            _zip(_gelu_tanh_backward, x, grad_out, grad_in)
        elif op == "silu":
            _zip(_silu_backward, x, grad_out, grad_in)
        elif op == "tanh":
            _zip(_tanh_backward, x, grad_out, grad_in)
        elif op == "sigmoid":
            _zip(_sigmoid_backward, x, grad_out, grad_in)
        elif op == "exp":
            _zip(_exp_backward, x, grad_out, grad_in)
        elif op == "log":
            _zip(_log_backward, x, grad_out, grad_in)
        elif op == "sqrt":
            _zip(_sqrt_backward, x, grad_out, grad_in)

    return unary_backward_op


def _unary_backward_streamed(op):
    """The kernel of ``op`` (a name of UNARY_BACKWARD_OPS) streaming grad_in, None where not
    streamed."""
    if op not in STREAMED_UNARY_BACKWARD:
        return None

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def unary_backward_streamed_op(x, grad_out, grad_in):
        wide_vectors()
        if op == "relu":
            zip_streamed(_relu_backward, x, grad_out, grad_in)
        elif op == "log":
            zip_streamed(_log_backward, x, grad_out, grad_in)
        elif op == "sqrt":
            zip_streamed(_sqrt_backward, x, grad_out, grad_in)

    return unary_backward_streamed_op


def _binary(op):
    """The broadcasting kernel out = op(a, b) of ``op`` (a name of BINARY_OPS)."""

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def binary_op(a, a_strides, b, b_strides, out, shape):
        wide_vectors()
        if op == "add":
            _broadcast(_add, a, a_strides, b, b_strides, out, shape)
        elif op == "subtract":
            _broadcast(_subtract, a, a_strides, b, b_strides, out, shape)
        elif op == "multiply":
            _broadcast(_multiply, a, a_strides, b, b_strides, out, shape)
        elif op == "divide":
            _broadcast(_divide, a, a_strides, b, b_strides, out, shape)
        elif op == "maximum":
            _broadcast(_maximum, a, a_strides, b, b_strides, out, shape)
        elif op == "minimum":
            _broadcast(_minimum, a, a_strides, b, b_strides, out, shape)
        elif op == "power":
            broadcast_gathered(pow_blocks.gathered, a, a_strides, b, b_strides, out, shape)
        elif op == "floor_divide":
            _broadcast(_floor_divide, a, a_strides, b, b_strides, out, shape)
        elif op == "remainder":
            _broadcast(_remainder, a, a_strides, b, b_strides, out, shape)

    return binary_op


@inlined
def _broadcast_streamed(function, a, a_strides, b, b_strides, out, shape):
    """``_broadcast``, out streamed where a is whole (C order) and b whole or one element (a
    scalar first, rarer, keeps ordinary stores: one loop less to compile)."""
    size = out.size
    a_dense = a.size == size and is_c_contiguous(a_strides, shape)
    if a_dense and b.size == size and is_c_contiguous(b_strides, shape):
        zip_streamed(function, a, b, out)
    elif a_dense and b.size == 1:
        zip_value_streamed(function, a, b[0], out)
    else:
        _broadcast(function, a, a_strides, b, b_strides, out, shape)


def _binary_streamed(op):
    """The broadcasting kernel of ``op`` (a name of BINARY_OPS) streaming its output, None
    where not streamed."""
    if op not in STREAMED_BINARY:
        return None

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def binary_streamed_op(a, a_strides, b, b_strides, out, shape):
        wide_vectors()
        if op == "add":
            _broadcast_streamed(_add, a, a_strides, b, b_strides, out, shape)
        elif op == "subtract":
            _broadcast_streamed(_subtract, a, a_strides, b, b_strides, out, shape)
        elif op == "multiply":
            _broadcast_streamed(_multiply, a, a_strides, b, b_strides, out, shape)
        elif op == "divide":
            _broadcast_streamed(_divide, a, a_strides, b, b_strides, out, shape)
        elif op == "maximum":
            _broadcast_streamed(_maximum, a, a_strides, b, b_strides, out, shape)
        elif op == "minimum":
            _broadcast_streamed(_minimum, a, a_strides, b, b_strides, out, shape)

    return binary_streamed_op


def _binary_math(op):
    """The broadcasting kernel of ``op`` (atan2, copysign, hypot or logaddexp)."""

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def binary_math_op(a, a_strides, b, b_strides, out, shape):
        wide_vectors()
        if op == "atan2":
            _broadcast(_atan2, a, a_strides, b, b_strides, out, shape)
        elif op == "copysign":
            _broadcast(_copysign, a, a_strides, b, b_strides, out, shape)
        elif op == "hypot":
            _broadcast(_hypot, a, a_strides, b, b_strides, out, shape)
        elif op == "logaddexp":
            _broadcast(_logaddexp, a, a_strides, b, b_strides, out, shape)

    return binary_math_op


def _compare(op):
    """The broadcasting boolean kernel out = op(a, b) of ``op`` (a name of COMPARE_OPS)."""

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def compare_op(a, a_strides, b, b_strides, out, shape):
        wide_vectors()
        if op == "equal":
            _broadcast(_equal, a, a_strides, b, b_strides, out, shape)
        elif op == "not_equal":
            _broadcast(_not_equal, a, a_strides, b, b_strides, out, shape)
        elif op == "less":
            _broadcast(_less, a, a_strides, b, b_strides, out, shape)
        elif op == "less_equal":
            _broadcast(_less_equal, a, a_strides, b, b_strides, out, shape)
        elif op == "greater":  # (``compare`` runs these as less and less_equal)
            _broadcast(_greater, a, a_strides, b, b_strides, out, shape)
        elif op == "greater_equal":
            _broadcast(_greater_equal, a, a_strides, b, b_strides, out, shape)
        elif op == "logical_and":
            _broadcast(_logical_and, a, a_strides, b, b_strides, out, shape)
        elif op == "logical_or":
            _broadcast(_logical_or, a, a_strides, b, b_strides, out, shape)
        elif op == "logical_xor":
            _broadcast(_logical_xor, a, a_strides, b, b_strides, out, shape)

    return compare_op


# exp, log, sin... of dense float32/float64 operands run through oneMKL's VML where it loads
# and beats these kernels (mkl_vml: its table of ops and timings)
unary = LibraryFirst(
    mkl_vml.unary,
    OpKernel(
        "unary",
        opcodes.UNARY_OPS,
        _unary,
        "out[i] = f(x[i]) for the unary op ``op`` (a code of UNARY_OPS).",
        streamed=(_unary_streamed, 1),
    ),
)
unary_backward = OpKernel(
    "unary_backward",
    opcodes.UNARY_BACKWARD_OPS,
    _unary_backward,
    """grad_in[i] = grad_out[i] * f'(x[i]) for ``op`` (a code of UNARY_BACKWARD_OPS); x is the
    forward input.""",
    streamed=(_unary_backward_streamed, 2),
)


def _binary_library(*args) -> bool:
    """float32 power by the AVX-512 kernel where the CPU has it, else ops VML takes (on this
    CPU's vendor), else dense float32/float64 power by ``pow_blocks``."""
    return pow_avx512.binary(*args) or mkl_vml.binary(*args) or pow_blocks.binary(*args)


binary = LibraryFirst(
    _binary_library,
    OpKernel(
        "binary",
        {n: c for n, c in opcodes.BINARY_OPS.items() if c not in opcodes.BINARY_MATH},
        _binary,
        """out = op(a, b) broadcast over ``shape`` (a code of BINARY_OPS; strides 0 on
        broadcast axes).""",
        streamed=(_binary_streamed, 4),
    ),
)
binary_math = LibraryFirst(
    mkl_vml.binary,
    OpKernel(
        "binary_math",
        {n: c for n, c in opcodes.BINARY_OPS.items() if c in opcodes.BINARY_MATH},
        _binary_math,
        """out = op(a, b) broadcast over ``shape`` for the floating-point functions of two
        arguments (atan2, copysign, hypot, logaddexp: codes of BINARY_MATH). A kernel of its
        own: ``binary`` compiles for every dtype, and these only for floats, when first
        used.""",
    ),
)
# a > b runs as b < a, a >= b as b <= a: four order kernels a dtype, not six
compare = Mirrored(
    OpKernel(
        "compare",
        opcodes.COMPARE_OPS,
        _compare,
        "Boolean out = op(a, b) broadcast over ``shape`` (a code of COMPARE_OPS).",
    ),
    {opcodes.GREATER: opcodes.LESS, opcodes.GREATER_EQUAL: opcodes.LESS_EQUAL},
)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def axpy(alpha, x, y):
    """y[i] += alpha * x[i] in place, alpha converted to y's dtype."""
    alpha = as_type_of(alpha, y)
    for i in range(y.size):
        y[i] += alpha * x[i]
