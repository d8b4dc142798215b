"""Causal self-attention of the fused projection ``qkv``: one autograd Function over the
flash-style tiled op of ``numtile.tiletensor.fused.attention`` (never a T x T matrix)."""

from __future__ import annotations

from numtile.autograd.tape import Function
from numtile.tiletensor.fused.attention import attention_backward, attention_forward
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
