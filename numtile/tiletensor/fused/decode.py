"""Decoding with a key/value cache: the cache, writing new key/value rows into it, and the
attention of the newest position against it.

A cache holds one layer's keys or values as a (B, L, C) TileTensor preallocated to its final
length ``L``: tiles are (batch tile, cache tile, ``head_tile`` heads * D), the heads grouped
as in ``qkv`` so that a key tile of ``qkv`` lands in the cache tile of the same column.
``cache_write`` copies rows [position, position + T) of the projection ``qkv`` (B, T, 3C)
into the k and v caches, one task per (source tile, cache tile) overlap, each writing one
cache tile. ``decode_attention`` is the attention of a single new query position against
the first ``n_keys`` cached rows: per (batch tile, head group) one task per cache tile
updates a running max, sum and output (online softmax), then one finalize task writes the
output tile. The cost of a step is one position, not a re-run of the prefix.
"""

from __future__ import annotations

import math

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import empty, fill_tiles, zeros
from numtile.tiletensor.fused.rows import match_last_tile
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

R, W, RW = Access.R, Access.W, Access.RW


def kv_cache(batch: int, length: int, n_embd: int, tile_shape, dtype) -> TileTensor:
    """An empty (batch, length, n_embd) cache; ``tile_shape`` is (batch, seq, head width)."""
    return empty((batch, length, n_embd), dtype, tile_shape)


def cache_write(qkv: TileTensor, k_cache: TileTensor, v_cache: TileTensor, position: int) -> None:
    """Copy the keys and values of ``qkv`` (B, T, 3C) into rows [position, position + T) of
    the caches (B, L, C), whose tiles must match ``qkv``'s in batch and head width.

    >>> import numtile as nt, numpy as np
    >>> qkv = nt.from_numpy(np.arange(12.0).reshape(1, 2, 6), tile_shape=(1, 1, 2))
    >>> k, v = (kv_cache(1, 4, 2, (1, 3, 2), np.float64) for _ in range(2))
    >>> cache_write(qkv, k, v, 1)
    >>> v.to_numpy()[0, 1:3].tolist()
    [[4.0, 5.0], [10.0, 11.0]]
    """
    B, T, C3 = qkv.shape
    C = C3 // 3
    width = k_cache.tile_shape[2]
    qkv = match_last_tile(qkv, width)
    if position < 0 or position + T > k_cache.shape[1]:
        raise ValueError(
            f"rows [{position}, {position + T}) do not fit a cache of length {k_cache.shape[1]}"
        )
    if qkv.tile_shape[0] != k_cache.tile_shape[0] or k_cache.shape != (B, k_cache.shape[1], C):
        raise ValueError(f"qkv {qkv.shape} tiles {qkv.tile_shape} do not fit cache {k_cache}")
    groups = qkv.grid[2] // 3
    runtime = get_runtime()
    s_starts, c_starts = qkv.layout.starts[1], k_cache.layout.starts[1]
    for b in range(qkv.grid[0]):
        for i in range(qkv.grid[1]):
            lo, hi = position + s_starts[i], position + s_starts[i + 1]
            for j in range(k_cache.grid[1]):
                a, z = max(lo, c_starts[j]), min(hi, c_starts[j + 1])
                if a >= z:
                    continue
                args = (a - lo, a - c_starts[j], z - a)
                for h in range(groups):
                    for part, cache in ((1, k_cache), (2, v_cache)):
                        runtime.submit(
                            codelets.decode.kv_cache_write,
                            [(qkv.tile((b, i, part * groups + h)), R), (cache.tile((b, j, h)), RW)],
                            args,
                        )


def decode_attention(
    qkv: TileTensor, k_cache: TileTensor, v_cache: TileTensor, n_keys: int, n_head: int
) -> TileTensor:
    """Attention (B, 1, C) of the one query position of ``qkv`` (B, 1, 3C) against the first
    ``n_keys`` rows of the caches (its own key and value already written there).

    >>> import numtile as nt, numpy as np
    >>> qkv = nt.random.normal(size=(1, 1, 6), seed=0, tile_shape=(1, 1, 2))
    >>> k, v = (kv_cache(1, 3, 2, (1, 2, 2), np.float64) for _ in range(2))
    >>> cache_write(qkv, k, v, 0)
    >>> out = decode_attention(qkv, k, v, 1, n_head=1).to_numpy()
    >>> bool(np.allclose(out, qkv.to_numpy()[..., 4:]))  # one key: the output is its value
    True
    """
    B, T, C3 = qkv.shape
    if T != 1:
        raise ValueError(f"decode_attention takes one query position, got qkv of shape {qkv.shape}")
    C = C3 // 3
    D = C // n_head
    width = k_cache.tile_shape[2]
    head_tile = width // D
    qkv = match_last_tile(qkv, width)
    groups = qkv.grid[2] // 3
    scale = 1.0 / math.sqrt(D)
    out = TileTensor(Layout((B, 1, C), (qkv.tile_shape[0], 1, width)), qkv.dtype)
    stats = Layout((B, 1, n_head), (qkv.tile_shape[0], 1, head_tile))
    m = TileTensor(stats, np.float64)
    fill_tiles(m, -np.inf)
    l = zeros(stats.shape, np.float64, stats.tile_shape)
    acc = zeros(out.shape, np.float64, out.tile_shape)
    starts = k_cache.layout.starts[1]
    runtime = get_runtime()
    for b in range(qkv.grid[0]):
        for h in range(groups):
            state = [(m.tile((b, 0, h)), RW), (l.tile((b, 0, h)), RW), (acc.tile((b, 0, h)), RW)]
            for j in range(k_cache.grid[1]):
                if starts[j] >= n_keys:
                    break
                count = min(n_keys, starts[j + 1]) - starts[j]
                runtime.submit(
                    codelets.decode.decode_attention,
                    [(qkv.tile((b, 0, h)), R), (k_cache.tile((b, j, h)), R)]
                    + [(v_cache.tile((b, j, h)), R)]
                    + state,
                    (head_tile, scale, count),
                )
            runtime.submit(
                codelets.decode.decode_finalize,
                [(acc.tile((b, 0, h)), R), (l.tile((b, 0, h)), R), (out.tile((b, 0, h)), W)],
                (head_tile,),
            )
    return out
