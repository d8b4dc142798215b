"""Codelets of the reductions (one per reduce op, ``reduce:sum``...) and of softmax."""

from __future__ import annotations

import math

import numpy as np

from numtile import opcodes
from numtile.runtime import Codelet
from numtile.tiletensor.codelets import narrow
from numtile.tiletensor.codelets.narrow import through_float32
from numtile.tiletensor.layout import c_strides


def _size(shape) -> int:
    return math.prod(shape)


def _gathered(ops, x, move_axes):
    """x itself, or, when its reduced axes ``move_axes`` are not adjacent, a copy of it with
    them gathered last (bfloat16 tiles copied as their bits)."""
    if move_axes is None:
        return x
    order = [i for i in range(x.ndim) if i not in move_axes] + list(move_axes)
    shape = [x.shape[i] for i in order]
    strides = c_strides(x.shape)
    moved = ops.empty(tuple(shape), narrow.bits(x).dtype)
    ops.copy_strided(
        narrow.bits(x.reshape(-1)),
        0,
        np.array([strides[i] for i in order], np.int64),
        moved.reshape(-1),
        0,
        np.array(c_strides(shape), np.int64),
        np.array(shape, np.int64),
    )
    return moved


def _reduce_bits(code):
    """The reduction of bfloat16 or float16 tiles into float32 partials, read as bits (no
    scratch)."""

    def kernel(ops, x, out, move_axes, pre, n, post):
        moved = _gathered(ops, x, move_axes).reshape(-1)
        function = getattr(ops, f"{narrow.format_of(x)}_reduce_accumulate")
        function(narrow.bits(moved), out.reshape(-1), pre, n, post, code)

    return kernel


def _reduce(code):
    # bfloat16 and float16 tiles reduce into float32 partials, read as bits
    @through_float32(updates=(1,), direct=_reduce_bits(code))
    def kernel(ops, x, out, move_axes, pre, n, post):
        x = _gathered(ops, x, move_axes)
        function = ops.reduce_accumulate
        if x.dtype.kind == "c":  # complex sums and products, or the moduli into a real out
            modulus = out.dtype.kind != "c"
            function = ops.modulus_reduce_accumulate if modulus else ops.complex_reduce_accumulate
        function(x.reshape(-1), out.reshape(-1), pre, n, post, code)

    return kernel


def _reduce_scratch(x, out, move_axes, pre, n, post) -> int:
    """The float32 copies of 16-bit float tiles (none: they are read as bits), plus the copy of
    x that gathers reduced axes which are not adjacent (float32 too where x is widened)."""
    widened = narrow.scratch_bytes(x, out, direct=True)
    if move_axes is None:
        return widened
    itemsize = 4 if widened else x.dtype.itemsize
    return widened + _size(x.shape) * itemsize


@through_float32(outputs=(1,))
def _softmax(ops, x, out, pre, n, post):
    ops.softmax(x.reshape(-1), out.reshape(-1), pre, n, post)


@through_float32(outputs=(2,))
def _softmax_backward(ops, y, grad_out, grad_in, pre, n, post):
    ops.softmax_backward(y.reshape(-1), grad_out.reshape(-1), grad_in.reshape(-1), pre, n, post)


reduce = {
    name: Codelet(
        f"reduce:{name}",
        kernel=_reduce(code),
        flops=lambda x, out, *_: _size(x),
        scratch=_reduce_scratch,
    )
    for name, code in opcodes.REDUCE_OPS.items()
}
softmax = Codelet("softmax", kernel=_softmax, flops=lambda x, out, *_: 5 * _size(x))
softmax_backward = Codelet(
    "softmax_backward", kernel=_softmax_backward, flops=lambda y, *_: 4 * _size(y)
)
