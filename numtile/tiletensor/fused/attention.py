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

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import fill_tiles, zeros
from numtile.tiletensor.fused.rows import match_last_tile
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE


def _visible(causal: bool, q_range: tuple[int, int], k_range: tuple[int, int]) -> bool:
    return not causal or k_range[0] <= q_range[1] - 1


def _blocks(qkv: TileTensor, groups: int, causal: bool):
    """(b, i, h, j, q_start, k_start) of every visible (query tile, key tile) block."""
    t_starts = qkv.layout.starts[1]
    for b in range(qkv.grid[0]):
        for i in range(qkv.grid[1]):
            q_range = (t_starts[i], t_starts[i + 1])
            for h in range(groups):
                for j in range(qkv.grid[1]):
                    k_range = (t_starts[j], t_starts[j + 1])
                    if _visible(causal, q_range, k_range):
                        yield b, i, h, j, q_range[0], k_range[0]


def _head_tiles(qkv: TileTensor, b: int, i: int, j: int, h: int, groups: int):
    """The q tile of query tile ``i`` and the k, v tiles of key tile ``j`` of head group h."""
    return qkv.tile((b, i, h)), qkv.tile((b, j, groups + h)), qkv.tile((b, j, 2 * groups + h))


def attention_forward(qkv: TileTensor, n_head: int, head_tile: int, causal: bool = True):
    """(out, qkv, lse): attention of ``qkv`` (B, T, 3C) -> (B, T, C), with ``qkv`` retiled so
    a tile holds ``head_tile`` heads and the per-row log-sum-exp the backward needs.

    >>> import numtile as nt
    >>> qkv = nt.random.normal(size=(1, 5, 12), seed=0, tile_shape=(1, 2, 2))
    >>> attention_forward(qkv, n_head=2, head_tile=1)[0].shape
    (1, 5, 4)
    """
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_head
    qkv = match_last_tile(qkv, head_tile * D)
    groups = C // (head_tile * D)
    scale = 1.0 / math.sqrt(D)
    out = TileTensor(Layout((B, T, C), qkv.tile_shape), qkv.dtype)
    stats = Layout((B, T, n_head), qkv.tile_shape[:2] + (head_tile,))
    m = TileTensor(stats, np.float64)
    fill_tiles(m, -np.inf)
    l = zeros(stats.shape, np.float64, stats.tile_shape)
    acc = zeros(out.shape, qkv.dtype, out.tile_shape)
    lse = TileTensor(stats, np.float64)
    runtime = get_runtime()
    for b, i, h, j, q_start, k_start in _blocks(qkv, groups, causal):
        state = [(m.tile((b, i, h)), RW), (l.tile((b, i, h)), RW), (acc.tile((b, i, h)), RW)]
        q, k, v = _head_tiles(qkv, b, i, j, h, groups)
        runtime.submit(
            codelets.nn.attention_forward,
            [(q, R), (k, R), (v, R)] + state,
            (head_tile, scale, q_start, k_start, causal),
        )
        if j == _last_visible(qkv, i, causal):
            runtime.submit(
                codelets.nn.attention_finalize,
                [
                    (acc.tile((b, i, h)), R),
                    (m.tile((b, i, h)), R),
                    (l.tile((b, i, h)), R),
                    (out.tile((b, i, h)), W),
                    (lse.tile((b, i, h)), W),
                ],
                (head_tile,),
            )
    return out, qkv, lse


def _last_visible(qkv: TileTensor, i: int, causal: bool) -> int:
    """The last key tile query tile ``i`` attends to (its own when causal)."""
    return i if causal else qkv.grid[1] - 1


def attention_backward(qkv, out, lse, dout, n_head: int, head_tile: int, causal: bool = True):
    """d(attention)/d(qkv), tiled like ``qkv`` as ``attention_forward`` returned it."""
    C = qkv.shape[2] // 3
    groups = C // (head_tile * (C // n_head))
    scale = 1.0 / math.sqrt(C // n_head)
    if dout.tile_shape != out.tile_shape:
        dout = retile(dout, out.tile_shape)
    delta = TileTensor(lse.layout, np.float64)
    dqkv = zeros(qkv.shape, qkv.dtype, qkv.tile_shape)
    runtime = get_runtime()
    for b in range(qkv.grid[0]):
        for i in range(qkv.grid[1]):
            for h in range(groups):
                runtime.submit(
                    codelets.nn.attention_delta,
                    [
                        (dout.tile((b, i, h)), R),
                        (out.tile((b, i, h)), R),
                        (delta.tile((b, i, h)), W),
                    ],
                    (head_tile,),
                )
    for b, i, h, j, q_start, k_start in _blocks(qkv, groups, causal):
        q, k, v = _head_tiles(qkv, b, i, j, h, groups)
        dq, dk, dv = _head_tiles(dqkv, b, i, j, h, groups)
        runtime.submit(
            codelets.nn.attention_backward,
            [(q, R), (k, R), (v, R), (dout.tile((b, i, h)), R)]
            + [(lse.tile((b, i, h)), R), (delta.tile((b, i, h)), R)]
            + [(dq, ACC), (dk, ACC), (dv, ACC)],
            (head_tile, scale, q_start, k_start, causal),
        )
    return dqkv
