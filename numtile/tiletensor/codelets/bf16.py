"""The bodies codelets run on bfloat16 tiles through kernels of their bits (``direct=`` of
``narrow.through_float32``): no float32 scratch tile, each element widened in a register and
rounded once when written (``ops.bf16_unary``, ``ops.bf16_binary``, ``ops.bf16_compare``,
``ops.bf16_unary_backward``, ``ops.bf16_reduce_accumulate``; ``where`` picks bit patterns).

Each takes the arguments of the codelet kernel it stands in for. Codelets without one (float16
tiles, predicates, random and arange tiles, axpy, softmax, sorting, indexing) keep the float32
scratch path.
"""

from __future__ import annotations

from numtile.tiletensor.codelets.narrow import bits


def _flat(tile):
    """A tile as the flat array a bfloat16 kernel takes: bfloat16 as uint16 bits."""
    return bits(tile.reshape(-1))


def unary(code):
    def kernel(ops, x, out):
        ops.bf16_unary(_flat(x), _flat(out), code)

    return kernel


def unary_backward(code):
    def kernel(ops, x, grad_out, grad_in):
        ops.bf16_unary_backward(_flat(x), _flat(grad_out), _flat(grad_in), code)

    return kernel


def _kernel(ops, kernel_name: str):
    """The bfloat16 kernel of a broadcasting family: ``binary`` and ``binary_math`` share
    ``bf16_binary``."""
    return ops.bf16_compare if kernel_name == "compare" else ops.bf16_binary


def broadcast(kernel_name: str, code):
    """out = op(a, b) of ``kernel_name``'s op ``code``, a and b broadcast (tensor operands)."""

    def kernel(ops, a, b, out, a_strides, b_strides, shape):
        function = _kernel(ops, kernel_name)
        function(_flat(a), a_strides, _flat(b), b_strides, _flat(out), shape, code)

    return kernel


def with_scalar(kernel_name: str, code):
    """out = op(a, scalar) or op(scalar, a); the scalar is a one-element float32 array."""

    def kernel(ops, a, out, scalar, a_strides, scalar_strides, shape, scalar_first):
        function, a, out = _kernel(ops, kernel_name), _flat(a), _flat(out)
        if scalar_first:
            function(scalar, scalar_strides, a, a_strides, out, shape, code)
        else:
            function(a, a_strides, scalar, scalar_strides, out, shape, code)

    return kernel


def inplace(kernel_name: str, code):
    """a = op(a, b) in a's own tile."""

    def kernel(ops, a, b, a_strides, b_strides, shape):
        a = _flat(a)
        _kernel(ops, kernel_name)(a, a_strides, _flat(b), b_strides, a, shape, code)

    return kernel


def where(ops, condition, a, b, out, c_strides, a_strides, b_strides, shape):
    """out = a if condition else b on bit patterns: nothing is converted, so NaN payloads and
    signalling NaNs survive as ``np.where`` keeps them."""
    condition, a, b, out = (_flat(t) for t in (condition, a, b, out))
    ops.where(condition, c_strides, a, a_strides, b, b_strides, out, shape)
