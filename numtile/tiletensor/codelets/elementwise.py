"""Codelets of the elementwise ops and generators: one per op code, named ``family:op``.

A wrapper flattens tiles to the 1-D views the kernels take and passes the shapes and
strides the tiled op computed; the op code is bound when the codelet is built.
"""

from __future__ import annotations

import math

from numtile import opcodes
from numtile.runtime import Codelet


def _size(shape) -> int:
    return math.prod(shape)


def _unary(code):
    def kernel(ops, x, out):
        ops.unary(x.reshape(-1), out.reshape(-1), code)

    return kernel


def _unary_backward(code):
    def kernel(ops, x, grad_out, grad_in):
        ops.unary_backward(x.reshape(-1), grad_out.reshape(-1), grad_in.reshape(-1), code)

    return kernel


def _binary(code):
    def kernel(ops, a, b, out, a_strides, b_strides, shape):
        if code == opcodes.POWER and out.dtype.kind == "i" and (ops.to_host(b) < 0).any():
            raise ValueError("integers to negative integer powers are not allowed")
        ops.binary(a.reshape(-1), a_strides, b.reshape(-1), b_strides, out.reshape(-1), shape, code)

    return kernel


def _with_scalar(kernel_name: str, code: int):
    """A kernel of ``ops.<kernel_name>`` (binary or compare) between a tile and a scalar,
    the scalar first or second as the op was written."""

    def kernel(ops, a, out, scalar, a_strides, scalar_strides, shape, scalar_first):
        function, a, out = getattr(ops, kernel_name), a.reshape(-1), out.reshape(-1)
        if scalar_first:
            function(scalar, scalar_strides, a, a_strides, out, shape, code)
        else:
            function(a, a_strides, scalar, scalar_strides, out, shape, code)

    return kernel


def _compare(code):
    def kernel(ops, a, b, out, a_strides, b_strides, shape):
        ops.compare(
            a.reshape(-1), a_strides, b.reshape(-1), b_strides, out.reshape(-1), shape, code
        )

    return kernel


def _random(code):
    def kernel(ops, out, shape, start, global_strides, seed, a, b, upper):
        ops.random_fill(out.reshape(-1), shape, start, global_strides, seed, code, a, b, upper)

    return kernel


def _arange(ops, out, first, step):
    ops.arange_fill(out.reshape(-1), first, step)


def _axpy(ops, x, y, alpha):
    ops.axpy(alpha, x.reshape(-1), y.reshape(-1))


unary = {
    name: Codelet(f"unary:{name}", kernel=_unary(code), flops=lambda x, out: _size(out))
    for name, code in opcodes.UNARY_OPS.items()
}
unary_backward = {
    name: Codelet(f"unary_backward:{name}", kernel=_unary_backward(code))
    for name, code in opcodes.UNARY_BACKWARD_OPS.items()
}
binary = {
    name: Codelet(f"binary:{name}", kernel=_binary(code), flops=lambda a, b, out, *_: _size(out))
    for name, code in opcodes.BINARY_OPS.items()
}
binary_scalar = {
    name: Codelet(
        f"binary_scalar:{name}",
        kernel=_with_scalar("binary", code),
        flops=lambda a, out, *_: _size(out),
    )
    for name, code in opcodes.BINARY_OPS.items()
}
compare = {
    name: Codelet(f"compare:{name}", kernel=_compare(code))
    for name, code in opcodes.COMPARE_OPS.items()
}
compare_scalar = {
    name: Codelet(f"compare_scalar:{name}", kernel=_with_scalar("compare", code))
    for name, code in opcodes.COMPARE_OPS.items()
}
random = {
    name: Codelet(f"random:{name}", kernel=_random(code))
    for name, code in opcodes.RANDOM_DISTRIBUTIONS.items()
}
arange = Codelet("arange", kernel=_arange)
axpy = Codelet("axpy", kernel=_axpy, flops=lambda x, y, alpha: 2.0 * _size(y))
