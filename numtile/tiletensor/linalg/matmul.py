"""Tiled matrix product: 2-d, batched (broadcast batch axes) and 1-d, transposes as flags."""

from __future__ import annotations

import numpy as np

from numtile.runtime import get_runtime
from numtile.tiletensor.codelets.linalg import gemm
from numtile.tiletensor.creation import fill_tiles
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.linalg.common import RW, R, W, float_operands
from numtile.tiletensor.manipulation import reshape, retile
from numtile.tiletensor.placement import zero_first
from numtile.tiletensor.tensor import TileTensor


@dispatched
def matmul(
    x1: TileTensor, x2: TileTensor, *, transpose_a: bool = False, transpose_b: bool = False
) -> TileTensor:
    """Matrix product with NumPy semantics: 2-D, batched (broadcast batch axes) and 1-D.

    ``transpose_a``/``transpose_b`` multiply by the matrix transpose of an operand (its last
    two axes swapped) without copying it: the GEMM tasks read its tiles transposed. Tile
    (i, j) of the result is a chain of GEMM tasks over the inner tiles; different result
    tiles run in parallel.

    >>> import numtile as nt, numpy as np
    >>> a = nt.from_numpy(np.arange(6.0).reshape(2, 3), tile_shape=(1, 2))
    >>> (a @ a.T).to_numpy().tolist()
    [[5.0, 14.0], [14.0, 50.0]]
    >>> nt.linalg.matmul(a, a, transpose_b=True).to_numpy().tolist()
    [[5.0, 14.0], [14.0, 50.0]]
    """
    (x1, x2), dtype = float_operands("matmul", x1, x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("matmul does not accept 0-d tensors; use *")
    if (transpose_a and x1.ndim < 2) or (transpose_b and x2.ndim < 2):
        raise ValueError("transpose_a/transpose_b need operands with at least 2 axes")
    ta, tb = bool(transpose_a), bool(transpose_b)
    k1 = x1.shape[-2] if ta else x1.shape[-1]
    k2 = x2.shape[0] if x2.ndim == 1 else (x2.shape[-1] if tb else x2.shape[-2])
    if k1 != k2:
        raise ValueError(
            f"matmul: inner dimensions differ: shapes {x1.shape}{'^T' if ta else ''} and "
            f"{x2.shape}{'^T' if tb else ''} ({k1} != {k2})"
        )
    vector1, vector2 = x1.ndim == 1, x2.ndim == 1
    if vector1:
        x1 = reshape(x1, (1, x1.shape[0]))
    if vector2:
        x2 = reshape(x2, (x2.shape[0], 1))
    try:
        batch = np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: batch shapes of {x1.shape} and {x2.shape} cannot be broadcast"
        ) from None
    nb = len(batch)
    if x1.ndim - 2 < nb:
        x1 = reshape(x1, (1,) * (nb - x1.ndim + 2) + x1.shape)
    if x2.ndim - 2 < nb:
        x2 = reshape(x2, (1,) * (nb - x2.ndim + 2) + x2.shape)
    m_axis, k1_axis = (-1, -2) if ta else (-2, -1)  # axes of x1 holding rows / inner
    k2_axis, n_axis = (-1, -2) if tb else (-2, -1)  # axes of x2 holding inner / columns
    batch_tiles, x2_tiles = [], list(x2.tile_shape)
    for axis in range(nb):
        if x1.shape[axis] == batch[axis] and batch[axis] != 1:
            batch_tiles.append(x1.tile_shape[axis])
            if x2.shape[axis] == batch[axis]:
                x2_tiles[axis] = x1.tile_shape[axis]
        else:
            batch_tiles.append(x2.tile_shape[axis])
    x2_tiles[k2_axis] = x1.tile_shape[k1_axis]  # inner tiles must meet
    if tuple(x2_tiles) != x2.tile_shape:
        x2 = retile(x2, tuple(x2_tiles))
    layout = Layout(
        tuple(batch) + (x1.shape[m_axis], x2.shape[n_axis]),
        tuple(batch_tiles) + (x1.tile_shape[m_axis], x2.tile_shape[n_axis]),
    )
    out = TileTensor(layout, dtype)
    inner = x1.grid[k1_axis]
    runtime = get_runtime()
    if inner == 0:
        fill_tiles(out, 0)
    for index, c in zip(layout.indices(), out.handles):
        bi = index[:nb]
        b1 = tuple(0 if g == 1 else i for g, i in zip(x1.grid[:nb], bi))
        b2 = tuple(0 if g == 1 else i for g, i in zip(x2.grid[:nb], bi))
        i, j = index[-2], index[-1]
        split = inner > 0 and zero_first(runtime, c)
        for k in range(inner):
            a = x1.tile(b1 + ((k, i) if ta else (i, k)))
            b = x2.tile(b2 + ((j, k) if tb else (k, j)))
            first = k == 0 and not split
            beta = 0.0 if first else 1.0
            runtime.submit(gemm, [(a, R), (b, R), (c, W if first else RW)], (ta, tb, 1.0, beta))
    if vector1 and vector2:
        return reshape(out, out.shape[:-2])
    if vector1:
        return reshape(out, out.shape[:-2] + out.shape[-1:])
    if vector2:
        return reshape(out, out.shape[:-1])
    return out
