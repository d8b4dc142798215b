"""Differentiable ops on activations of shape (..., features): linear, embedding, layer norm,
softmax and log-softmax.

Each is one autograd ``Function`` over a fused tiled op of ``numtile.tiletensor.fused`` (or
of ``numtile.tiletensor.reduction`` for the softmaxes): any tiling of the leading (batch,
sequence) axes works, leftovers included.
"""

from __future__ import annotations

import numpy as np

from numtile.autograd.reduction import LogSoftmax, Softmax
from numtile.autograd.tape import Function
from numtile.tiletensor.fused.embedding import embedding_backward, embedding_forward
from numtile.tiletensor.fused.linear import (
    linear_backward_input,
    linear_backward_weight,
    linear_forward,
)
from numtile.tiletensor.fused.norm import layer_norm_backward, layer_norm_forward
from numtile.tiletensor.fused.rows import match_last_tile
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.reduction import sum as tensor_sum
from numtile.tiletensor.tensor import TileTensor


class LinearFunction(Function):
    """y = x @ W + b with W (in, out), or x @ W^T + b with W (out, in) when ``transposed``."""

    @staticmethod
    def forward(ctx, x, weight, bias=None, transposed=False):
        ctx.x_tiles, ctx.x_grad = x.tile_shape, x.requires_grad
        x = match_last_tile(x, weight.tile_shape[1 if transposed else 0])
        ctx.save_for_backward(x, weight)
        ctx.transposed = transposed
        ctx.has_bias = bias is not None
        y = linear_forward(x, weight, transposed)
        if bias is not None:
            y = y + bias
        return y

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved
        gx = gw = gb = None
        if ctx.x_grad:
            gx = retile(linear_backward_input(g, weight, x, ctx.transposed), ctx.x_tiles)
        if weight.requires_grad:
            gw = linear_backward_weight(x, g, weight.layout, ctx.transposed)
        if ctx.has_bias:
            gb = tensor_sum(g, axis=tuple(range(g.ndim - 1)))
        return gx, gw, gb


def linear(
    x: TileTensor, weight: TileTensor, bias: TileTensor | None = None, *, transposed: bool = False
) -> TileTensor:
    """``x @ W + b`` over the last axis of ``x`` (differentiable, fused).

    >>> import numtile as nt
    >>> w = nt.ones((3, 2), tile_shape=(2, 2))
    >>> linear(nt.ones((4, 3), tile_shape=(3, 2)), w).to_numpy()[0].tolist()
    [3.0, 3.0]
    """
    if x.shape[-1] != weight.shape[1 if transposed else 0]:
        raise ValueError(
            f"linear: input has {x.shape[-1]} features but the weight has shape {weight.shape}"
            f"{' (out, in)' if transposed else ' (in, out)'}"
        )
    return LinearFunction.apply(x, weight, bias, transposed=transposed)


class EmbeddingFunction(Function):
    """out[..., :] = table[ids[...], :] with ``table`` tiled over (vocabulary, features)."""

    @staticmethod
    def forward(ctx, table, ids):
        ctx.save_for_backward(ids)
        ctx.table_layout = table.layout
        return embedding_forward(table, ids)

    @staticmethod
    def backward(ctx, g):
        (ids,) = ctx.saved
        return embedding_backward(ids, g, ctx.table_layout), None


def embedding(ids: TileTensor, table: TileTensor) -> TileTensor:
    """Rows of ``table`` picked by integer ``ids`` (any shape); differentiable in ``table``.

    >>> import numtile as nt, numpy as np
    >>> table = nt.from_numpy(np.arange(8.0).reshape(4, 2), tile_shape=(3, 1))
    >>> embedding(nt.from_numpy(np.array([3, 0])), table).to_numpy().tolist()
    [[6.0, 7.0], [0.0, 1.0]]
    """
    if ids.dtype != np.int64:
        raise TypeError(f"embedding ids must be int64, got {ids.dtype}")
    return EmbeddingFunction.apply(table, ids)


class LayerNormFunction(Function):
    """Layer norm over the last axis, whose features may be split across column tiles."""

    @staticmethod
    def forward(ctx, x, gamma, beta, eps):
        ctx.x_tiles = x.tile_shape
        y, x, s1, s2 = layer_norm_forward(x, gamma, beta, eps)
        ctx.save_for_backward(x, gamma, s1, s2)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, g):
        x, gamma, s1, s2 = ctx.saved
        dx, dgamma, dbeta = layer_norm_backward(x, g, gamma, s1, s2, ctx.eps)
        return retile(dx, ctx.x_tiles), dgamma, dbeta, None


def layer_norm(x: TileTensor, gamma: TileTensor, beta: TileTensor, eps: float = 1e-5):
    """Layer normalisation over the last axis with scale ``gamma`` and shift ``beta``.

    >>> import numtile as nt
    >>> x = nt.from_numpy([[1.0, 2.0, 3.0]], tile_shape=(1, 2))
    >>> g, b = nt.ones((3,), tile_shape=2), nt.zeros((3,), tile_shape=2)
    >>> [round(float(v), 4) for v in layer_norm(x, g, b).to_numpy()[0]]
    [-1.2247, 0.0, 1.2247]
    """
    if gamma.shape != (x.shape[-1],) or beta.shape != gamma.shape:
        raise ValueError(
            f"layer_norm: x has {x.shape[-1]} features but gamma/beta have shapes "
            f"{gamma.shape} and {beta.shape}"
        )
    if beta.tile_shape != gamma.tile_shape:
        beta = retile(beta, gamma.tile_shape)
    return LayerNormFunction.apply(x, gamma, beta, eps)


def _check_axis(x: TileTensor, axis: int, name: str) -> None:
    if not isinstance(x, TileTensor):
        raise TypeError(f"{name} expects a TileTensor, got {type(x).__name__}")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{name}: axis {axis} is out of range for shape {x.shape}")


def softmax(x: TileTensor, axis: int = -1) -> TileTensor:
    """``exp(x) / sum(exp(x))`` along ``axis`` (differentiable, fused softmax kernels).

    Tiles along ``axis`` are merged for the kernel; the result keeps the tiling of ``x``.

    >>> import numtile as nt
    >>> [round(float(v), 4) for v in softmax(nt.from_numpy([[0.0, 1.0, 2.0]])).to_numpy()[0]]
    [0.09, 0.2447, 0.6652]
    """
    _check_axis(x, axis, "softmax")
    return Softmax.apply(x, axis)


def log_softmax(x: TileTensor, axis: int = -1) -> TileTensor:
    """``log(softmax(x))`` along ``axis``, computed as ``x - max - log(sum(exp(x - max)))``
    so that it stays finite for logits of any size (differentiable).

    >>> import numtile as nt
    >>> log_softmax(nt.from_numpy([[0.0, 1000.0]])).to_numpy().tolist()
    [[-1000.0, 0.0]]
    """
    _check_axis(x, axis, "log_softmax")
    return LogSoftmax.apply(x, axis)
