"""Rotary position embedding of activations (B, T, heads * D), one task per tile.

The angles come as ``cos`` and ``sin`` tables (T, D / 2) of the positions, tiled along T like
the activations; a tile of ``x`` holds whole heads.
"""

from __future__ import annotations

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.fused.rows import match_last_tile
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W


def rope_forward(
    x: TileTensor, cos: TileTensor, sin: TileTensor, head_dim: int, inverse: bool = False
) -> TileTensor:
    """``x`` (B, T, heads * head_dim) with each head rotated by its position's angles (by minus
    them when ``inverse``: the backward), in tiles of whole heads.

    >>> import numtile as nt, numpy as np
    >>> x = nt.from_numpy(np.array([[[1.0, 0.0, 0.0, 1.0]]]))
    >>> cos, sin = nt.from_numpy(np.array([[0.0, 1.0]])), nt.from_numpy(np.array([[1.0, 0.0]]))
    >>> rope_forward(x, cos, sin, 4).to_numpy().tolist()
    [[[0.0, 0.0, 1.0, 1.0]]]
    """
    width = x.tile_shape[2] - x.tile_shape[2] % head_dim or head_dim
    x = match_last_tile(x, width)
    table_tiles = (x.tile_shape[1], cos.shape[1])
    if cos.tile_shape != table_tiles:
        cos, sin = retile(cos, table_tiles), retile(sin, table_tiles)
    out = TileTensor(x.layout, x.dtype)
    runtime = get_runtime()
    for b, i, c in x.layout.indices():
        runtime.submit(
            codelets.nn.rope,
            [(x.tile((b, i, c)), R), (cos.tile((i, 0)), R), (sin.tile((i, 0)), R)]
            + [(out.tile((b, i, c)), W)],
            (x.layout.tile_sizes(2)[c] // head_dim, inverse),
        )
    return out
