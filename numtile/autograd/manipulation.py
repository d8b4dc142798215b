"""Gradient rules of the ops that move data between tiles: reshape, permute, retile,
broadcast, concat, flip, roll, unstack, repeat."""

from __future__ import annotations

import math

import numpy as np

from numtile.autograd.elementwise import unbroadcast
from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor import (
    copying,
    creation,
    dispatch,
    indexing,
    joining,
    manipulation,
    rearranging,
    structured,
)


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


class Concat(Function):
    @staticmethod
    def forward(ctx, *arrays, axis=0):
        ctx.shapes = [a.shape for a in arrays]
        ctx.axis = axis
        return joining.concat(arrays, axis=axis)

    @staticmethod
    def backward(ctx, g):
        axis = 0 if ctx.axis is None else copying.normalize_axis(ctx.axis, g.ndim)
        grads, offset = [], 0
        for shape in ctx.shapes:
            length = math.prod(shape) if ctx.axis is None else shape[axis]
            part = copying.slice_axis(g, axis, offset, offset + length)
            grads.append(manipulation.reshape(part, shape) if ctx.axis is None else part)
            offset += length
        return tuple(grads)


@gradient_rule("concat")
def _concat(arrays, /, *, axis=0):
    return Concat.apply(*arrays, axis=axis)


class Flip(Function):
    @staticmethod
    def forward(ctx, x, axis=None):
        ctx.axis = axis
        return rearranging.flip(x, axis=axis)

    @staticmethod
    def backward(ctx, g):
        return rearranging.flip(g, axis=ctx.axis), None


@gradient_rule("flip")
def _flip(x, /, *, axis=None):
    return Flip.apply(x, axis)


class Roll(Function):
    @staticmethod
    def forward(ctx, x, shift, axis=None):
        ctx.shift, ctx.axis = shift, axis
        return rearranging.roll(x, shift, axis=axis)

    @staticmethod
    def backward(ctx, g):
        shift = ctx.shift
        back = -shift if isinstance(shift, int) else tuple(-s for s in shift)
        return rearranging.roll(g, back, axis=ctx.axis), None, None


@gradient_rule("roll")
def _roll(x, /, shift, *, axis=None):
    return Roll.apply(x, shift, axis)


class Select(Function):
    """One tensor of ``unstack``: x at ``index`` of ``axis``."""

    @staticmethod
    def forward(ctx, x, axis, index):
        ctx.layout, ctx.axis, ctx.index = x.layout, axis, index
        return joining.select(x, axis, index)

    @staticmethod
    def backward(ctx, g):
        # x's gradient: g at ``index`` of ``axis``, zeros elsewhere; (..., n, ...)
        axis, index, shape = ctx.axis, ctx.index, ctx.layout.shape

        def zeros(length):
            return creation.zeros(shape[:axis] + (length,) + shape[axis + 1 :], g.dtype)

        before, after = index, shape[axis] - index - 1
        pieces = [zeros(before)] if before else []
        pieces.append(manipulation.expand_dims(g, axis))
        pieces += [zeros(after)] if after else []
        return joining.concat(pieces, axis=axis), None, None


@gradient_rule("unstack")
def _unstack(x, /, *, axis=0):
    if x.ndim == 0:
        return joining.unstack(x, axis=axis)  # raises the plain error
    axis = copying.normalize_axis(axis, x.ndim)
    return tuple(Select.apply(x, axis, i) for i in range(x.shape[axis]))


class RepeatCounts(Function):
    """repeat with an array of counts: element i read ``counts[i]`` times, so its gradient is
    the sum of its run of the output's gradient (a scatter-add of the run positions)."""

    @staticmethod
    def forward(ctx, x, counts, axis):
        ctx.layout, ctx.axis = x.layout, axis
        ctx.positions = np.repeat(np.arange(x.shape[axis], dtype=np.int64), counts)
        return dispatch.PLAIN["repeat"](x, counts, axis=axis)

    @staticmethod
    def backward(ctx, g):
        grad = creation.zeros(ctx.layout.shape, g.dtype, tile_shape=ctx.layout.tile_shape)
        return indexing.put_positions(grad, ctx.positions, ctx.axis, g, accumulate=True), None, None


@gradient_rule("repeat")
def _repeat(x, repeats, /, *, axis=None):
    if axis is None:
        x, axis = manipulation.reshape(x, (-1,)), 0  # records its own gradient
    axis = copying.normalize_axis(axis, x.ndim)
    counts = joining._repeat_counts(repeats, x.shape[axis])
    if isinstance(counts, int):
        # the plain op: its reshape and broadcast_to record the gradient
        return dispatch.PLAIN["repeat"](x, counts, axis=axis)
    return RepeatCounts.apply(x, counts, axis)


class Triangle(Function):
    """tril/triu: the gradient is the same triangle of the output's gradient."""

    @staticmethod
    def forward(ctx, x, k, lower):
        ctx.k, ctx.lower = k, lower
        return (structured.tril if lower else structured.triu)(x, k=k)

    @staticmethod
    def backward(ctx, g):
        return (structured.tril if ctx.lower else structured.triu)(g, k=ctx.k), None, None


@gradient_rule("tril")
def _tril(x, /, *, k=0):
    return Triangle.apply(x, k, True)


@gradient_rule("triu")
def _triu(x, /, *, k=0):
    return Triangle.apply(x, k, False)
