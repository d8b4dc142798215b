"""Kernels of complex tiles: unary maps (``complex_part``: abs, real, imag into a real tile),
broadcasting arithmetic and equality, and the sum/prod reduction.

They are separate from the real kernels because a kernel compiles every branch of its op
switch for the dtype it gets, and max, floor or ordering have no complex meaning. The unary
maps and the arithmetic are ``OpKernel``s, compiled one op at a time: a program that takes
the complex ``exp`` no longer compiles annex G's eighteen functions of ``complex_math``.
"""

import numba
import numpy as np

from numtile import complex_math, opcodes
from numtile.ops_cpu.elementwise import _broadcast, _map
from numtile.ops_cpu.helpers import by_name, inlined, inner_axis, row_offsets
from numtile.ops_cpu.per_op import OpKernel
from numtile.ops_cpu.scalar_math import (
    _add,
    _equal,
    _multiply,
    _negative,
    _not_equal,
    _square,
    _subtract,
)

_abs = inlined(lambda v: abs(v))

_log = inlined(lambda v: np.log(v))
_sqrt = inlined(lambda v: np.sqrt(v))


_math = complex_math.build(inlined)
_cmultiply, _cdivide = _math.multiply, _math.divide  # annex G's recovery of infinities
_smith = _math.smith
_exp = _math.exp  # annex G's cexp
_cpower = _math.power  # exp(w * log(z)) with annex G's exp, log and multiply


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _power(z, w):
    # called, not inlined: inlined into the four broadcast loops it took ~4x the compile time
    return _cpower(z, w)


@inlined
def _any_not_finite(values):
    # no early exit, an integer "or": the loop vectorises (x - x is NaN for inf and NaN only)
    found = False
    for v in values:
        difference = (v.real - v.real) + (v.imag - v.imag)
        found |= difference != difference
    return found


@inlined
def _annex_g(z, w, v, op):
    """v (the textbook z * w or z / w: ``op``), or annex G's where v or w has a part that is
    not finite."""
    if np.isfinite(v.real) and np.isfinite(v.imag) and np.isfinite(w.real) and np.isfinite(w.imag):
        return v
    return _cdivide(z, w) if op == opcodes.DIVIDE else _cmultiply(z, w)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _annex_g_pass(a, a_strides, b, b_strides, out, shape, op):
    """Redo out = a * b (or a / b: ``op``) with annex G's functions where out or b has a part
    that is not finite (the textbook pass is right everywhere else): one strided loop,
    compiled once per dtype, called only for the tiles that need it."""
    if out.size == 0:
        return
    if shape.size == 0:  # a 0-d tile: one element, no axis to walk
        out[0] = _annex_g(a[0], b[0], out[0], op)
        return
    inner = inner_axis(shape)
    extent = shape[inner]
    for row in range(out.size // extent):
        a_start, b_start = row_offsets(row, shape, inner, a_strides, b_strides)
        for j in range(extent):
            z = a[0] if a.size == 1 else a[a_start + j * a_strides[inner]]
            w = b[0] if b.size == 1 else b[b_start + j * b_strides[inner]]
            i = row * extent + j
            out[i] = _annex_g(z, w, out[i], op)


_reciprocal = inlined(lambda v: _cdivide(1 + 0j, v))

_conj = inlined(lambda v: v.conjugate())
_real = inlined(lambda v: v.real)
_imag = inlined(lambda v: v.imag)


# the scalar function of each op of the kernels built per op, by name (``part``)
_UNARY = {
    "negative": _negative,
    "exp": _exp,
    "log": _log,
    "sqrt": _sqrt,
    "square": _square,
    "reciprocal": _reciprocal,
    "conj": _conj,
}
_FUNCTIONS = {**_UNARY, **{name: getattr(_math, name) for name in opcodes.COMPLEX_MATH}}
_FUNCTIONS.update(add=_add, subtract=_subtract, multiply=_multiply, divide=_smith)
part = by_name(_FUNCTIONS.__getitem__)


def _complex_map(op):
    """The kernel out[i] = f(x[i]) of the complex op named ``op`` (of ``_UNARY`` or
    COMPLEX_MATH): a closure over the name, so one op compiles, not the family."""

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def complex_op(x, out):
        _map(part(op), x, out)

    return complex_op


complex_unary = OpKernel(
    "complex_unary",
    {name: opcodes.COMPLEX_UNARY_OPS[name] for name in _UNARY},
    _complex_map,
    """out[i] = f(x[i]) for ``op`` (a code of COMPLEX_UNARY_OPS but abs, real, imag) of a
    complex tile, into a complex tile; each op compiled when first used.""",
)


complex_math_unary = OpKernel(
    "complex_math_unary",
    opcodes.COMPLEX_MATH,
    _complex_map,
    """out[i] = f(x[i]) of a complex tile for the functions of ``numtile.complex_math`` (codes
    of COMPLEX_MATH; annex G's special values), each op compiled when first used.""",
)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def complex_part(x, out, op):
    """out[i] = abs, real part or imaginary part of x[i] (COMPLEX_ABS, COMPLEX_REAL,
    COMPLEX_IMAG) of a complex tile, into a real tile."""
    if op == opcodes.COMPLEX_ABS:
        _map(_abs, x, out)
    elif op == opcodes.COMPLEX_REAL:
        _map(_real, x, out)
    elif op == opcodes.COMPLEX_IMAG:
        _map(_imag, x, out)
    else:
        raise ValueError("complex_part: unknown op code")


def complex_binary(a, a_strides, b, b_strides, out, shape, op):
    """out = op(a, b) of complex tiles broadcast over ``shape`` (add, subtract, multiply,
    divide, power: codes of BINARY_OPS); multiply and divide with annex G's recovery of
    infinities, compiled on first need (a tile with an infinite or NaN part); power, the
    standard's ``exp(b * log(a))``, a kernel of its own (compiled when first used)."""
    if op == opcodes.POWER:
        _complex_power(a, a_strides, b, b_strides, out, shape)
        return
    # in place (x *= y, x /= 2): the textbook pass overwrites the operand that annex G's pass
    # reads again, so that pass reads a copy of it
    a_in = a.copy() if np.may_share_memory(a, out) else a
    b_in = b.copy() if np.may_share_memory(b, out) else b
    if _complex_binary(a, a_strides, b, b_strides, out, shape, op):
        _annex_g_pass(a_in, a_strides, b_in, b_strides, out, shape, op)


def _complex_arithmetic(op):
    """The kernel out = a op b of complex tiles, in the textbook form, which vectorises
    (``op``: add, subtract, multiply, divide); it returns True where the tile needs annex G's
    pass."""

    @numba.njit(nogil=True, cache=True, error_model="numpy")
    def arithmetic_op(a, a_strides, b, b_strides, out, shape):
        _broadcast(part(op), a, a_strides, b, b_strides, out, shape)
        if op == "multiply":
            return _any_not_finite(out)
        if op == "divide":
            return _any_not_finite(out) or _any_not_finite(b)
        return False

    return arithmetic_op


_complex_binary = OpKernel(
    "complex_binary",
    {name: getattr(opcodes, name.upper()) for name in ("add", "subtract", "multiply", "divide")},
    _complex_arithmetic,
    "out = a op b of complex tiles (textbook forms); True where annex G's pass is needed.",
)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _complex_power(a, a_strides, b, b_strides, out, shape):
    _broadcast(_power, a, a_strides, b, b_strides, out, shape)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def complex_compare(a, a_strides, b, b_strides, out, shape, op):
    """Boolean out = op(a, b) of complex tiles (equal, not_equal: codes of COMPARE_OPS)."""
    if op == opcodes.EQUAL:
        _broadcast(_equal, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.NOT_EQUAL:
        _broadcast(_not_equal, a, a_strides, b, b_strides, out, shape)
    else:
        raise ValueError("complex_compare: unknown op code")


@numba.njit(nogil=True, cache=True, error_model="numpy")
def complex_reduce_accumulate(x, out, pre, n, post, op):
    """out[p, q] = out[p, q] (+ or *) the sum or product over j of x[p, j, q] (SUM or PROD),
    accumulated in complex128; products are annex G's (successive ``multiply``, as the standard
    defines ``prod``'s special cases)."""
    for p in range(pre):
        for q in range(post):
            if op == opcodes.PROD:
                partial = 1 + 0j
                for j in range(n):
                    partial = _cmultiply(partial, x[(p * n + j) * post + q])
                out[p * post + q] = _cmultiply(out[p * post + q], partial)
            else:
                partial = 0j
                for j in range(n):
                    partial = partial + x[(p * n + j) * post + q]
                out[p * post + q] = out[p * post + q] + partial
