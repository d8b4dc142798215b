"""Element-wise and reduction kernels that read and write bfloat16 tiles themselves.

Numba has no bfloat16 type, so a bfloat16 tile reaches a kernel as its uint16 bit patterns:
in these kernels a uint16 array always holds bfloat16 bits. Each element is widened in a
register (its bits shifted into the upper half of a float32: exact), the float32 function of
the op runs on it (the very scalar function of ``scalar_math`` that the float32 kernels
inline), and the result is rounded once, to nearest even, when it is written (NaN to the
quiet NaN of its sign, as ``bf16.bf16_narrow`` and ml_dtypes round). The result is thus the
float32 kernel's on widened copies, rounded, bit for bit, but a unary op moves 4 bytes per
element instead of the 20 of the widen / float32 kernel / narrow passes over scratch tiles.

Operands may also be float32 arrays (a scalar operand, a float32 gradient) and outputs float32
or bool (comparisons): each array is read and written as its dtype says. Reductions
accumulate as the float32 kernel does (in float64 within a tile) into float32 partials.

Each family is an ``OpKernel`` (compiled one op at a time, only for the signatures a program
uses, and cached on disk): the kernel of an op is a closure over the name of its scalar
function, which ``lifted`` turns into the bits-in, bits-out function at compile time.
"""

import functools
import inspect

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from numtile import opcodes
from numtile.ops_cpu import scalar_math
from numtile.ops_cpu.elementwise import _broadcast, _map, _zip
from numtile.ops_cpu.fastmath import _f32_bits, _f32_from, select
from numtile.ops_cpu.helpers import inlined
from numtile.ops_cpu.per_op import OpKernel
from numtile.ops_cpu.reduction import _identity, _reduce

_SIGN = np.uint32(0x8000)
_QUIET_NAN = np.uint32(0x7FC0)
_ABS = np.uint32(0x7FFFFFFF)
_INF = np.uint32(0x7F800000)
_HALF = np.uint32(0x7FFF)
_ONE = np.uint32(1)
_SHIFT = np.uint32(16)


def value_of(element):
    """The float32 value of an element: bfloat16 bits (uint16) widened, float32 as it is."""
    raise NotImplementedError("value_of is only callable from numba-compiled code")


@overload(value_of, inline="always")
def _value_of(element):
    if element == types.uint16:
        return lambda element: _f32_from(np.int32(element) << 16)
    if isinstance(element, (types.Float, types.Boolean)):
        return lambda element: element
    return None


@inlined
def rounded(value):
    """The bfloat16 bits nearest the float32 ``value`` (ties to even; NaN: the quiet NaN of its
    sign), without a branch, so loops around it vectorise."""
    u = np.uint32(_f32_bits(value))
    upper = u >> _SHIFT
    nearest = (u + _HALF + (upper & _ONE)) >> _SHIFT
    return np.uint16(select((u & _ABS) > _INF, (upper & _SIGN) | _QUIET_NAN, nearest))


def _function(name: str):
    """The scalar function ``name`` of ``scalar_math`` (or the reductions' ``_identity``)."""
    return _identity if name == "_identity" else getattr(scalar_math, name)


@functools.cache
def _lift(name: str, narrow_out: bool):
    """The function of bits (or floats) of ``scalar_math.<name>``: its arguments widened, its
    result rounded to bfloat16 bits when ``narrow_out``."""
    function = _function(name)
    arity = len(inspect.signature(function.py_func).parameters)
    if arity == 1:
        if narrow_out:
            return inlined(lambda v: rounded(function(value_of(v))))
        return inlined(lambda v: function(value_of(v)))
    if narrow_out:
        return inlined(lambda a, b: rounded(function(value_of(a), value_of(b))))
    return inlined(lambda a, b: function(value_of(a), value_of(b)))


def lifted(name, out):
    """``scalar_math.<name>`` on widened elements, its result stored as ``out``'s elements."""
    raise NotImplementedError("lifted is only callable from numba-compiled code")


@overload(lifted, inline="always")
def _lifted(name, out):
    if not isinstance(name, types.StringLiteral):
        return None  # typed again with the literal name the kernel's closure holds
    function = _lift(name.literal_value, out.dtype == types.uint16)
    return lambda name, out: function


def scalar_function(name):
    """The scalar function ``name`` itself (a literal name), for the reductions' steps."""
    raise NotImplementedError("scalar_function is only callable from numba-compiled code")


@overload(scalar_function, inline="always")
def _scalar_function(name):
    if not isinstance(name, types.StringLiteral):
        return None
    function = _function(name.literal_value)
    return lambda name: function


def _unary(op):
    """The kernel out[i] = f(x[i]) of the unary op ``op`` on bfloat16 bits."""
    name = f"_{op}"

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def bf16_unary_op(x, out):
        _map(lifted(name, out), x, out)

    return bf16_unary_op


def _unary_backward(op):
    """The kernel grad_in = grad_out * f'(x) of ``op`` on bfloat16 bits (or float32)."""
    name = f"_{op}_backward"

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def bf16_unary_backward_op(x, grad_out, grad_in):
        _zip(lifted(name, grad_in), x, grad_out, grad_in)

    return bf16_unary_backward_op


def _broadcasting(op):
    """The broadcasting kernel out = op(a, b) (a binary or comparison op) on bfloat16 bits."""
    name = f"_{op}"

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def bf16_broadcast_op(a, a_strides, b, b_strides, out, shape):
        _broadcast(lifted(name, out), a, a_strides, b, b_strides, out, shape)

    return bf16_broadcast_op


@inlined
def _wide(element):
    return np.float64(value_of(element))


# (transform, combine) of each reduction: scalar_math names
_REDUCTIONS = {
    "sum": ("_identity", "_add"),
    "max": ("_identity", "_maximum"),
    "min": ("_identity", "_minimum"),
    "prod": ("_identity", "_multiply"),
    "sumsq": ("_square", "_add"),
    "sumabs": ("_abs", "_add"),
    "maxabs": ("_abs", "_maximum"),
}


def _reduction(op):
    """The kernel of the reduction ``op`` of bfloat16 bits along the middle axis."""
    transform, combine = _REDUCTIONS[op]

    # reassoc as the float32 kernel's: sums split over SIMD lanes
    @numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
    def bf16_reduce_op(x, out, pre, n, post):
        _reduce(_wide, scalar_function(transform), scalar_function(combine), x, out, pre, n, post)

    return bf16_reduce_op


bf16_unary = OpKernel(
    "bf16_unary",
    opcodes.UNARY_OPS,
    _unary,
    "out[i] = f(x[i]) for the unary op ``op`` (a code of UNARY_OPS) on bfloat16 bits.",
)
bf16_unary_backward = OpKernel(
    "bf16_unary_backward",
    opcodes.UNARY_BACKWARD_OPS,
    _unary_backward,
    """grad_in[i] = grad_out[i] * f'(x[i]) for ``op`` (a code of UNARY_BACKWARD_OPS), each array
    bfloat16 bits or float32.""",
)
bf16_binary = OpKernel(
    "bf16_binary",
    opcodes.BINARY_OPS,
    _broadcasting,
    """out = op(a, b) broadcast over ``shape`` (a code of BINARY_OPS, the float functions of
    BINARY_MATH included) on bfloat16 bits; an operand may be a float32 array (a scalar).""",
)
bf16_compare = OpKernel(
    "bf16_compare",
    opcodes.COMPARE_OPS,
    _broadcasting,
    "Boolean out = op(a, b) broadcast over ``shape`` (a code of COMPARE_OPS) of bfloat16 bits.",
)
bf16_reduce_accumulate = OpKernel(
    "bf16_reduce_accumulate",
    opcodes.REDUCE_OPS,
    _reduction,
    """out[p, q] = combine(out[p, q], reduction over j of x[p, j, q]) for ``op`` (a code of
    REDUCE_OPS): x bfloat16 bits, out float32 partials.""",
)
