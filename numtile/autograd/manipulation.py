"""Gradient rules of the ops that move data between tiles: reshape, permute, retile,
broadcast."""

from __future__ import annotations

import numpy as np

from numtile.autograd.elementwise import unbroadcast
from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor import manipulation


class Reshape(Function):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.layout = x.layout
        return manipulation.reshape(x, shape)

    @staticmethod
    def backward(ctx, g):
        g = manipulation.reshape(g, ctx.layout.shape)
        return manipulation.retile(g, ctx.layout.tile_shape), None


@gradient_rule("reshape")
def _reshape(x, shape, *, copy=None):
    return Reshape.apply(x, shape)


class PermuteDims(Function):
    @staticmethod
    def forward(ctx, x, axes):
        ctx.axes = tuple(a % x.ndim for a in axes)
        return manipulation.permute_dims(x, axes)

    @staticmethod
    def backward(ctx, g):
        inverse = tuple(int(i) for i in np.argsort(ctx.axes))
        return manipulation.permute_dims(g, inverse), None


@gradient_rule("permute_dims")
def _permute_dims(x, axes):
    return PermuteDims.apply(x, tuple(axes))


class Retile(Function):
    @staticmethod
    def forward(ctx, x, tile_shape):
        ctx.tile_shape = x.tile_shape
        return manipulation.retile(x, tile_shape)

    @staticmethod
    def backward(ctx, g):
        return manipulation.retile(g, ctx.tile_shape), None


gradient_rule("retile")(Retile.apply)


class BroadcastTo(Function):
    @staticmethod
    def forward(ctx, x, shape, tile_shape=None):
        ctx.layout = x.layout
        return manipulation.broadcast_to(x, shape, tile_shape)

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.layout), None, None


gradient_rule("broadcast_to")(BroadcastTo.apply)
