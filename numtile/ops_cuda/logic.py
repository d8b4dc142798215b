"""CUDA twins of ``ops_cpu.logic``: float predicates, ``where`` and bitwise ops."""

from __future__ import annotations

import math

from numba import cuda

from numtile import opcodes
from numtile.ops_cuda.elementwise import (
    _STRIDED,
    _broadcast,
    _check_op,
    _operand_dtype,
    _operands,
)
from numtile.ops_cuda.launch import DeviceArray, coalesce, host_ints, launch

__all__ = ["bitwise", "predicate", "where"]


@cuda.jit(device=True)
def _is_nan(v):
    return v != v


@cuda.jit(device=True)
def _is_inf(v):
    return not _is_nan(v) and _is_nan(v - v)


@cuda.jit
def _predicate_kernel(x, out, op):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = x[i]
        re, im = v.real, v.imag
        if op == opcodes.ISNAN:
            out[i] = _is_nan(re) or _is_nan(im)
        elif op == opcodes.ISINF:
            out[i] = _is_inf(re) or _is_inf(im)
        elif op == opcodes.ISFINITE:
            out[i] = not (_is_nan(re - re) or _is_nan(im - im))
        elif op == opcodes.SIGNBIT:
            out[i] = math.copysign(1.0, re) < 0


@cuda.jit
def _bitwise_kernel(a, a_value, a_kind, a_strides, b, b_value, b_kind, b_strides, out, shape, op):
    strided = a_kind == _STRIDED or b_kind == _STRIDED
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        x, y = _operands(
            i, shape, strided, a, a_value, a_kind, a_strides, b, b_value, b_kind, b_strides
        )
        if op == opcodes.BITWISE_AND:
            out[i] = x & y
        elif op == opcodes.BITWISE_OR:
            out[i] = x | y
        elif op == opcodes.BITWISE_XOR:
            out[i] = x ^ y
        elif op == opcodes.BITWISE_LEFT_SHIFT:
            out[i] = x << y
        elif op == opcodes.BITWISE_RIGHT_SHIFT:
            out[i] = x >> y


@cuda.jit(device=True)
def _offset(i, shape, strides):
    offset = 0
    for axis in range(len(shape) - 1, -1, -1):
        offset += (i % shape[axis]) * strides[axis]
        i //= shape[axis]
    return offset


@cuda.jit
def _where_kernel(condition, c_strides, a, a_strides, b, b_strides, out, shape):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        if condition[_offset(i, shape, c_strides)]:
            out[i] = a[_offset(i, shape, a_strides)]
        else:
            out[i] = b[_offset(i, shape, b_strides)]


def predicate(x: DeviceArray, out: DeviceArray, op: int, *, stream=0) -> None:
    """Boolean out[i] = p(x[i]) for ``op`` (a code of opcodes.PREDICATE_OPS)."""
    op = _check_op(op, opcodes.PREDICATE_OPS, "predicate")
    launch(_predicate_kernel, out.size, stream, x, out, op)


def bitwise(a, a_strides, b, b_strides, out, shape, op: int, *, stream=0) -> None:
    """out = op(a, b) broadcast over ``shape`` (a code of opcodes.BITWISE_OPS); either operand
    may be a host scalar or one-element host array."""
    op = _check_op(op, opcodes.BITWISE_OPS, "bitwise")
    _operand_dtype(a, b)
    _broadcast(_bitwise_kernel, a, a_strides, b, b_strides, out, shape, op, stream)


def where(condition, c_strides, a, a_strides, b, b_strides, out, shape, *, stream=0) -> None:
    """out = a if condition else b, the three broadcast over ``shape`` (element strides)."""
    shape = host_ints(shape, "shape")
    if out.size == 0:
        return
    strides = [host_ints(s, "strides") for s in (c_strides, a_strides, b_strides)]
    shape, strides = coalesce(shape, *strides)
    flat = (x if x.ndim == 1 else x.reshape(-1) for x in (condition, a, b))
    condition, a, b = flat
    launch(
        _where_kernel,
        out.size,
        stream,
        condition,
        strides[0],
        a,
        strides[1],
        b,
        strides[2],
        out,
        shape,
    )
