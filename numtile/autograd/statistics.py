"""Gradient rule of ``cumulative_sum`` (``var`` and ``std`` are composites of mean, subtract,
square and sum, whose rules carry their gradient)."""

from __future__ import annotations

from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor import elementwise, statistics
from numtile.tiletensor.dtypes import as_dtype
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.reduction import sum as tensor_sum


def reverse_cumulative_sum(g, axis: int):
    """r[i] = sum over j >= i of g[j] along ``axis``: the total minus the running sum before i."""
    total = tensor_sum(g, axis=axis, keepdims=True)
    before = elementwise.subtract(statistics.cumulative_sum(g, axis=axis), g)
    return elementwise.subtract(total, before)


class CumulativeSum(Function):
    @staticmethod
    def forward(ctx, x, axis=None, include_initial=False):
        out = statistics.cumulative_sum(x, axis=axis, include_initial=include_initial)
        ctx.axis = statistics.scan_axis(x, axis)
        ctx.layout = x.layout
        ctx.include_initial = include_initial
        return out

    @staticmethod
    def backward(ctx, g):
        axis = ctx.axis
        if ctx.include_initial:  # out[0] is the constant zero; out[i + 1] sums x[:i + 1]
            key = (slice(None),) * axis + (slice(1, None),)
            g = g[key]
        grad = reverse_cumulative_sum(g, axis)
        if grad.tile_shape != ctx.layout.tile_shape:
            grad = retile(grad, ctx.layout.tile_shape)
        return grad, None, None


@gradient_rule("cumulative_sum")
def _cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    if dtype is not None and as_dtype(dtype) != x.dtype:
        x = elementwise.astype(x, dtype)
    return CumulativeSum.apply(x, axis=axis, include_initial=include_initial)
