"""Kernels of complex tiles: unary maps (``complex_part``: abs, real, imag into a real tile),
broadcasting arithmetic and equality, and the sum/prod reduction.

They are separate from the real kernels because a kernel compiles every branch of its op
switch for the dtype it gets, and max, floor or ordering have no complex meaning.
"""

import numba
import numpy as np

from numtile import complex_math, opcodes
from numtile.ops_cpu.elementwise import _broadcast, _map
from numtile.ops_cpu.helpers import inlined, inner_axis, row_offsets
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


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _annex_g_pass(a, a_strides, b, b_strides, out, shape, op):
    """Redo out = a * b (or a / b: ``op``) with annex G's functions where out or b has a part
    that is not finite (the textbook pass is right everywhere else): one strided loop,
    compiled once per dtype, called only for the tiles that need it."""
    if out.size == 0:
        return
    inner = inner_axis(shape)
    extent = shape[inner]
    for row in range(out.size // extent):
        a_start, b_start = row_offsets(row, shape, inner, a_strides, b_strides)
        for j in range(extent):
            z = a[0] if a.size == 1 else a[a_start + j * a_strides[inner]]
            w = b[0] if b.size == 1 else b[b_start + j * b_strides[inner]]
            i = row * extent + j
            v = out[i]
            if np.isfinite(v.real) and np.isfinite(v.imag):
                if np.isfinite(w.real) and np.isfinite(w.imag):
                    continue
            out[i] = _cdivide(z, w) if op == opcodes.DIVIDE else _cmultiply(z, w)


_reciprocal = inlined(lambda v: _cdivide(1 + 0j, v))

_conj = inlined(lambda v: v.conjugate())
_real = inlined(lambda v: v.real)
_imag = inlined(lambda v: v.imag)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def complex_unary(x, out, op):
    """out[i] = f(x[i]) for ``op`` (a code of COMPLEX_UNARY_OPS but abs, real, imag) of a
    complex tile, into a complex tile."""
    if op == opcodes.COMPLEX_NEGATIVE:
        _map(_negative, x, out)
    elif op == opcodes.COMPLEX_EXP:
        _map(_exp, x, out)
    elif op == opcodes.COMPLEX_LOG:
        _map(_log, x, out)
    elif op == opcodes.COMPLEX_SQRT:
        _map(_sqrt, x, out)
    elif op == opcodes.COMPLEX_SQUARE:
        _map(_square, x, out)
    elif op == opcodes.COMPLEX_RECIPROCAL:
        _map(_reciprocal, x, out)
    elif op == opcodes.COMPLEX_CONJ:
        _map(_conj, x, out)
    else:
        raise ValueError("complex_unary: unknown op code")


_cexpm1, _clog1p, _clog2, _clog10 = _math.expm1, _math.log1p, _math.log2, _math.log10
_csin, _ccos, _ctan = _math.sin, _math.cos, _math.tan
_csinh, _ccosh, _ctanh = _math.sinh, _math.cosh, _math.tanh
_csign, _cround = _math.sign, _math.round
_casin, _cacos, _catan = _math.asin, _math.acos, _math.atan
_casinh, _cacosh, _catanh = _math.asinh, _math.acosh, _math.atanh


@numba.njit(nogil=True, cache=True, error_model="numpy")
def complex_math_unary(x, out, op):
    """out[i] = f(x[i]) of a complex tile for the functions of ``numtile.complex_math`` (codes
    of COMPLEX_MATH; annex G's special values). A kernel of its own, compiled when first used."""
    if op == opcodes.COMPLEX_EXPM1:
        _map(_cexpm1, x, out)
    elif op == opcodes.COMPLEX_LOG1P:
        _map(_clog1p, x, out)
    elif op == opcodes.COMPLEX_LOG2:
        _map(_clog2, x, out)
    elif op == opcodes.COMPLEX_LOG10:
        _map(_clog10, x, out)
    elif op == opcodes.COMPLEX_SIN:
        _map(_csin, x, out)
    elif op == opcodes.COMPLEX_COS:
        _map(_ccos, x, out)
    elif op == opcodes.COMPLEX_TAN:
        _map(_ctan, x, out)
    elif op == opcodes.COMPLEX_SINH:
        _map(_csinh, x, out)
    elif op == opcodes.COMPLEX_COSH:
        _map(_ccosh, x, out)
    elif op == opcodes.COMPLEX_TANH:
        _map(_ctanh, x, out)
    elif op == opcodes.COMPLEX_SIGN:
        _map(_csign, x, out)
    elif op == opcodes.COMPLEX_ROUND:
        _map(_cround, x, out)
    elif op == opcodes.COMPLEX_ASIN:
        _map(_casin, x, out)
    elif op == opcodes.COMPLEX_ACOS:
        _map(_cacos, x, out)
    elif op == opcodes.COMPLEX_ATAN:
        _map(_catan, x, out)
    elif op == opcodes.COMPLEX_ASINH:
        _map(_casinh, x, out)
    elif op == opcodes.COMPLEX_ACOSH:
        _map(_cacosh, x, out)
    elif op == opcodes.COMPLEX_ATANH:
        _map(_catanh, x, out)
    else:
        raise ValueError("complex_math_unary: unknown op code")


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
    elif _complex_binary(a, a_strides, b, b_strides, out, shape, op):
        _annex_g_pass(a, a_strides, b, b_strides, out, shape, op)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _complex_binary(a, a_strides, b, b_strides, out, shape, op):
    # the textbook forms, which vectorise; True where a tile needs annex G's pass
    needed = False
    if op == opcodes.ADD:
        _broadcast(_add, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.SUBTRACT:
        _broadcast(_subtract, a, a_strides, b, b_strides, out, shape)
    elif op == opcodes.MULTIPLY:
        _broadcast(_multiply, a, a_strides, b, b_strides, out, shape)
        needed = _any_not_finite(out)
    elif op == opcodes.DIVIDE:
        _broadcast(_smith, a, a_strides, b, b_strides, out, shape)
        needed = _any_not_finite(out) or _any_not_finite(b)
    else:
        raise ValueError("complex_binary: unknown op code")
    return needed


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
