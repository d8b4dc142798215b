"""CUDA twins of ``ops_cpu.complex``: unary maps, arithmetic, equality and sum/prod of
complex tiles, written over real math (``numtile.complex_math``; log and sqrt through their
polar forms).
"""

from __future__ import annotations

import math

from numba import cuda

from numtile import complex_math, opcodes
from numtile.ops_cuda.elementwise import (
    _broadcast,
    _check_op,
    _operand_dtype,
    binary_kernel_of,
    compare_kernel_of,
)
from numtile.ops_cuda.launch import DeviceArray, device_function, launch

__all__ = [
    "complex_binary",
    "complex_compare",
    "complex_math_unary",
    "complex_part",
    "complex_reduce_accumulate",
    "complex_unary",
]


@cuda.jit(device=True)
def _log(z):
    return complex(math.log(math.hypot(z.real, z.imag)), math.atan2(z.imag, z.real))


@cuda.jit(device=True)
def _sqrt(z):
    # the principal root; the branch cut on the negative real axis follows the sign of imag
    x, y = z.real, z.imag
    if x == 0 and y == 0:
        return complex(0.0, y)
    r = math.sqrt((math.hypot(x, y) + abs(x)) / 2)
    if x >= 0:
        return complex(r, y / (2 * r))
    return complex(abs(y) / (2 * r), math.copysign(r, y))


_math = complex_math.build(device_function)
_cmultiply, _cdivide = _math.multiply, _math.divide  # annex G's recovery of infinities
_exp, _power = _math.exp, _math.power  # annex G's cexp; exp(w * log(z)) with annex G's parts


@cuda.jit
def _unary_kernel(x, out, op):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = x[i]
        if op == opcodes.COMPLEX_NEGATIVE:
            out[i] = -v
        elif op == opcodes.COMPLEX_EXP:
            out[i] = _exp(v)
        elif op == opcodes.COMPLEX_LOG:
            out[i] = _log(v)
        elif op == opcodes.COMPLEX_SQRT:
            out[i] = _sqrt(v)
        elif op == opcodes.COMPLEX_SQUARE:
            out[i] = v * v
        elif op == opcodes.COMPLEX_RECIPROCAL:
            out[i] = _cdivide(complex(1.0, 0.0), v)
        elif op == opcodes.COMPLEX_CONJ:
            out[i] = v.conjugate()


_cexpm1, _clog1p, _clog2, _clog10 = _math.expm1, _math.log1p, _math.log2, _math.log10
_csin, _ccos, _ctan = _math.sin, _math.cos, _math.tan
_csinh, _ccosh, _ctanh = _math.sinh, _math.cosh, _math.tanh
_csign, _cround = _math.sign, _math.round
_casin, _cacos, _catan = _math.asin, _math.acos, _math.atan
_casinh, _cacosh, _catanh = _math.asinh, _math.acosh, _math.atanh


@cuda.jit
def _math_kernel(x, out, op):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = x[i]
        if op == opcodes.COMPLEX_EXPM1:
            out[i] = _cexpm1(v)
        elif op == opcodes.COMPLEX_LOG1P:
            out[i] = _clog1p(v)
        elif op == opcodes.COMPLEX_LOG2:
            out[i] = _clog2(v)
        elif op == opcodes.COMPLEX_LOG10:
            out[i] = _clog10(v)
        elif op == opcodes.COMPLEX_SIN:
            out[i] = _csin(v)
        elif op == opcodes.COMPLEX_COS:
            out[i] = _ccos(v)
        elif op == opcodes.COMPLEX_TAN:
            out[i] = _ctan(v)
        elif op == opcodes.COMPLEX_SINH:
            out[i] = _csinh(v)
        elif op == opcodes.COMPLEX_COSH:
            out[i] = _ccosh(v)
        elif op == opcodes.COMPLEX_TANH:
            out[i] = _ctanh(v)
        elif op == opcodes.COMPLEX_SIGN:
            out[i] = _csign(v)
        elif op == opcodes.COMPLEX_ROUND:
            out[i] = _cround(v)
        elif op == opcodes.COMPLEX_ASIN:
            out[i] = _casin(v)
        elif op == opcodes.COMPLEX_ACOS:
            out[i] = _cacos(v)
        elif op == opcodes.COMPLEX_ATAN:
            out[i] = _catan(v)
        elif op == opcodes.COMPLEX_ASINH:
            out[i] = _casinh(v)
        elif op == opcodes.COMPLEX_ACOSH:
            out[i] = _cacosh(v)
        elif op == opcodes.COMPLEX_ATANH:
            out[i] = _catanh(v)


@cuda.jit
def _part_kernel(x, out, op):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = x[i]
        if op == opcodes.COMPLEX_ABS:
            out[i] = math.hypot(v.real, v.imag)
        elif op == opcodes.COMPLEX_REAL:
            out[i] = v.real
        elif op == opcodes.COMPLEX_IMAG:
            out[i] = v.imag


@cuda.jit(device=True)
def _lacking(a, b):
    """Stands in for the ops complex numbers lack (maximum, floor_divide, ordering...): the
    launchers refuse their codes, so it never runs."""
    return a


@cuda.jit(device=True)
def _never(a, b):
    return False


_binary_kernel = binary_kernel_of(
    _lacking, _lacking, _power, _lacking, _lacking, _cmultiply, _cdivide
)
_compare_kernel = compare_kernel_of(_never, _never, _never, _never, _never, _never, _never)


@cuda.jit
def _reduce_kernel(x, out, pre, n, post, op):
    # one thread per output element: complex sums are rare enough not to need a tree
    for k in range(cuda.grid(1), pre * post, cuda.gridsize(1)):
        p, q = k // post, k % post
        if op == opcodes.PROD:
            partial = complex(1.0, 0.0)
            for j in range(n):
                partial = _cmultiply(partial, x[(p * n + j) * post + q])
            out[k] = _cmultiply(out[k], partial)
        else:
            partial = complex(0.0, 0.0)
            for j in range(n):
                partial = partial + x[(p * n + j) * post + q]
            out[k] = out[k] + partial


_PARTS = (opcodes.COMPLEX_ABS, opcodes.COMPLEX_REAL, opcodes.COMPLEX_IMAG)


def complex_unary(x: DeviceArray, out: DeviceArray, op: int, *, stream=0) -> None:
    """out[i] = f(x[i]) of a complex tile (a code of opcodes.COMPLEX_UNARY_OPS but abs, real,
    imag)."""
    op = _check_op(op, opcodes.COMPLEX_UNARY_OPS, "complex_unary")
    if op in _PARTS:
        raise ValueError("complex_unary: unknown op code")
    launch(_unary_kernel, out.size, stream, x, out, op)


def complex_math_unary(x: DeviceArray, out: DeviceArray, op: int, *, stream=0) -> None:
    """out[i] = f(x[i]) of a complex tile for the functions of ``numtile.complex_math`` (codes
    of opcodes.COMPLEX_MATH)."""
    if int(op) not in opcodes.COMPLEX_MATH.values():
        raise ValueError("complex_math_unary: unknown op code")
    launch(_math_kernel, out.size, stream, x, out, int(op))


def complex_part(x: DeviceArray, out: DeviceArray, op: int, *, stream=0) -> None:
    """out[i] = abs, real or imaginary part of x[i] into a real tile."""
    if int(op) not in _PARTS:
        raise ValueError("complex_part: unknown op code")
    launch(_part_kernel, out.size, stream, x, out, int(op))


def complex_binary(a, a_strides, b, b_strides, out, shape, op: int, *, stream=0) -> None:
    """out = op(a, b) of complex tiles broadcast over ``shape`` (add, subtract, multiply, divide,
    power: codes of opcodes.BINARY_OPS)."""
    op = _check_op(op, opcodes.BINARY_OPS, "complex_binary")
    if opcodes.op_name(opcodes.BINARY_OPS, op) not in opcodes.COMPLEX_BINARY:
        raise ValueError("complex_binary: unknown op code")  # as the CPU kernel
    _operand_dtype(a, b)
    _broadcast(_binary_kernel, a, a_strides, b, b_strides, out, shape, op, stream)


def complex_compare(a, a_strides, b, b_strides, out, shape, op: int, *, stream=0) -> None:
    """Boolean out = op(a, b) of complex tiles (equal, not_equal: codes of opcodes.COMPARE_OPS)."""
    op = _check_op(op, opcodes.COMPARE_OPS, "complex_compare")
    if opcodes.op_name(opcodes.COMPARE_OPS, op) not in opcodes.COMPLEX_COMPARE:
        raise ValueError("complex_compare: unknown op code")
    _operand_dtype(a, b)
    _broadcast(_compare_kernel, a, a_strides, b, b_strides, out, shape, op, stream)


def complex_reduce_accumulate(x, out, pre, n, post, op: int, *, stream=0) -> None:
    """out[p, q] (+ or *)= the sum or product over j of x[p, j, q] (SUM or PROD)."""
    launch(_reduce_kernel, int(pre) * int(post), stream, x, out, int(pre), int(n), int(post), op)
