"""Gradient rules of indexing: ``x[key]`` and ``take`` scatter-add the gradient back into
zeros of x's layout (repeated integer-array positions add up); ``x[key] = value`` refuses a
tensor that requires grad (the default treatment)."""

from __future__ import annotations

from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor import assignment, indexing
from numtile.tiletensor.creation import zeros


class GetItem(Function):
    @staticmethod
    def forward(ctx, x, key):
        ctx.layout = x.layout
        ctx.parsed = indexing.parse_key(x, key)
        return indexing.apply_key(x, ctx.parsed)

    @staticmethod
    def backward(ctx, g):
        grad = zeros(ctx.layout.shape, g.dtype, tile_shape=ctx.layout.tile_shape)
        return assignment.assign(grad, ctx.parsed, g, accumulate=True), None


gradient_rule("getitem")(GetItem.apply)


class Take(Function):
    @staticmethod
    def forward(ctx, x, indices, axis):
        ctx.layout = x.layout
        out = indexing.take(x, indices, axis=axis)
        ctx.axis = (axis if axis is not None else 0) % x.ndim
        ctx.positions = indexing.wrap_positions(
            indexing.host_index_array(indices), x.shape[ctx.axis], ctx.axis
        )
        return out

    @staticmethod
    def backward(ctx, g):
        grad = zeros(ctx.layout.shape, g.dtype, tile_shape=ctx.layout.tile_shape)
        return indexing.put_positions(grad, ctx.positions, ctx.axis, g, accumulate=True), None, None


@gradient_rule("take")
def _take(x, indices, /, *, axis=None):
    return Take.apply(x, indices, axis)
