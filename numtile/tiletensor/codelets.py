"""The codelets of the tiled ops: each wraps one ``ops_cpu`` kernel for the runtime.

A wrapper flattens tiles to the 1-D views the kernels take and passes the shapes and
strides the tiled op computed. This module is the one place the backends meet.
"""

from __future__ import annotations

import math

import numpy as np

from numtile import ops_cpu
from numtile.runtime import Codelet

_POWER = ops_cpu.BINARY_OPS["power"]


def _size(shape) -> int:
    return math.prod(shape)


def _fill(out, value):
    ops_cpu.fill(out.reshape(-1), value)


def _copy_strided(src, dst, src_offset, src_strides, dst_offset, dst_strides, shape):
    ops_cpu.copy_strided(
        src.reshape(-1), src_offset, src_strides, dst.reshape(-1), dst_offset, dst_strides, shape
    )


def _cast(x, out):
    ops_cpu.cast(x.reshape(-1), out.reshape(-1))


def _unary(x, out, op):
    ops_cpu.unary(x.reshape(-1), out.reshape(-1), op)


def _unary_backward(x, grad_out, grad_in, op):
    ops_cpu.unary_backward(x.reshape(-1), grad_out.reshape(-1), grad_in.reshape(-1), op)


def _binary(a, b, out, op, a_strides, b_strides, shape):
    if op == _POWER and out.dtype.kind == "i" and (b < 0).any():
        raise ValueError("integers to negative integer powers are not allowed")
    ops_cpu.binary(a.reshape(-1), a_strides, b.reshape(-1), b_strides, out.reshape(-1), shape, op)


def _binary_scalar(a, out, scalar, op, a_strides, scalar_strides, shape, scalar_first):
    if scalar_first:
        ops_cpu.binary(scalar, scalar_strides, a.reshape(-1), a_strides, out.reshape(-1), shape, op)
    else:
        ops_cpu.binary(a.reshape(-1), a_strides, scalar, scalar_strides, out.reshape(-1), shape, op)


def _compare(a, b, out, op, a_strides, b_strides, shape):
    ops_cpu.compare(a.reshape(-1), a_strides, b.reshape(-1), b_strides, out.reshape(-1), shape, op)


def _compare_scalar(a, out, scalar, op, a_strides, scalar_strides, shape, scalar_first):
    if scalar_first:
        ops_cpu.compare(
            scalar, scalar_strides, a.reshape(-1), a_strides, out.reshape(-1), shape, op
        )
    else:
        ops_cpu.compare(
            a.reshape(-1), a_strides, scalar, scalar_strides, out.reshape(-1), shape, op
        )


def _reduce(x, out, op, move_axes, pre, n, post):
    if move_axes is not None:  # reduced axes are not adjacent: gather them last first
        x = np.ascontiguousarray(np.moveaxis(x, move_axes, range(x.ndim - len(move_axes), x.ndim)))
    ops_cpu.reduce_accumulate(x.reshape(-1), out.reshape(-1), pre, n, post, op)


def _scale(x, out, alpha):
    ops_cpu.scale(x.reshape(-1), alpha, out.reshape(-1))


def _random(out, shape, start, global_strides, seed, distribution, a, b, upper):
    ops_cpu.random_fill(
        out.reshape(-1), shape, start, global_strides, seed, distribution, a, b, upper
    )


def _arange(out, first, step):
    ops_cpu.arange_fill(out.reshape(-1), first, step)


def _softmax(x, out, pre, n, post):
    ops_cpu.softmax(x.reshape(-1), out.reshape(-1), pre, n, post)


fill = Codelet("fill", cpu=_fill)
copy_strided = Codelet("copy_strided", cpu=_copy_strided)
cast = Codelet("cast", cpu=_cast)
unary = Codelet("unary", cpu=_unary, flops=lambda x, out, op: _size(out))
unary_backward = Codelet("unary_backward", cpu=_unary_backward)
binary = Codelet("binary", cpu=_binary, flops=lambda a, b, out, *args: _size(out))
binary_scalar = Codelet("binary_scalar", cpu=_binary_scalar, flops=lambda a, out, *args: _size(out))
compare = Codelet("compare", cpu=_compare)
compare_scalar = Codelet("compare_scalar", cpu=_compare_scalar)
reduce = Codelet("reduce", cpu=_reduce, flops=lambda x, out, *args: _size(x))
scale = Codelet("scale", cpu=_scale, flops=lambda x, out, alpha: _size(out))
random = Codelet("random", cpu=_random)
arange = Codelet("arange", cpu=_arange)
softmax = Codelet("softmax", cpu=_softmax, flops=lambda x, out, *args: 5 * _size(x))
