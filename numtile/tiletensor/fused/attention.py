"""Causal self-attention computed flash-style, tile by tile, with a recomputing backward.

The input is the fused projection ``qkv`` of shape (B, T, 3C): columns [0, C) hold the
queries, [C, 2C) the keys, [2C, 3C) the values, head h in columns h*D:(h+1)*D of each.
A tile holds ``head_tile`` heads side by side, so q, k and v tiles of one head group are
tiles of ``qkv`` itself: no transpose or copy. For each (batch tile, query tile, head
group) one task per visible key tile updates a running max, sum and output (online
softmax); the full T x T score matrix of a head never exists. Backward recomputes the
probabilities of each (query tile, key tile) block from the saved log-sum-exp.

bfloat16 q, k, v (bf16-mixed) are read as they are: each task widens its tiles to float32
scratch copies, the softmax statistics stay float64, the output accumulates in float32 and is
rounded to bfloat16 once, and the gradients accumulate in float32, rounded once at the end.

Grouped-query attention (LLaMA) takes q, k and v as separate tensors with fewer key/value heads
than query heads: a tile of ``head_tile`` query heads reads the tile of the key/value heads of
its group(s), so ``head_tile`` and the group size (query heads per key/value head) must divide
one another.
"""

from __future__ import annotations

import math

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import fill_tiles, zeros
from numtile.tiletensor.dtypes import bfloat16_dtype, is_bfloat16
from numtile.tiletensor.elementwise_core import astype
from numtile.tiletensor.fused.rows import match_last_tile
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE


def _visible(causal: bool, q_range: tuple[int, int], k_range: tuple[int, int]) -> bool:
    return not causal or k_range[0] <= q_range[1] - 1


class _Heads:
    """Where attention finds its q, k, v (or dq, dk, dv) tiles: column tile ``first + h`` of
    ``tensor`` holds head group h (one tensor with three offsets for the fused ``qkv``)."""

    def __init__(self, q, k, v, q_first=0, k_first=0, v_first=0) -> None:
        self.q, self.k, self.v = q, k, v
        self.firsts = (q_first, k_first, v_first)

    def tiles(self, b: int, i: int, j: int, h: int, kv: int):
        """The q tile of query tile ``i``, head group h, and the k, v tiles of key tile ``j``,
        key/value head group ``kv``."""
        q_first, k_first, v_first = self.firsts
        return (
            self.q.tile((b, i, q_first + h)),
            self.k.tile((b, j, k_first + kv)),
            self.v.tile((b, j, v_first + kv)),
        )


def _blocks(q: TileTensor, groups: int, causal: bool):
    """(b, i, h, j, q_start, k_start) of every visible (query tile, key tile) block."""
    t_starts = q.layout.starts[1]
    for b in range(q.grid[0]):
        for i in range(q.grid[1]):
            q_range = (t_starts[i], t_starts[i + 1])
            for h in range(groups):
                for j in range(q.grid[1]):
                    k_range = (t_starts[j], t_starts[j + 1])
                    if _visible(causal, q_range, k_range):
                        yield b, i, h, j, q_range[0], k_range[0]


def kv_head_tile(head_tile: int, group: int) -> int:
    """Key/value heads in the tile that serves a tile of ``head_tile`` query heads."""
    return max(1, head_tile // group)


def _forward(heads: _Heads, n_head: int, head_tile: int, group: int, D: int, causal: bool):
    """(out, lse) of attention with the q, k, v tiles ``heads`` finds (q tiles hold
    ``head_tile`` heads of width D; query head h reads key/value head h // group)."""
    q = heads.q
    B, T = q.shape[:2]
    groups = n_head // head_tile
    scale = 1.0 / math.sqrt(D)
    out = TileTensor(Layout((B, T, n_head * D), q.tile_shape[:2] + (head_tile * D,)), q.dtype)
    stats = Layout((B, T, n_head), q.tile_shape[:2] + (head_tile,))
    m = TileTensor(stats, np.float64)
    fill_tiles(m, -np.inf)
    l = zeros(stats.shape, np.float64, stats.tile_shape)
    acc = zeros(out.shape, _work_dtype(q.dtype), out.tile_shape)
    lse = TileTensor(stats, np.float64)
    runtime = get_runtime()
    last = q.grid[1] - 1
    for b, i, h, j, q_start, k_start in _blocks(q, groups, causal):
        state = [(m.tile((b, i, h)), RW), (l.tile((b, i, h)), RW), (acc.tile((b, i, h)), RW)]
        q_tile, k_tile, v_tile = heads.tiles(b, i, j, h, _kv_group(h, head_tile, group))
        runtime.submit(
            codelets.nn.attention_forward,
            [(q_tile, R), (k_tile, R), (v_tile, R)] + state,
            (head_tile, scale, q_start, k_start, causal, group),
        )
        if j == (i if causal else last):  # the last key tile query tile i attends to
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
    return out, lse


def _work_dtype(dtype) -> np.dtype:
    """The dtype attention accumulates in: float32 for bfloat16 q, k, v (as the softmax
    statistics are float64 for every dtype), else the inputs' own."""
    return np.dtype(np.float32) if is_bfloat16(dtype) else np.dtype(dtype)


def _narrowed(tensor: TileTensor, dtype) -> TileTensor:
    """A float32 gradient accumulated for bfloat16 inputs, rounded once to ``dtype``."""
    return tensor if tensor.dtype == dtype else astype(tensor, dtype)


def _kv_group(h: int, head_tile: int, group: int) -> int:
    """The key/value head tile that query head tile h reads."""
    return (h * head_tile // group) // kv_head_tile(head_tile, group)


def _single(q: TileTensor, n_head: int, head_tile: int, group: int) -> bool:
    """Whether each gradient tile of q, k and v gets one backward task's contribution: one
    sequence tile (so one key tile per query tile) and one query head tile per key/value head
    tile. Then bfloat16 inputs get bfloat16 gradients written once by those tasks, with no
    float32 accumulators to zero and round afterwards."""
    kv_tiles = -(-(n_head // group) // kv_head_tile(head_tile, group))
    return q.grid[1] == 1 and n_head // head_tile == kv_tiles


def _gradients(q: TileTensor, inputs, n_head: int, head_tile: int, group: int):
    """The gradient tensors of ``inputs`` (like them): float32 accumulators at zero, or, for
    bfloat16 inputs whose tiles each get a single contribution (``_single``), bfloat16 tiles
    that the backward tasks write (not filled)."""
    if is_bfloat16(q.dtype) and _single(q, n_head, head_tile, group):
        return tuple(TileTensor(x.layout, bfloat16_dtype()) for x in inputs), W
    return tuple(zeros(x.shape, _work_dtype(x.dtype), x.tile_shape) for x in inputs), ACC


def _backward(heads, grads, mode, out, lse, dout, n_head, head_tile, group, D, causal) -> None:
    """Accumulate d(attention)/d(q, k, v) into the tiles ``grads`` (a ``_Heads``) finds (or
    write them, ``mode`` W: one contribution each)."""
    q = heads.q
    groups = n_head // head_tile
    scale = 1.0 / math.sqrt(D)
    if dout.tile_shape != out.tile_shape:
        dout = retile(dout, out.tile_shape)
    delta = TileTensor(lse.layout, np.float64)
    runtime = get_runtime()
    for b in range(q.grid[0]):
        for i in range(q.grid[1]):
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
    for b, i, h, j, q_start, k_start in _blocks(q, groups, causal):
        kv = _kv_group(h, head_tile, group)
        q_tile, k_tile, v_tile = heads.tiles(b, i, j, h, kv)
        dq, dk, dv = grads.tiles(b, i, j, h, kv)
        runtime.submit(
            codelets.nn.attention_backward,
            [(q_tile, R), (k_tile, R), (v_tile, R), (dout.tile((b, i, h)), R)]
            + [(lse.tile((b, i, h)), R), (delta.tile((b, i, h)), R)]
            + [(dq, mode), (dk, mode), (dv, mode)],
            (head_tile, scale, q_start, k_start, causal, group),
        )


def attention_forward(qkv: TileTensor, n_head: int, head_tile: int, causal: bool = True):
    """(out, qkv, lse): attention of ``qkv`` (B, T, 3C) -> (B, T, C), with ``qkv`` retiled so
    a tile holds ``head_tile`` heads and the per-row log-sum-exp the backward needs.

    >>> import numtile as nt
    >>> qkv = nt.random.normal(size=(1, 5, 12), seed=0, tile_shape=(1, 2, 2))
    >>> attention_forward(qkv, n_head=2, head_tile=1)[0].shape
    (1, 5, 4)
    """
    C = qkv.shape[2] // 3
    D = C // n_head
    qkv = match_last_tile(qkv, head_tile * D)
    groups = n_head // head_tile
    out, lse = _forward(
        _Heads(qkv, qkv, qkv, 0, groups, 2 * groups), n_head, head_tile, 1, D, causal
    )
    return out, qkv, lse


def attention_backward(qkv, out, lse, dout, n_head: int, head_tile: int, causal: bool = True):
    """d(attention)/d(qkv), tiled like ``qkv`` as ``attention_forward`` returned it."""
    D = qkv.shape[2] // 3 // n_head
    groups = n_head // head_tile
    (dqkv,), mode = _gradients(qkv, (qkv,), n_head, head_tile, 1)
    heads = _Heads(qkv, qkv, qkv, 0, groups, 2 * groups)
    grads = _Heads(dqkv, dqkv, dqkv, 0, groups, 2 * groups)
    _backward(heads, grads, mode, out, lse, dout, n_head, head_tile, 1, D, causal)
    return _narrowed(dqkv, qkv.dtype)


def grouped_attention_forward(
    q: TileTensor,
    k: TileTensor,
    v: TileTensor,
    n_head: int,
    n_kv_head: int,
    head_tile: int,
    causal: bool = True,
):
    """(out, q, k, v, lse): grouped-query attention of q (B, T, n_head * D) on k and v
    (B, T, n_kv_head * D), query head h reading key/value head ``h // (n_head // n_kv_head)``;
    q, k and v come back retiled so that tiles hold whole heads (``head_tile`` query heads,
    the key/value heads they read), with the log-sum-exp the backward needs.

    >>> import numtile as nt
    >>> q = nt.random.normal(size=(1, 5, 8), seed=0, tile_shape=(1, 2, 4))
    >>> kv = nt.random.normal(size=(1, 5, 2), seed=1, tile_shape=(1, 2, 2))
    >>> grouped_attention_forward(q, kv, kv, n_head=4, n_kv_head=1, head_tile=2)[0].shape
    (1, 5, 8)
    """
    D = q.shape[2] // n_head
    group = n_head // n_kv_head
    q = match_last_tile(q, head_tile * D)
    k = match_last_tile(k, kv_head_tile(head_tile, group) * D)
    v = match_last_tile(v, k.tile_shape[2])
    if k.tile_shape[:2] != q.tile_shape[:2]:
        k = retile(k, q.tile_shape[:2] + k.tile_shape[2:])
    if v.tile_shape != k.tile_shape:
        v = retile(v, k.tile_shape)
    out, lse = _forward(_Heads(q, k, v), n_head, head_tile, group, D, causal)
    return out, q, k, v, lse


def grouped_attention_backward(
    q, k, v, out, lse, dout, n_head: int, n_kv_head: int, head_tile: int, causal: bool = True
):
    """(dq, dk, dv) of ``grouped_attention_forward``, tiled like the q, k, v it returned; dk
    and dv sum over the query heads of each group."""
    D = q.shape[2] // n_head
    group = n_head // n_kv_head
    grads, mode = _gradients(q, (q, k, v), n_head, head_tile, group)
    _backward(
        _Heads(q, k, v), _Heads(*grads), mode, out, lse, dout, n_head, head_tile, group, D, causal
    )
    return tuple(_narrowed(g, x.dtype) for g, x in zip(grads, (q, k, v)))
