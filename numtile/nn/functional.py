"""Fused differentiable ops on activations of shape (..., features): linear, embedding, norms.

Each is one ``Function`` whose forward and backward submit tile tasks on the hand-written
kernels of ``ops_cpu.nn`` (``ops_cuda.nn`` on a GPU). Activation tiles are flattened to
(rows, features) blocks inside the codelets, so any tiling of the leading (batch, sequence)
axes works, leftovers included.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from numtile.autograd.tape import Function
from numtile.runtime import Access, Codelet, get_runtime
from numtile.tiletensor import reduction as rd
from numtile.tiletensor.creation import fill_tiles, zeros
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE


def rows(t: np.ndarray) -> np.ndarray:
    """A tile viewed as (rows, last axis): leading axes merged (a view, tiles are C-ordered)."""
    # tuple(): the CUDA simulator's shapes refuse negative indices, like device code
    return t.reshape(-1, tuple(t.shape)[-1]) if t.ndim != 2 else t


def flat(t: np.ndarray) -> np.ndarray:
    return t.reshape(-1)


def lead_indices(x: TileTensor):
    """Tile indices over every axis but the last."""
    return itertools.product(*(range(g) for g in x.grid[:-1]))


def row_stats(x: TileTensor, fill=0.0, width: int | None = None, tile: int | None = None):
    """A float64 tensor with one value (or ``width`` values) per row of ``x``, filled."""
    shape, tiles = x.shape[:-1], x.tile_shape[:-1]
    if width is not None:
        shape, tiles = shape + (width,), tiles + (tile,)
    out = TileTensor(Layout(shape, tiles), np.float64)
    fill_tiles(out, fill)
    return out


def _gemm_rows(ops, a, b, c, trans_a, trans_b, alpha, beta):
    ops.gemm(rows(a), rows(b), rows(c), trans_a, trans_b, alpha, beta)


def _gemm_flops(a, b, c, trans_a, trans_b, alpha, beta) -> float:
    inner = math.prod(a[:-1]) if trans_a else a[-1]
    return 2.0 * math.prod(c) * inner


GEMM_ROWS = Codelet("gemm_rows", kernel=_gemm_rows, flops=_gemm_flops)


def _match_last_tile(x: TileTensor, tile: int) -> TileTensor:
    if x.tile_shape[-1] == tile:
        return x
    return retile(x, x.tile_shape[:-1] + (tile,))


# -- linear -----------------------------------------------------------------------------------


def _linear_forward(x: TileTensor, weight: TileTensor, transposed: bool) -> TileTensor:
    """x @ W (W stored (in, out)) or x @ W^T (W stored (out, in)), leading axes as rows."""
    in_axis, out_axis = (1, 0) if transposed else (0, 1)
    x = _match_last_tile(x, weight.tile_shape[in_axis])
    n_out = weight.shape[out_axis]
    layout = Layout(x.shape[:-1] + (n_out,), x.tile_shape[:-1] + (weight.tile_shape[out_axis],))
    out = TileTensor(layout, x.dtype)
    runtime = get_runtime()
    for lead in lead_indices(x):
        for j in range(weight.grid[out_axis]):
            c = out.tile(lead + (j,))
            for k in range(x.grid[-1]):
                w = weight.tile((j, k) if transposed else (k, j))
                runtime.submit(
                    GEMM_ROWS,
                    [(x.tile(lead + (k,)), R), (w, R), (c, W if k == 0 else RW)],
                    (False, transposed, 1.0, 0.0 if k == 0 else 1.0),
                )
    return out


class LinearFunction(Function):
    """y = x @ W + b with W (in, out), or x @ W^T + b with W (out, in) when ``transposed``."""

    @staticmethod
    def forward(ctx, x, weight, bias=None, transposed=False):
        ctx.x_tiles, ctx.x_grad = x.tile_shape, x.requires_grad
        x = _match_last_tile(x, weight.tile_shape[1 if transposed else 0])
        ctx.save_for_backward(x, weight)
        ctx.transposed = transposed
        ctx.has_bias = bias is not None
        y = _linear_forward(x, weight, transposed)
        if bias is not None:
            y = y + bias
        return y

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved
        transposed = ctx.transposed
        in_axis, out_axis = (1, 0) if transposed else (0, 1)
        g = _match_last_tile(g, weight.tile_shape[out_axis])
        runtime = get_runtime()
        gx = gw = gb = None
        if ctx.x_grad:
            gx = TileTensor(x.layout, x.dtype)
            for lead in lead_indices(x):
                for k in range(x.grid[-1]):
                    c = gx.tile(lead + (k,))
                    for j in range(g.grid[-1]):
                        w = weight.tile((j, k) if transposed else (k, j))
                        runtime.submit(
                            GEMM_ROWS,
                            [(g.tile(lead + (j,)), R), (w, R), (c, W if j == 0 else RW)],
                            (False, not transposed, 1.0, 0.0 if j == 0 else 1.0),
                        )
            if gx.tile_shape != ctx.x_tiles:
                gx = retile(gx, ctx.x_tiles)
        if weight.requires_grad:
            gw = TileTensor(weight.layout, weight.dtype)
            leads = list(lead_indices(x))
            for index in weight.layout.indices():
                j, k = (index[0], index[1]) if transposed else (index[1], index[0])
                c = gw.tile(index)
                for n, lead in enumerate(leads):
                    first, second = (g.tile(lead + (j,)), x.tile(lead + (k,)))
                    if not transposed:
                        first, second = second, first
                    runtime.submit(
                        GEMM_ROWS,
                        [(first, R), (second, R), (c, W if n == 0 else RW)],
                        (True, False, 1.0, 0.0 if n == 0 else 1.0),
                    )
        if ctx.has_bias:
            gb = rd.sum(g, axis=tuple(range(g.ndim - 1)))
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


# -- embedding --------------------------------------------------------------------------------


def _embedding_gather(ops, ids, table, out, v_start):
    ops.nn.embedding_gather(flat(ids), table, v_start, rows(out))


def _embedding_scatter(ops, ids, grad_out, grad_table, v_start):
    ops.nn.embedding_scatter_add(flat(ids), rows(grad_out), v_start, grad_table)


EMBEDDING_GATHER = Codelet("embedding_gather", kernel=_embedding_gather)
EMBEDDING_SCATTER = Codelet("embedding_scatter", kernel=_embedding_scatter)


class EmbeddingFunction(Function):
    """out[..., :] = table[ids[...], :] with ``table`` tiled over (vocabulary, features)."""

    @staticmethod
    def forward(ctx, table, ids):
        ctx.save_for_backward(ids)
        ctx.table_layout = table.layout
        out = zeros(
            ids.shape + (table.shape[1],), table.dtype, ids.tile_shape + (table.tile_shape[1],)
        )
        runtime = get_runtime()
        for lead in lead_indices(_with_feature_axis(ids)):
            for v in range(table.grid[0]):
                v_start = table.layout.starts[0][v]
                for c in range(table.grid[1]):
                    runtime.submit(
                        EMBEDDING_GATHER,
                        [
                            (ids.tile(lead), R),
                            (table.tile((v, c)), R),
                            (out.tile(lead + (c,)), ACC),
                        ],
                        (v_start,),
                    )
        return out

    @staticmethod
    def backward(ctx, g):
        (ids,) = ctx.saved
        layout = ctx.table_layout
        g = _match_last_tile(g, layout.tile_shape[1])
        grad = zeros(layout.shape, g.dtype, layout.tile_shape)
        runtime = get_runtime()
        for lead in lead_indices(_with_feature_axis(ids)):
            for v in range(layout.grid[0]):
                for c in range(layout.grid[1]):
                    runtime.submit(
                        EMBEDDING_SCATTER,
                        [(ids.tile(lead), R), (g.tile(lead + (c,)), R), (grad.tile((v, c)), ACC)],
                        (layout.starts[0][v],),
                    )
        return grad, None


def _with_feature_axis(ids: TileTensor) -> TileTensor:
    """A stand-in whose leading grid is the grid of ``ids`` (for ``lead_indices``)."""
    return TileTensor(Layout(ids.shape + (1,), ids.tile_shape + (1,)), ids.dtype, ids.handles)


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


# -- layer norm and RMS norm ------------------------------------------------------------------


def _moments(ops, x, s1, s2):
    ops.nn.row_moments_accumulate(rows(x), flat(s1), flat(s2))


def _norm_apply(ops, x, gamma, beta, s1, s2, y, n, eps):
    ops.nn.layer_norm_apply(rows(x), gamma, beta, flat(s1), flat(s2), rows(y), n, eps)


def _norm_backward_accumulate(ops, x, dy, gamma, s1, s2, a1, a2, n, eps):
    ops.nn.layer_norm_backward_accumulate(
        rows(x), rows(dy), gamma, flat(s1), flat(s2), flat(a1), flat(a2), n, eps
    )


def _norm_backward_apply(ops, x, dy, gamma, s1, s2, a1, a2, dx, n, eps):
    ops.nn.layer_norm_backward_apply(
        rows(x), rows(dy), gamma, flat(s1), flat(s2), flat(a1), flat(a2), rows(dx), n, eps
    )


def _norm_param_grad(ops, x, dy, s1, s2, dgamma, dbeta, n, eps):
    ops.nn.layer_norm_param_grad(rows(x), rows(dy), flat(s1), flat(s2), dgamma, dbeta, n, eps)


MOMENTS = Codelet("row_moments", kernel=_moments)
NORM_APPLY = Codelet("layer_norm", kernel=_norm_apply)
NORM_BACKWARD_ACCUMULATE = Codelet("layer_norm_backward_sums", kernel=_norm_backward_accumulate)
NORM_BACKWARD_APPLY = Codelet("layer_norm_backward", kernel=_norm_backward_apply)
NORM_PARAM_GRAD = Codelet("layer_norm_param_grad", kernel=_norm_param_grad)


class LayerNormFunction(Function):
    """Layer norm over the last axis, whose features may be split across column tiles."""

    @staticmethod
    def forward(ctx, x, gamma, beta, eps):
        ctx.x_tiles = x.tile_shape
        x = _match_last_tile(x, gamma.tile_shape[0])
        runtime = get_runtime()
        n = x.shape[-1]
        s1, s2 = row_stats(x), row_stats(x)
        for lead in lead_indices(x):
            for c in range(x.grid[-1]):
                runtime.submit(
                    MOMENTS, [(x.tile(lead + (c,)), R), (s1.tile(lead), ACC), (s2.tile(lead), ACC)]
                )
        y = TileTensor(x.layout, x.dtype)
        for lead in lead_indices(x):
            for c in range(x.grid[-1]):
                runtime.submit(
                    NORM_APPLY,
                    [
                        (x.tile(lead + (c,)), R),
                        (gamma.tile((c,)), R),
                        (beta.tile((c,)), R),
                        (s1.tile(lead), R),
                        (s2.tile(lead), R),
                        (y.tile(lead + (c,)), W),
                    ],
                    (n, eps),
                )
        ctx.save_for_backward(x, gamma, s1, s2)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, g):
        x, gamma, s1, s2 = ctx.saved
        eps, n = ctx.eps, x.shape[-1]
        g = _match_last_tile(g, x.tile_shape[-1])
        runtime = get_runtime()
        a1, a2 = row_stats(x), row_stats(x)
        for lead in lead_indices(x):
            for c in range(x.grid[-1]):
                runtime.submit(
                    NORM_BACKWARD_ACCUMULATE,
                    [
                        (x.tile(lead + (c,)), R),
                        (g.tile(lead + (c,)), R),
                        (gamma.tile((c,)), R),
                        (s1.tile(lead), R),
                        (s2.tile(lead), R),
                        (a1.tile(lead), ACC),
                        (a2.tile(lead), ACC),
                    ],
                    (n, eps),
                )
        dx = TileTensor(x.layout, x.dtype)
        dgamma = zeros(gamma.shape, gamma.dtype, gamma.tile_shape)
        dbeta = zeros(gamma.shape, gamma.dtype, gamma.tile_shape)
        for lead in lead_indices(x):
            for c in range(x.grid[-1]):
                xs, gs = x.tile(lead + (c,)), g.tile(lead + (c,))
                runtime.submit(
                    NORM_BACKWARD_APPLY,
                    [
                        (xs, R),
                        (gs, R),
                        (gamma.tile((c,)), R),
                        (s1.tile(lead), R),
                        (s2.tile(lead), R),
                        (a1.tile(lead), R),
                        (a2.tile(lead), R),
                        (dx.tile(lead + (c,)), W),
                    ],
                    (n, eps),
                )
                runtime.submit(
                    NORM_PARAM_GRAD,
                    [
                        (xs, R),
                        (gs, R),
                        (s1.tile(lead), R),
                        (s2.tile(lead), R),
                        (dgamma.tile((c,)), ACC),
                        (dbeta.tile((c,)), ACC),
                    ],
                    (n, eps),
                )
        if dx.tile_shape != ctx.x_tiles:
            dx = retile(dx, ctx.x_tiles)
        return dx, dgamma, dbeta, None


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
