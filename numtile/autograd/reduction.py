"""Gradient rules of the reductions (sum, max, min) and of softmax / log-softmax."""

from __future__ import annotations

from numtile.autograd.rules import gradient_rule
from numtile.autograd.tape import Function
from numtile.tiletensor import elementwise, reduction
from numtile.tiletensor.dtypes import as_dtype
from numtile.tiletensor.manipulation import broadcast_to, reshape


def _kept_shape(shape, axes) -> tuple[int, ...]:
    """``shape`` with the reduced ``axes`` kept as length 1 (keepdims)."""
    return tuple(1 if a in axes else s for a, s in enumerate(shape))


class Sum(Function):
    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        ctx.layout = x.layout
        ctx.axes = reduction.normalize_axes(axis, x.ndim)
        return reduction.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        shape = ctx.layout.shape
        g = reshape(g, _kept_shape(shape, ctx.axes))
        return (broadcast_to(g, shape, ctx.layout.tile_shape),)


@gradient_rule("sum")
def _sum(x, /, *, axis=None, dtype=None, keepdims=False):
    if dtype is not None and as_dtype(dtype) != x.dtype:
        x = elementwise.astype(x, dtype)
    return Sum.apply(x, axis=axis, keepdims=keepdims)


class Extremum(Function):
    """max / min over axes: the gradient is shared equally by the elements that reach the
    extremum (``torch.amax`` / ``torch.amin`` semantics)."""

    @staticmethod
    def forward(ctx, x, plain, axis=None, keepdims=False):
        out = plain(x, axis=axis, keepdims=keepdims)
        ctx.axes = reduction.normalize_axes(axis, x.ndim)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved
        kept = _kept_shape(x.shape, ctx.axes)
        hits = elementwise.astype(elementwise.equal(x, reshape(out, kept)), x.dtype)
        count = reduction.sum(hits, axis=ctx.axes, keepdims=True)
        share = elementwise.divide(reshape(g, kept), count)
        return elementwise.multiply(hits, share), None


@gradient_rule("max")
def _max(x, /, *, axis=None, keepdims=False):
    return Extremum.apply(x, reduction.max, axis=axis, keepdims=keepdims)


@gradient_rule("min")
def _min(x, /, *, axis=None, keepdims=False):
    return Extremum.apply(x, reduction.min, axis=axis, keepdims=keepdims)


class _AlongAxis(Function):
    """Base of the softmaxes: ``plain(x, axis)`` forward; the backward needs its output."""

    plain = staticmethod(reduction.softmax)

    @classmethod
    def forward(cls, ctx, x, axis=-1):
        y = cls.plain(x, axis)
        ctx.save_for_backward(y)
        ctx.axis = axis
        return y


class Softmax(_AlongAxis):
    """softmax along one axis through the fused softmax kernels (forward and backward)."""

    plain = staticmethod(reduction.softmax)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved
        return reduction.softmax_backward(y, g, ctx.axis), None


class LogSoftmax(_AlongAxis):
    """log-softmax along one axis, ``x - max - log(sum(exp(x - max)))``: finite for any logits."""

    plain = staticmethod(reduction.log_softmax)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved
        total = reduction.sum(g, axis=ctx.axis, keepdims=True)
        return elementwise.subtract(g, elementwise.multiply(elementwise.exp(y), total)), None
