"""The codelets of the tiled ops: each wraps one ``ops_cpu`` kernel for the runtime.

A wrapper flattens tiles to the 1-D views the kernels take and passes the shapes and
strides the tiled op computed. It is written once for both backends: ``ops`` is
``numtile.ops_cpu`` on a CPU worker and ``numtile.ops_cuda`` (stream bound) on a GPU.
"""

from __future__ import annotations

import math

import numpy as np

from numtile import opcodes
from numtile.runtime import Codelet
from numtile.tiletensor.layout import c_strides

_POWER = opcodes.BINARY_OPS["power"]


def _size(shape) -> int:
    return math.prod(shape)


def _fill(ops, out, value):
    ops.fill(out.reshape(-1), value)


def _copy_strided(ops, src, dst, src_offset, src_strides, dst_offset, dst_strides, shape):
    ops.copy_strided(
        src.reshape(-1), src_offset, src_strides, dst.reshape(-1), dst_offset, dst_strides, shape
    )


def _cast(ops, x, out):
    ops.cast(x.reshape(-1), out.reshape(-1))


def _unary(ops, x, out, op):
    ops.unary(x.reshape(-1), out.reshape(-1), op)


def _unary_backward(ops, x, grad_out, grad_in, op):
    ops.unary_backward(x.reshape(-1), grad_out.reshape(-1), grad_in.reshape(-1), op)


def _binary(ops, a, b, out, op, a_strides, b_strides, shape):
    if op == _POWER and out.dtype.kind == "i" and (ops.to_host(b) < 0).any():
        raise ValueError("integers to negative integer powers are not allowed")
    ops.binary(a.reshape(-1), a_strides, b.reshape(-1), b_strides, out.reshape(-1), shape, op)


def _binary_scalar(ops, a, out, scalar, op, a_strides, scalar_strides, shape, scalar_first):
    if scalar_first:
        ops.binary(scalar, scalar_strides, a.reshape(-1), a_strides, out.reshape(-1), shape, op)
    else:
        ops.binary(a.reshape(-1), a_strides, scalar, scalar_strides, out.reshape(-1), shape, op)


def _compare(ops, a, b, out, op, a_strides, b_strides, shape):
    ops.compare(a.reshape(-1), a_strides, b.reshape(-1), b_strides, out.reshape(-1), shape, op)


def _compare_scalar(ops, a, out, scalar, op, a_strides, scalar_strides, shape, scalar_first):
    if scalar_first:
        ops.compare(scalar, scalar_strides, a.reshape(-1), a_strides, out.reshape(-1), shape, op)
    else:
        ops.compare(a.reshape(-1), a_strides, scalar, scalar_strides, out.reshape(-1), shape, op)


def _reduce(ops, x, out, op, move_axes, pre, n, post):
    if move_axes is not None:  # reduced axes are not adjacent: gather them last first
        order = [i for i in range(x.ndim) if i not in move_axes] + list(move_axes)
        shape = [x.shape[i] for i in order]
        strides = c_strides(x.shape)
        moved = ops.empty(tuple(shape), x.dtype)
        ops.copy_strided(
            x.reshape(-1),
            0,
            np.array([strides[i] for i in order], np.int64),
            moved.reshape(-1),
            0,
            np.array(c_strides(shape), np.int64),
            np.array(shape, np.int64),
        )
        x = moved
    ops.reduce_accumulate(x.reshape(-1), out.reshape(-1), pre, n, post, op)


def _scale(ops, x, out, alpha):
    ops.scale(x.reshape(-1), alpha, out.reshape(-1))


def _random(ops, out, shape, start, global_strides, seed, distribution, a, b, upper):
    ops.random_fill(out.reshape(-1), shape, start, global_strides, seed, distribution, a, b, upper)


def _arange(ops, out, first, step):
    ops.arange_fill(out.reshape(-1), first, step)


def _softmax(ops, x, out, pre, n, post):
    ops.softmax(x.reshape(-1), out.reshape(-1), pre, n, post)


fill = Codelet("fill", kernel=_fill)
copy_strided = Codelet("copy_strided", kernel=_copy_strided)
cast = Codelet("cast", kernel=_cast)
unary = Codelet("unary", kernel=_unary, flops=lambda x, out, op: _size(out))
unary_backward = Codelet("unary_backward", kernel=_unary_backward)
binary = Codelet("binary", kernel=_binary, flops=lambda a, b, out, *args: _size(out))
binary_scalar = Codelet(
    "binary_scalar", kernel=_binary_scalar, flops=lambda a, out, *args: _size(out)
)
compare = Codelet("compare", kernel=_compare)
compare_scalar = Codelet("compare_scalar", kernel=_compare_scalar)
reduce = Codelet("reduce", kernel=_reduce, flops=lambda x, out, *args: _size(x))
scale = Codelet("scale", kernel=_scale, flops=lambda x, out, alpha: _size(out))
random = Codelet("random", kernel=_random)
arange = Codelet("arange", kernel=_arange)
softmax = Codelet("softmax", kernel=_softmax, flops=lambda x, out, *args: 5 * _size(x))
