"""Causal self-attention computed flash-style, tile by tile, with a recomputing backward.

The input is the fused projection ``qkv`` of shape (B, T, 3C): columns [0, C) hold the
queries, [C, 2C) the keys, [2C, 3C) the values, head h in columns h*D:(h+1)*D of each.
A tile holds ``head_tile`` heads side by side, so q, k and v tiles of one head group are
tiles of ``qkv`` itself: no transpose or copy. For each (batch tile, query tile, head
group) one task per visible key tile updates a running max, sum and output (online
softmax); the full T x T score matrix of a head never exists. Backward recomputes the
probabilities of each (query tile, key tile) block from the saved log-sum-exp.
"""

from __future__ import annotations

import math

import numpy as np

from numtile.autograd.tape import Function
from numtile.runtime import Access, Codelet, get_runtime
from numtile.tiletensor.creation import fill_tiles, zeros
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE


def _forward_block(ops, q, k, v, m, l, acc, n_heads, scale, q_start, k_start, causal):
    for b in range(q.shape[0]):
        ops.nn.attention_forward_block(
            q[b], k[b], v[b], m[b], l[b], acc[b], n_heads, scale, q_start, k_start, causal
        )


def _finalize(ops, acc, m, l, out, lse, n_heads):
    for b in range(acc.shape[0]):
        ops.nn.attention_forward_finalize(acc[b], m[b], l[b], out[b], lse[b], n_heads)


def _delta(ops, dout, out, delta, n_heads):
    for b in range(out.shape[0]):
        ops.nn.attention_backward_delta(dout[b], out[b], delta[b], n_heads)


def _backward_block(
    ops, q, k, v, dout, lse, delta, dq, dk, dv, n_heads, scale, q_start, k_start, causal
):
    for b in range(q.shape[0]):
        ops.nn.attention_backward_block(
            q[b],
            k[b],
            v[b],
            dout[b],
            lse[b],
            delta[b],
            dq[b],
            dk[b],
            dv[b],
            n_heads,
            scale,
            q_start,
            k_start,
            causal,
        )


def _block_flops(q, k, *args) -> float:
    return 4.0 * math.prod(q) * k[1]  # two (tq x tk x width) products per head


ATTENTION_FORWARD = Codelet("attention_forward", kernel=_forward_block, flops=_block_flops)
ATTENTION_FINALIZE = Codelet("attention_finalize", kernel=_finalize)
ATTENTION_DELTA = Codelet("attention_delta", kernel=_delta)
ATTENTION_BACKWARD = Codelet(
    "attention_backward", kernel=_backward_block, flops=lambda q, k, *a: 2.5 * _block_flops(q, k)
)


def _visible(causal: bool, q_range: tuple[int, int], k_range: tuple[int, int]) -> bool:
    return not causal or k_range[0] <= q_range[1] - 1


class CausalSelfAttention(Function):
    """softmax(q k^T / sqrt(D) + causal mask) v for every head, from the fused ``qkv``."""

    @staticmethod
    def forward(ctx, qkv, n_head, head_tile, causal=True):
        B, T, C3 = qkv.shape
        C = C3 // 3
        D = C // n_head
        width = head_tile * D
        ctx.qkv_tiles = qkv.tile_shape  # the gradient goes back in the caller's tiling
        qkv = _tiled_for_heads(qkv, width)
        groups = C // width
        scale = 1.0 / math.sqrt(D)
        layout = qkv.layout
        out = TileTensor(Layout((B, T, C), qkv.tile_shape), qkv.dtype)
        stats = Layout((B, T, n_head), qkv.tile_shape[:2] + (head_tile,))
        m = TileTensor(stats, np.float64)
        fill_tiles(m, -np.inf)
        l = zeros(stats.shape, np.float64, stats.tile_shape)
        acc = zeros(out.shape, qkv.dtype, out.tile_shape)
        lse = TileTensor(stats, np.float64)
        runtime = get_runtime()
        t_starts = layout.starts[1]
        for b in range(qkv.grid[0]):
            for i in range(qkv.grid[1]):
                q_range = (t_starts[i], t_starts[i + 1])
                for h in range(groups):
                    state = [
                        (m.tile((b, i, h)), RW),
                        (l.tile((b, i, h)), RW),
                        (acc.tile((b, i, h)), RW),
                    ]
                    for j in range(qkv.grid[1]):
                        k_range = (t_starts[j], t_starts[j + 1])
                        if not _visible(causal, q_range, k_range):
                            continue
                        tiles = [
                            (qkv.tile((b, i, h)), R),
                            (qkv.tile((b, j, groups + h)), R),
                            (qkv.tile((b, j, 2 * groups + h)), R),
                        ]
                        runtime.submit(
                            ATTENTION_FORWARD,
                            tiles + state,
                            (head_tile, scale, q_range[0], k_range[0], causal),
                        )
                    runtime.submit(
                        ATTENTION_FINALIZE,
                        [
                            (acc.tile((b, i, h)), R),
                            (m.tile((b, i, h)), R),
                            (l.tile((b, i, h)), R),
                            (out.tile((b, i, h)), W),
                            (lse.tile((b, i, h)), W),
                        ],
                        (head_tile,),
                    )
        ctx.save_for_backward(qkv, out, lse)
        ctx.params = (n_head, head_tile, causal, scale, groups)
        return out

    @staticmethod
    def backward(ctx, dout):
        qkv, out, lse = ctx.saved
        n_head, head_tile, causal, scale, groups = ctx.params
        if dout.tile_shape != out.tile_shape:
            dout = retile(dout, out.tile_shape)
        delta = TileTensor(lse.layout, np.float64)
        dqkv = zeros(qkv.shape, qkv.dtype, qkv.tile_shape)
        runtime = get_runtime()
        t_starts = qkv.layout.starts[1]
        for b in range(qkv.grid[0]):
            for i in range(qkv.grid[1]):
                for h in range(groups):
                    runtime.submit(
                        ATTENTION_DELTA,
                        [
                            (dout.tile((b, i, h)), R),
                            (out.tile((b, i, h)), R),
                            (delta.tile((b, i, h)), W),
                        ],
                        (head_tile,),
                    )
        for b in range(qkv.grid[0]):
            for i in range(qkv.grid[1]):
                q_range = (t_starts[i], t_starts[i + 1])
                for h in range(groups):
                    for j in range(qkv.grid[1]):
                        k_range = (t_starts[j], t_starts[j + 1])
                        if not _visible(causal, q_range, k_range):
                            continue
                        runtime.submit(
                            ATTENTION_BACKWARD,
                            [
                                (qkv.tile((b, i, h)), R),
                                (qkv.tile((b, j, groups + h)), R),
                                (qkv.tile((b, j, 2 * groups + h)), R),
                                (dout.tile((b, i, h)), R),
                                (lse.tile((b, i, h)), R),
                                (delta.tile((b, i, h)), R),
                                (dqkv.tile((b, i, h)), ACC),
                                (dqkv.tile((b, j, groups + h)), ACC),
                                (dqkv.tile((b, j, 2 * groups + h)), ACC),
                            ],
                            (head_tile, scale, q_range[0], k_range[0], causal),
                        )
        if dqkv.tile_shape != ctx.qkv_tiles:
            dqkv = retile(dqkv, ctx.qkv_tiles)
        return dqkv, None, None, None


def _tiled_for_heads(qkv: TileTensor, width: int) -> TileTensor:
    if qkv.tile_shape[2] == width:
        return qkv
    return retile(qkv, qkv.tile_shape[:2] + (width,))


def causal_self_attention(
    qkv: TileTensor, n_head: int, head_tile: int = 1, causal: bool = True
) -> TileTensor:
    """Multi-head (causal) attention of the fused projection ``qkv`` (B, T, 3C) -> (B, T, C).

    ``head_tile`` heads share a tile; ``n_head`` must be a multiple of it.

    >>> import numtile as nt
    >>> qkv = nt.random.normal(size=(1, 5, 12), seed=0, tile_shape=(1, 2, 2))
    >>> causal_self_attention(qkv, n_head=2).shape
    (1, 5, 4)
    """
    if qkv.ndim != 3 or qkv.shape[2] % 3:
        raise ValueError(f"attention expects qkv of shape (B, T, 3C), got {qkv.shape}")
    C = qkv.shape[2] // 3
    if n_head < 1 or C % n_head:
        raise ValueError(f"n_embd {C} is not divisible by n_head {n_head}")
    if head_tile < 1 or n_head % head_tile:
        raise ValueError(f"n_head {n_head} is not a multiple of head_tile {head_tile}")
    return CausalSelfAttention.apply(qkv, n_head, head_tile, causal)
