"""Element-wise and reduction kernels that read and write bfloat16 and float16 tiles themselves.

Numba has no bfloat16 type, nor a float16 one on the CPU, so a 16-bit float tile reaches a
kernel as its uint16 bit patterns: the ``bf16_*`` kernels read uint16 arrays as bfloat16 bits,
the ``f16_*`` ones (the same loops) as float16 bits (``f16_kernels``). Each element is widened
in a register (bfloat16: its bits shifted into the upper half of a float32; float16: by integer
arithmetic; both exact), the float32 function of the op runs on it (the very scalar function
of ``scalar_math`` that the float32 kernels inline), and the result is rounded once, to
nearest even, when it is written (bfloat16 NaN to the quiet NaN of its sign, as
``bf16.bf16_narrow`` and ml_dtypes round; float16 as NumPy rounds). The result is thus the
float32 kernel's on widened copies, rounded, bit for bit, but a unary op moves 4 bytes per
element instead of the 20 of the widen / float32 kernel / narrow passes over scratch tiles.

Operands may also be float32 arrays (a scalar operand, a float32 gradient) and outputs float32
or bool (comparisons): each array is read and written as its dtype says. Reductions
accumulate as the float32 kernel does (in float64 within a tile) into float32 partials.

Each family is an ``OpKernel`` (compiled one op at a time, only for the signatures a program
uses, and cached on disk): the kernel of an op is a closure over the name of its scalar
function and of its 16-bit format (``"bf16"`` or ``"f16"``), which ``lifted`` turns into the
bits-in, bits-out function at compile time.
"""

import functools
import inspect

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from numtile import opcodes
from numtile.ops_cpu import logic, scalar_math
from numtile.ops_cpu.elementwise import _broadcast, _map, _zip
from numtile.ops_cpu.f16_kernels import f16_rounded, f16_value
from numtile.ops_cpu.fastmath import _f32_bits, _f32_from, select
from numtile.ops_cpu.helpers import inlined
from numtile.ops_cpu.per_op import OpKernel
from numtile.ops_cpu.reduction import _identity, _reduce_columns, _reduce_rows, by_layout

_SIGN = np.uint32(0x8000)
_QUIET_NAN = np.uint32(0x7FC0)
_ABS = np.uint32(0x7FFFFFFF)
_INF = np.uint32(0x7F800000)
_HALF = np.uint32(0x7FFF)
_ONE = np.uint32(1)
_SHIFT = np.uint32(16)


@inlined
def bf16_value(bits):
    """The float32 value of the bfloat16 bit pattern ``bits`` (exact)."""
    return _f32_from(np.int32(bits) << 16)


@inlined
def rounded(value):
    """The bfloat16 bits nearest the float32 ``value`` (ties to even; NaN: the quiet NaN of its
    sign), without a branch, so loops around it vectorise."""
    u = np.uint32(_f32_bits(value))
    upper = u >> _SHIFT
    nearest = (u + _HALF + (upper & _ONE)) >> _SHIFT
    return np.uint16(select((u & _ABS) > _INF, (upper & _SIGN) | _QUIET_NAN, nearest))


# each 16-bit format: (the float32 value of its bits, the bits nearest a float32)
_FORMATS = {"bf16": (bf16_value, rounded), "f16": (f16_value, f16_rounded)}


def value_of(element, fmt):
    """The float32 value of an element: the bits (uint16) of the 16-bit format ``fmt`` (a
    literal "bf16" or "f16") widened, float32 as it is."""
    raise NotImplementedError("value_of is only callable from numba-compiled code")


@overload(value_of, inline="always")
def _value_of(element, fmt):
    if not isinstance(fmt, types.StringLiteral):
        return None
    widen = _FORMATS[fmt.literal_value][0]
    if element == types.uint16:
        return lambda element, fmt: widen(element)
    if isinstance(element, (types.Float, types.Boolean)):
        return lambda element, fmt: element
    return None


def _function(name: str):
    """The scalar function ``name`` of ``scalar_math`` (or the reductions' ``_identity`` and
    ``_wide_<format>`` loads, or a predicate of ``logic``)."""
    if name == "_identity":
        return _identity
    if name.startswith("_wide_"):
        return _wide(name.removeprefix("_wide_"))
    return getattr(scalar_math, name) if hasattr(scalar_math, name) else getattr(logic, name)


@functools.cache
def _lift(name: str, fmt: str, narrow_out: bool):
    """The function of bits (or floats) of ``scalar_math.<name>``: its arguments widened from
    the format ``fmt``, its result rounded to its bits when ``narrow_out``."""
    function, round_to = _function(name), _FORMATS[fmt][1]
    arity = len(inspect.signature(function.py_func).parameters)
    if arity == 1:
        if narrow_out:
            return inlined(lambda v: round_to(function(value_of(v, fmt))))
        return inlined(lambda v: function(value_of(v, fmt)))
    if narrow_out:
        return inlined(lambda a, b: round_to(function(value_of(a, fmt), value_of(b, fmt))))
    return inlined(lambda a, b: function(value_of(a, fmt), value_of(b, fmt)))


def lifted(name, fmt, out):
    """``scalar_math.<name>`` on elements widened from ``fmt``, its result stored as ``out``'s
    elements."""
    raise NotImplementedError("lifted is only callable from numba-compiled code")


@overload(lifted, inline="always")
def _lifted(name, fmt, out):
    if not (isinstance(name, types.StringLiteral) and isinstance(fmt, types.StringLiteral)):
        return None  # typed again with the literal names the kernel's closure holds
    function = _lift(name.literal_value, fmt.literal_value, out.dtype == types.uint16)
    return lambda name, fmt, out: function


def scalar_function(name):
    """The scalar function ``name`` itself (a literal name), for the reductions' loads and
    steps."""
    raise NotImplementedError("scalar_function is only callable from numba-compiled code")


@overload(scalar_function, inline="always")
def _scalar_function(name):
    if not isinstance(name, types.StringLiteral):
        return None
    function = _function(name.literal_value)
    return lambda name: function


@functools.cache
def _wide(fmt: str):
    """How the reductions read an element of the format ``fmt``: as a float64 (exact)."""
    widen = _FORMATS[fmt][0]
    return inlined(lambda element: np.float64(widen(element)))


def _unary(op, fmt):
    """The kernel out[i] = f(x[i]) of the unary op (or predicate) ``op`` on the bits of
    ``fmt``."""
    name = f"_{op}"

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def bf16_unary_op(x, out):
        _map(lifted(name, fmt, out), x, out)

    return bf16_unary_op


def _unary_backward(op, fmt):
    """The kernel grad_in = grad_out * f'(x) of ``op`` on the bits of ``fmt`` (or float32)."""
    name = f"_{op}_backward"

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def bf16_unary_backward_op(x, grad_out, grad_in):
        _zip(lifted(name, fmt, grad_in), x, grad_out, grad_in)

    return bf16_unary_backward_op


def _broadcasting(op, fmt):
    """The broadcasting kernel out = op(a, b) (a binary or comparison op) on the bits of
    ``fmt``."""
    name = f"_{op}"

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def bf16_broadcast_op(a, a_strides, b, b_strides, out, shape):
        _broadcast(lifted(name, fmt, out), a, a_strides, b, b_strides, out, shape)

    return bf16_broadcast_op


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


def _reduction(op, fmt):
    """The kernel of the reduction ``op`` of the bits of ``fmt`` along the middle axis."""
    return by_layout(functools.partial(_reduction_loop, op, fmt))


def _reduction_loop(op, fmt, columns):
    """``_reduction``'s loop over columns (``columns``) or rows."""
    transform, combine = _REDUCTIONS[op]
    load = f"_wide_{fmt}"

    # reassoc as the float32 kernel's: sums split over SIMD lanes
    @numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
    def bf16_reduce_op(x, out, pre, n, post):
        read, step, join = (
            scalar_function(load),
            scalar_function(transform),
            scalar_function(combine),
        )
        if columns:
            _reduce_columns(read, step, join, x, out, pre, n, post)
        else:
            _reduce_rows(read, step, join, x, out, pre, n, post)

    return bf16_reduce_op


_DOCS = {
    "unary": "out[i] = f(x[i]) for the unary op ``op`` (a code of UNARY_OPS) on {} bits.",
    "unary_backward": """grad_in[i] = grad_out[i] * f'(x[i]) for ``op`` (a code of
    UNARY_BACKWARD_OPS), each array {} bits or float32.""",
    "binary": """out = op(a, b) broadcast over ``shape`` (a code of BINARY_OPS, the float
    functions of BINARY_MATH included) on {} bits; an operand may be a float32 array (a
    scalar).""",
    "predicate": """Boolean out[i] = p(x[i]) for the predicate ``op`` (a code of PREDICATE_OPS)
    of {} bits (of the value they hold, widened in a register: exact).""",
    "compare": """Boolean out = op(a, b) broadcast over ``shape`` (a code of COMPARE_OPS) of {}
    bits.""",
    "reduce_accumulate": """out[p, q] = combine(out[p, q], reduction over j of x[p, j, q]) for
    ``op`` (a code of REDUCE_OPS): x {} bits, out float32 partials.""",
}
_FAMILIES = {
    "unary": (opcodes.UNARY_OPS, _unary),
    "unary_backward": (opcodes.UNARY_BACKWARD_OPS, _unary_backward),
    "binary": (opcodes.BINARY_OPS, _broadcasting),
    "compare": (opcodes.COMPARE_OPS, _broadcasting),
    "predicate": (opcodes.PREDICATE_OPS, _unary),
    "reduce_accumulate": (opcodes.REDUCE_OPS, _reduction),
}


def _family(fmt: str, family: str, format_name: str) -> OpKernel:
    codes, build = _FAMILIES[family]
    doc = _DOCS[family].format(format_name)
    return OpKernel(f"{fmt}_{family}", codes, functools.partial(build, fmt=fmt), doc)


bf16_unary = _family("bf16", "unary", "bfloat16")
bf16_unary_backward = _family("bf16", "unary_backward", "bfloat16")
bf16_binary = _family("bf16", "binary", "bfloat16")
bf16_compare = _family("bf16", "compare", "bfloat16")
bf16_predicate = _family("bf16", "predicate", "bfloat16")
bf16_reduce_accumulate = _family("bf16", "reduce_accumulate", "bfloat16")
f16_unary = _family("f16", "unary", "float16")
f16_unary_backward = _family("f16", "unary_backward", "float16")
f16_binary = _family("f16", "binary", "float16")
f16_compare = _family("f16", "compare", "float16")
f16_predicate = _family("f16", "predicate", "float16")
f16_reduce_accumulate = _family("f16", "reduce_accumulate", "float16")
