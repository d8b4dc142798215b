"""Gradient rule of ``redistribute``: the gradient goes back to the input's owners and tiles."""

from __future__ import annotations

from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.runtime.distributed.distribution import Replicated
from numtile.tiletensor import redistribution


class Redistribute(Function):
    @staticmethod
    def forward(ctx, x, distribution, tile_shape):
        ctx.distribution = x.distribution
        ctx.tile_shape = x.tile_shape
        return redistribution.redistribute(x, distribution, tile_shape)

    @staticmethod
    def backward(ctx, g):
        back = Replicated() if ctx.distribution is None else ctx.distribution
        return redistribution.redistribute(g, back, ctx.tile_shape), None, None


@gradient_rule("redistribute")
def _redistribute(x, distribution, tile_shape=None):
    return Redistribute.apply(x, distribution, tile_shape)
