"""Tiled matrix product: 2-d, batched (broadcast batch axes) and 1-d, transposes as flags."""

from __future__ import annotations

import numpy as np

from numtile.runtime import get_runtime
from numtile.tiletensor.codelets.linalg import gemm, gemm_bf16, gemm_rounded
from numtile.tiletensor.creation import fill_tiles
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import as_dtype, is_bfloat16
from numtile.tiletensor.elementwise import astype, conj
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.linalg.common import RW, R, W, float_operands
from numtile.tiletensor.manipulation import reshape, retile
from numtile.tiletensor.placement import zero_first
from numtile.tiletensor.precision import FULL, gemm_rounding
from numtile.tiletensor.tensor import TileTensor


@dispatched
def matmul(
    x1: TileTensor,
    x2: TileTensor,
    *,
    transpose_a: bool = False,
    transpose_b: bool = False,
    out_dtype=None,
    conjugate_a: bool = False,
    conjugate_b: bool = False,
) -> TileTensor:
    """Matrix product with NumPy semantics: 2-D, batched (broadcast batch axes) and 1-D.

    ``transpose_a``/``transpose_b`` multiply by the matrix transpose of an operand (its last
    two axes swapped) without copying it: the GEMM tasks read its tiles transposed.
    ``conjugate_a``/``conjugate_b`` take the complex conjugate of an operand (with the
    transpose flag, its conjugate transpose, which the GEMM tasks read as BLAS's 'C' without
    a copy; alone, one conjugating copy). Tile (i, j) of the result is a chain of GEMM tasks
    over the inner tiles; different result tiles run in parallel. Floating and complex tiles
    multiply through BLAS (s/d/c/zgemm), one thread per worker.

    >>> import numtile as nt, numpy as np
    >>> a = nt.from_numpy(np.arange(6.0).reshape(2, 3), tile_shape=(1, 2))
    >>> (a @ a.T).to_numpy().tolist()
    [[5.0, 14.0], [14.0, 50.0]]
    >>> nt.linalg.matmul(a, a, transpose_b=True).to_numpy().tolist()
    [[5.0, 14.0], [14.0, 50.0]]
    """
    (x1, x2), dtype = float_operands("matmul", x1, x2)
    narrow = is_bfloat16(dtype)
    if out_dtype is not None and as_dtype(out_dtype) not in (dtype, np.dtype(np.float32)):
        raise ValueError(f"matmul: out_dtype must be {dtype} or float32, got {out_dtype}")
    if out_dtype is not None and not narrow and as_dtype(out_dtype) != dtype:
        raise ValueError(f"matmul: out_dtype float32 needs bfloat16 operands, got {dtype}")
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("matmul does not accept 0-d tensors; use *")
    if (transpose_a and x1.ndim < 2) or (transpose_b and x2.ndim < 2):
        raise ValueError("transpose_a/transpose_b need operands with at least 2 axes")
    ta, tb = bool(transpose_a), bool(transpose_b)
    complex_tiles = dtype.kind == "c"
    conjugated = complex_tiles and bool(conjugate_a), complex_tiles and bool(conjugate_b)
    if conjugated[0] and not ta:
        x1 = conj(x1)
    if conjugated[1] and not tb:
        x2 = conj(x2)
    # BLAS flags: 2 is the conjugate transpose; complex kernels take every flag as an integer,
    # real ones as booleans (one compiled signature each)
    flag_a, flag_b = (2 if c and t else t for c, t in zip(conjugated, (ta, tb)))
    if complex_tiles:
        flag_a, flag_b = int(flag_a), int(flag_b)
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
    out = TileTensor(layout, np.float32 if narrow else dtype)
    inner = x1.grid[k1_axis]
    runtime = get_runtime()
    # the precision mode (numtile.tiletensor.precision) rounds float32 GEMMs' inputs/result
    in_bits, out_bits = gemm_rounding() if np.dtype(dtype) == np.float32 else (FULL, FULL)
    codelet = gemm_bf16 if narrow else gemm
    if inner == 0:
        fill_tiles(out, 0)
    for index, c in zip(layout.indices(), out.handles):
        bi = index[:nb]
        b1 = tuple(0 if g == 1 else i for g, i in zip(x1.grid[:nb], bi))
        b2 = tuple(0 if g == 1 else i for g, i in zip(x2.grid[:nb], bi))
        i, j = index[-2], index[-1]
        pairs = [
            (x1.tile(b1 + ((k, i) if ta else (i, k))), x2.tile(b2 + ((j, k) if tb else (k, j))))
            for k in range(inner)
        ]
        split = inner > 0 and zero_first(runtime, c, pairs)
        for k, (a, b) in enumerate(pairs):
            first = k == 0 and not split
            accesses = [(a, R), (b, R), (c, W if first else RW)]
            args = (flag_a, flag_b, 1.0, 0.0 if first else 1.0)
            if (in_bits, out_bits) == (FULL, FULL):
                runtime.submit(codelet, accesses, args)
            else:
                last_bits = out_bits if k == inner - 1 else FULL
                runtime.submit(gemm_rounded, accesses, args + (in_bits, last_bits))
    if narrow and as_dtype(out_dtype or dtype) == dtype:
        out = astype(out, dtype)  # the float32 sums rounded once, as torch's bf16 matmul
    if vector1 and vector2:
        return reshape(out, out.shape[:-2])
    if vector1:
        return reshape(out, out.shape[:-2] + out.shape[-1:])
    if vector2:
        return reshape(out, out.shape[:-1])
    return out
