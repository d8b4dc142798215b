"""Tiled linear algebra: matmul, Cholesky, triangular and SPD solves, norms."""

from __future__ import annotations

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.codelets.linalg import (
    check_diagonal,
    check_symmetric,
    gemm,
    potrf,
    syrk,
    trsm,
)
from numtile.tiletensor.creation import fill_tiles
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import bool_, result_type
from numtile.tiletensor.elementwise import abs as absolute
from numtile.tiletensor.elementwise import astype
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.manipulation import reshape, retile
from numtile.tiletensor.reduction import max as tensor_max
from numtile.tiletensor.reduction import require_tensor, vector_norm
from numtile.tiletensor.reduction import sum as tensor_sum
from numtile.tiletensor.tensor import TileTensor

R, W, RW = Access.R, Access.W, Access.RW


def _float_operands(name, *tensors):
    for t in tensors:
        if not isinstance(t, TileTensor):
            raise TypeError(f"{name} expects TileTensors, got {type(t).__name__}")
    dtype = result_type(*(t.dtype for t in tensors))
    if dtype == bool_:
        raise TypeError(f"{name} of boolean tensors is not supported")
    return [t if t.dtype == dtype else astype(t, dtype) for t in tensors], dtype


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
    (x1, x2), dtype = _float_operands("matmul", x1, x2)
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
        for k in range(inner):
            a = x1.tile(b1 + ((k, i) if ta else (i, k)))
            b = x2.tile(b2 + ((j, k) if tb else (k, j)))
            beta = 0.0 if k == 0 else 1.0
            runtime.submit(gemm, [(a, R), (b, R), (c, W if k == 0 else RW)], (ta, tb, 1.0, beta))
    if vector1 and vector2:
        return reshape(out, out.shape[:-2])
    if vector1:
        return reshape(out, out.shape[:-2] + out.shape[-1:])
    if vector2:
        return reshape(out, out.shape[:-1])
    return out


def _square_tiles(a: TileTensor, name: str) -> TileTensor:
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} needs a square 2-d matrix, got shape {a.shape}")
    tile = min(a.tile_shape)
    return a if a.tile_shape == (tile, tile) else retile(a, (tile, tile))


@dispatched(public="numtile.linalg.cholesky")
def cholesky(x: TileTensor, /, *, upper: bool = False) -> TileTensor:
    """Lower Cholesky factor L of a symmetric positive definite matrix (x = L @ L.T).

    Right-looking tiled algorithm: POTRF on the diagonal tile, TRSM below it, then
    SYRK/GEMM updates of the trailing matrix, all independent updates in parallel. A matrix
    that is not positive definite raises ``numpy.linalg.LinAlgError`` when the result is
    read. Only the lower triangle of ``x`` is used.

    >>> import numtile as nt, numpy as np
    >>> a = nt.from_numpy(np.array([[4.0, 2.0], [2.0, 5.0]]), tile_shape=(1, 1))
    >>> nt.linalg.cholesky(a).to_numpy().tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    (x,), dtype = _float_operands("cholesky", x)
    if dtype.kind != "f":
        (x,), dtype = [astype(x, np.float64)], np.dtype(np.float64)
    x = _square_tiles(x, "cholesky")
    out = astype(x, dtype, copy=True)
    n = out.grid[0]
    tile = out.tile_shape[0]
    runtime = get_runtime()
    for i in range(n):
        for j in range(i + 1, n):
            runtime.submit(codelets.copy.fill, [(out.tile((i, j)), W)], (dtype.type(0),))
    for k in range(n):
        akk = out.tile((k, k))
        runtime.submit(potrf, [(akk, RW)], (k * tile,), priority=3 * (n - k))
        for i in range(k + 1, n):
            runtime.submit(
                trsm,
                [(akk, R), (out.tile((i, k)), RW)],
                (False, True, True, False, 1.0),
                priority=2 * (n - k),
            )
        for i in range(k + 1, n):
            aik = out.tile((i, k))
            runtime.submit(
                syrk,
                [(aik, R), (out.tile((i, i)), RW)],
                (False, -1.0, 1.0),
                priority=(n - k) + (1 if i == k + 1 else 0),
            )
            for j in range(k + 1, i):
                runtime.submit(
                    gemm,
                    [(aik, R), (out.tile((j, k)), R), (out.tile((i, j)), RW)],
                    (False, True, -1.0, 1.0),
                    priority=(n - k) + (1 if j == k + 1 else 0),
                )
    return out.mT if upper else out


@dispatched(public="numtile.linalg.solve_triangular")
def solve_triangular(
    a: TileTensor,
    b: TileTensor,
    /,
    *,
    lower: bool = True,
    trans: bool = False,
    unit_diagonal: bool = False,
) -> TileTensor:
    """Solve op(a) @ x = b for x with a triangular (``op`` transposes when ``trans``).

    Like ``scipy.linalg.solve_triangular`` (but ``lower`` defaults to True); ``b`` may be
    1-D or 2-D. Tiles of x are solved with TRSM and the rest updated with GEMM.

    >>> import numtile as nt, numpy as np
    >>> L = nt.from_numpy(np.array([[2.0, 0.0], [1.0, 4.0]]), tile_shape=(1, 1))
    >>> b = nt.from_numpy(np.array([2.0, 9.0]), tile_shape=1)
    >>> nt.linalg.solve_triangular(L, b).to_numpy().tolist()
    [1.0, 2.0]
    """
    (a, b), dtype = _float_operands("solve_triangular", a, b)
    if dtype.kind != "f":
        (a, b), dtype = [astype(a, np.float64), astype(b, np.float64)], np.dtype(np.float64)
    a = _square_tiles(a, "solve_triangular")
    vector = b.ndim == 1
    if vector:
        b = reshape(b, (b.shape[0], 1))
    if b.ndim != 2 or b.shape[0] != a.shape[0]:
        raise ValueError(
            f"solve_triangular: a has shape {a.shape} but b has shape {b.shape}; "
            f"b must have {a.shape[0]} rows"
        )
    tile = a.tile_shape[0]
    b = retile(b, (tile, b.tile_shape[1]))
    x = astype(b, dtype, copy=True)
    n = a.grid[0]
    if not unit_diagonal:  # a zero pivot raises LinAlgError when x is read
        _guard(x, [(check_diagonal, [a.tile((k, k))], (k * tile,), k) for k in range(n)])
    # op(a) is lower-triangular when exactly one of lower / trans holds: solve top down
    forward = lower != trans
    order = range(n) if forward else range(n - 1, -1, -1)
    runtime = get_runtime()

    def a_tile(i, k):  # tile (i, k) of op(a) and whether to transpose it
        return (a.tile((k, i)), True) if trans else (a.tile((i, k)), False)

    for c in range(x.grid[1]):
        for step, k in enumerate(order):
            xk = x.tile((k, c))
            runtime.submit(
                trsm,
                [(a.tile((k, k)), R), (xk, RW)],
                (True, lower, trans, unit_diagonal, 1.0),
                priority=2,
            )
            for i in list(order)[step + 1 :]:
                aik, transposed = a_tile(i, k)
                runtime.submit(
                    gemm,
                    [(aik, R), (xk, R), (x.tile((i, c)), RW)],
                    (transposed, False, -1.0, 1.0),
                )
    return reshape(x, (x.shape[0],)) if vector else x


@dispatched(public="numtile.linalg.solve")
def solve(a: TileTensor, b: TileTensor, /) -> TileTensor:
    """Solve a @ x = b for a symmetric positive definite ``a`` (Cholesky, two triangular solves).

    >>> import numtile as nt, numpy as np
    >>> a = nt.from_numpy(np.array([[4.0, 2.0], [2.0, 5.0]]), tile_shape=(1, 1))
    >>> b = nt.from_numpy(np.array([6.0, 7.0]), tile_shape=1)
    >>> np.round(nt.linalg.solve(a, b).to_numpy(), 12).tolist()
    [1.0, 1.0]
    """
    (a, b), dtype = _float_operands("solve", a, b)
    if dtype.kind != "f":
        (a, b) = astype(a, np.float64), astype(b, np.float64)
    a = _square_tiles(a, "solve")
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(
            f"solve: a has shape {a.shape} but b has shape {b.shape}; b must be 1-d or 2-d "
            f"with {a.shape[0]} rows"
        )
    n, tile = a.grid[0], a.tile_shape[0]
    b = astype(retile(b, (tile,) + b.tile_shape[1:]), b.dtype, copy=True)  # checks guard it
    checks = []
    for i in range(n):
        tiles = [a.tile((i, i))]
        for j in range(i + 1, n):
            tiles += [a.tile((i, j)), a.tile((j, i))]
        checks.append((check_symmetric, tiles, (i, n - 1 - i, tile), i))
    _guard(b, checks)
    factor = cholesky(a)
    y = solve_triangular(factor, b, lower=True)
    return solve_triangular(factor, y, lower=True, trans=True)


def _guard(x: TileTensor, checks) -> None:
    """Submit each ``(codelet, read tiles, args, row)`` check before anything reads tile row
    ``row`` of ``x``: the check writes that row (RW), so a failed check fails ``x``."""
    runtime = get_runtime()
    columns = x.grid[1] if x.ndim == 2 else 1
    for codelet, tiles, args, row in checks:
        guarded = [x.tile((row, c) if x.ndim == 2 else (row,)) for c in range(columns)]
        runtime.submit(codelet, [(t, R) for t in tiles] + [(g, RW) for g in guarded], args)


@dispatched(public="numtile.linalg.matrix_norm")
def matrix_norm(x: TileTensor, /, *, keepdims: bool = False, ord="fro") -> TileTensor:
    """Matrix norm over the last two axes: ``'fro'`` (Frobenius), 1 or inf.

    >>> import numtile as nt
    >>> nt.linalg.matrix_norm(nt.full((2, 2), 2.0)).item()
    4.0
    """
    require_tensor(x, "matrix_norm")
    if x.ndim < 2:
        raise ValueError(f"matrix_norm needs at least 2 axes, got shape {x.shape}")
    if ord == "fro":
        return vector_norm(x, axis=(-2, -1), keepdims=keepdims)
    if ord in (1, np.inf, "inf"):
        # 1: largest column sum of |x|; inf: largest row sum
        summed, largest = (-2, -1) if ord == 1 else (-1, -2)
        sums = tensor_sum(absolute(x), axis=summed, keepdims=True)
        if keepdims:
            return tensor_max(sums, axis=largest, keepdims=True)
        return reshape(tensor_max(sums, axis=largest), x.shape[:-2])
    raise ValueError(f"matrix_norm: unsupported ord {ord!r}; expected 'fro', 1 or inf")
