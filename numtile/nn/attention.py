"""Causal self-attention of the fused projection ``qkv``, and grouped-query attention of
separate q, k, v: autograd Functions over the flash-style tiled ops of
``numtile.tiletensor.fused.attention`` (never a T x T matrix)."""

from __future__ import annotations

from numtile.autograd.tape import Function
from numtile.tiletensor.fused.attention import (
    attention_backward,
    attention_forward,
    grouped_attention_backward,
    grouped_attention_forward,
)
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor


class CausalSelfAttention(Function):
    """softmax(q k^T / sqrt(D) + causal mask) v for every head, from the fused ``qkv``."""

    @staticmethod
    def forward(ctx, qkv, n_head, head_tile, causal=True):
        ctx.qkv_tiles = qkv.tile_shape  # the gradient goes back in the caller's tiling
        out, qkv, lse = attention_forward(qkv, n_head, head_tile, causal)
        ctx.save_for_backward(qkv, out, lse)
        ctx.params = (n_head, head_tile, causal)
        return out

    @staticmethod
    def backward(ctx, dout):
        qkv, out, lse = ctx.saved
        dqkv = attention_backward(qkv, out, lse, dout, *ctx.params)
        return retile(dqkv, ctx.qkv_tiles), None, None, None


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


class GroupedQueryAttention(Function):
    """softmax(q k^T / sqrt(D) + causal mask) v, query head h reading key/value head
    h // (n_head // n_kv_head)."""

    @staticmethod
    def forward(ctx, q, k, v, n_head, n_kv_head, head_tile, causal=True):
        ctx.tiles = (q.tile_shape, k.tile_shape, v.tile_shape)
        out, q, k, v, lse = grouped_attention_forward(q, k, v, n_head, n_kv_head, head_tile, causal)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.params = (n_head, n_kv_head, head_tile, causal)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved
        grads = grouped_attention_backward(q, k, v, out, lse, dout, *ctx.params)
        return tuple(retile(g, t) for g, t in zip(grads, ctx.tiles)) + (None,) * 4


def grouped_query_attention(
    q: TileTensor,
    k: TileTensor,
    v: TileTensor,
    n_head: int,
    n_kv_head: int,
    head_tile: int = 1,
    causal: bool = True,
) -> TileTensor:
    """Multi-head (causal) attention with ``n_kv_head`` key/value heads shared by groups of
    ``n_head // n_kv_head`` query heads: q (B, T, n_head * D), k and v (B, T, n_kv_head * D)
    -> (B, T, n_head * D).

    ``head_tile`` query heads share a tile; it and the group size must divide one another.

    >>> import numtile as nt
    >>> q = nt.random.normal(size=(1, 5, 8), seed=0, tile_shape=(1, 2, 4))
    >>> kv = nt.random.normal(size=(1, 5, 2), seed=1, tile_shape=(1, 2, 2))
    >>> grouped_query_attention(q, kv, kv, n_head=4, n_kv_head=1, head_tile=2).shape
    (1, 5, 8)
    """
    if q.ndim != 3 or k.ndim != 3 or k.shape != v.shape or q.shape[:2] != k.shape[:2]:
        raise ValueError(
            f"attention expects q (B, T, H*D) and k, v (B, T, Hkv*D), got {q.shape}, {k.shape}, "
            f"{v.shape}"
        )
    if n_kv_head < 1 or n_head % n_kv_head or q.shape[2] % n_head:
        raise ValueError(
            f"n_head {n_head} must be a multiple of n_kv_head {n_kv_head} and divide the "
            f"query width {q.shape[2]}"
        )
    D, group = q.shape[2] // n_head, n_head // n_kv_head
    if k.shape[2] != n_kv_head * D:
        raise ValueError(f"k has width {k.shape[2]}, expected n_kv_head * D = {n_kv_head * D}")
    if head_tile < 1 or n_head % head_tile or (head_tile % group and group % head_tile):
        raise ValueError(
            f"head_tile {head_tile} must divide n_head {n_head} and divide or be a multiple of "
            f"the group size {group}"
        )
    return GroupedQueryAttention.apply(q, k, v, n_head, n_kv_head, head_tile, causal)
