"""Tiled LU factorisation with partial pivoting and what is built on it: the general solve,
the inverse and the determinants.

The factorisation is right-looking, as PLASMA's and Chameleon's ``getrf``: for each tile
column k, one panel task runs LAPACK's getrf on the column's tiles from the diagonal down
(pivoting across the whole panel); a laswp task per trailing column applies the panel's row
interchanges, TRSM solves the row of U and GEMM updates the trailing matrix. Priorities
follow the critical path: panels first, then the work on column k + 1 (which the next panel
waits for), then the rest of the update, and last the interchanges of the columns of L to
the left, which nothing but the result reads. So panel k + 1 runs while step k's update
still does. The copy of the input is submitted column by column at its panel's priority, so
panel 0 starts once column 0 is copied and the rest of the copy runs beside it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from numtile.runtime import get_runtime
from numtile.tiletensor.codelets.copy import copy_strided
from numtile.tiletensor.codelets.linalg import gemm, slogdet_factor, trsm
from numtile.tiletensor.codelets.lu import getrf_panel, identity, laswp
from numtile.tiletensor.codelets.lu import slogdet as slogdet_task
from numtile.tiletensor.creation import zeros
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.elementwise import astype, exp, multiply
from numtile.tiletensor.elementwise_core import element_strides, shape_array
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.linalg import batched
from numtile.tiletensor.linalg.cholesky import solve_spd, solve_triangular
from numtile.tiletensor.linalg.common import RW, R, W, float_matrices, square_tiles
from numtile.tiletensor.manipulation import reshape, retile
from numtile.tiletensor.tensor import TileTensor


def _matrix(a: TileTensor, name: str) -> TileTensor:
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise np.linalg.LinAlgError(
            f"{name}: expected a square 2-d matrix, got an array of shape {a.shape}"
        )
    return square_tiles(a, name)


def _stacked(a: TileTensor, name: str) -> bool:
    """Whether ``a`` is a stack of matrices (more than 2 axes); raise unless they are square."""
    if a.ndim > 2 and a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(
            f"{name}: expected a stack of square matrices, got an array of shape {a.shape}"
        )
    return a.ndim > 2


def lu_factor(a: TileTensor, singular_raises: bool = True) -> tuple[TileTensor, TileTensor]:
    """P a = L U of a square matrix with square tiles: (the factor, L below its diagonal and
    U on and above it; int64 pivots, tile k relative to row k * tile as LAPACK's ipiv less
    one). A zero pivot fails the factor when ``singular_raises``; non-finite input always."""
    n, tile, order = a.grid[0], a.tile_shape[0], a.shape[0]
    pivots = TileTensor(Layout((order,), (tile,)), np.int64)
    runtime = get_runtime()
    panel_first, next_column = 3 * n, 2 * n
    lu = TileTensor(a.layout, a.dtype)
    for j in range(n):  # the copy, by columns: panel 0 starts once column 0 is copied
        for i in range(n):
            shape = a.tile((i, j)).shape
            strides = element_strides(shape, shape)
            runtime.submit(
                copy_strided,
                [(a.tile((i, j)), R), (lu.tile((i, j)), W)],
                (0, strides, 0, strides, shape_array(shape)),
                priority=panel_first + n - j,
            )

    def column(j, k):  # tiles (k..n-1, j): the rows step k's interchanges touch
        return [(lu.tile((i, j)), RW) for i in range(k, n)]

    for k in range(n):
        runtime.submit(
            getrf_panel,
            column(k, k) + [(pivots.tile((k,)), W)],
            (k * tile, order, singular_raises),
            priority=panel_first + n - k,
        )
        for j in range(k + 1, n):
            priority = (next_column if j == k + 1 else 0) + n - k
            runtime.submit(laswp, column(j, k) + [(pivots.tile((k,)), R)], priority=priority)
            ukj = lu.tile((k, j))
            runtime.submit(
                trsm, [(lu.tile((k, k)), R), (ukj, RW)], (True, True, False, True, 1.0), priority
            )
            for i in range(k + 1, n):
                runtime.submit(
                    gemm,
                    [(lu.tile((i, k)), R), (ukj, R), (lu.tile((i, j)), RW)],
                    (False, False, -1.0, 1.0),
                    priority=priority,
                )
        for j in range(k):
            runtime.submit(laswp, column(j, k) + [(pivots.tile((k,)), R)], priority=0)
    return lu, pivots


def lu_solve(lu: TileTensor, pivots: TileTensor, b: TileTensor) -> TileTensor:
    """x with a @ x = b from ``lu_factor(a)``; ``b`` (2-d, lu's row tiles) is overwritten."""
    runtime = get_runtime()
    n = lu.grid[0]
    for c in range(b.grid[1]):
        for k in range(n):
            tiles = [(b.tile((i, c)), RW) for i in range(k, n)]
            runtime.submit(laswp, tiles + [(pivots.tile((k,)), R)], priority=1)
    y = solve_triangular(lu, b, lower=True, unit_diagonal=True)
    return solve_triangular(lu, y, lower=False)


def _right_hand_side(a: TileTensor, b: TileTensor) -> TileTensor:
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(
            f"solve: a has shape {a.shape} but b has shape {b.shape}; b must be 1-d or 2-d "
            f"with {a.shape[0]} rows"
        )
    matrix = b if b.ndim == 2 else reshape(b, (b.shape[0], 1))
    tiles = (a.tile_shape[0], matrix.tile_shape[1])
    if matrix.tile_shape != tiles:
        return retile(matrix, tiles)
    return astype(matrix, matrix.dtype, copy=True)  # the solves write it


@dispatched(public="numtile.linalg.solve")
def solve(a: TileTensor, b: TileTensor, /, *, assume_a: str = "gen") -> TileTensor:
    """Solve a @ x = b for a square ``a``: LU with partial pivoting (``assume_a="gen"``, the
    default) or Cholesky for a symmetric positive definite ``a`` (``assume_a="pos"``, which
    fails x on a non-symmetric ``a``), as ``scipy.linalg.solve``. ``b`` is 1-d or 2-d. A
    singular ``a`` raises ``numpy.linalg.LinAlgError``, and one with infs or NaNs
    ``ValueError``, when x is read. Stacks as the array API's ``solve``: ``a`` (..., M, M),
    ``b`` (M,) or (..., M, K) with batch axes that broadcast against a's.

    >>> import numtile as nt, numpy as np
    >>> a = nt.from_numpy(np.array([[1.0, 2.0], [3.0, 4.0]]), tile_shape=(1, 1))
    >>> b = nt.from_numpy(np.array([5.0, 6.0]), tile_shape=1)
    >>> np.round(nt.linalg.solve(a, b).to_numpy(), 12).tolist()
    [-4.0, 4.5]
    """
    if assume_a not in ("gen", "pos"):
        raise ValueError(f"solve: assume_a must be 'gen' or 'pos', got {assume_a!r}")
    (a, b), _ = float_matrices("solve", a, b)
    if _stacked(a, "solve") or b.ndim > 2:
        return _solve_stack(a, b, assume_a)
    return _solve_matrix(a, b, assume_a)


def _solve_matrix(a: TileTensor, b: TileTensor, assume_a: str = "gen") -> TileTensor:
    a = _matrix(a, "solve")
    rhs = _right_hand_side(a, b)
    if assume_a == "pos":
        x = solve_spd(a, rhs)
    else:
        x = lu_solve(*lu_factor(a), rhs)
    return reshape(x, (x.shape[0],)) if b.ndim == 1 else x


def _solve_stack(a: TileTensor, b: TileTensor, assume_a: str) -> TileTensor:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(
            f"solve: expected a stack of square matrices, got an array of shape {a.shape}"
        )
    order = a.shape[-1]
    vector = b.ndim == 1
    if vector:  # (M,) -> (M, 1)
        b = reshape(b, (b.shape[0], 1))
    if b.shape[-2] != order:
        raise ValueError(
            f"solve: a has shape {a.shape} but b has shape {b.shape}; b must be (M,) or "
            f"(..., M, K) with M = {order}"
        )
    if assume_a == "pos":  # keeps the symmetry check of the 2-d path
        pair = batched.broadcast_pair(a, b, "solve")
        x = batched.per_matrix(lambda m, r: _solve_matrix(m, r, "pos"), *pair)
    else:
        x = batched.solve(a, b, _solve_matrix)
    return reshape(x, x.shape[:-1]) if vector else x  # (..., M, 1) -> (..., M)


def identity_matrix(n: int, tile: int, dtype) -> TileTensor:
    """The n x n identity with square tiles of side ``tile``."""
    out = zeros((n, n), dtype, tile_shape=(tile, tile))
    runtime = get_runtime()
    for k in range(out.grid[0]):
        runtime.submit(identity, [(out.tile((k, k)), W)])
    return out


@dispatched(public="numtile.linalg.inv")
def inv(x: TileTensor, /) -> TileTensor:
    """The inverse of a square matrix (LU, then a solve for the identity); a singular ``x``
    raises ``numpy.linalg.LinAlgError`` when the result is read. A stack (..., M, M) gives the
    stack of inverses.

    >>> import numtile as nt, numpy as np
    >>> a = nt.from_numpy(np.array([[2.0, 0.0], [0.0, 4.0]]), tile_shape=(1, 1))
    >>> nt.linalg.inv(a).to_numpy().tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    (x,), dtype = float_matrices("inv", x)
    if _stacked(x, "inv"):
        return batched.inv(x, inv)
    x = _matrix(x, "inv")
    return lu_solve(*lu_factor(x), identity_matrix(x.shape[0], x.tile_shape[0], dtype))


class SlogdetResult(NamedTuple):
    """``slogdet``'s result, as NumPy's: det = sign * exp(logabsdet)."""

    sign: TileTensor
    logabsdet: TileTensor


@dispatched(public="numtile.linalg.slogdet")
def slogdet(x: TileTensor, /) -> SlogdetResult:
    """Sign and natural log of the absolute value of the determinant of a square matrix,
    from its LU factorisation; a singular ``x`` gives (0, -inf), as NumPy. A stack
    (..., M, M) gives two tensors of its batch shape.

    >>> import numtile as nt, numpy as np
    >>> a = nt.from_numpy(np.array([[1.0, 2.0], [3.0, 4.0]]), tile_shape=(1, 1))
    >>> sign, logabs = nt.linalg.slogdet(a)
    >>> sign.item(), round(float(np.exp(logabs.item())), 12)
    (-1.0, 2.0)
    """
    (x,), dtype = float_matrices("slogdet", x)
    if _stacked(x, "slogdet"):
        return SlogdetResult(*batched.slogdet(x, slogdet))
    x = _matrix(x, "slogdet")
    lu, pivots = lu_factor(x, singular_raises=False)
    n = lu.grid[0]
    real = batched.real_dtype(dtype)  # log|det| is real, the sign complex for complex x
    sign, logabs = TileTensor(Layout((), ()), dtype), TileTensor(Layout((), ()), real)
    tiles = [(lu.tile((k, k)), R) for k in range(n)] + [(pivots.tile((k,)), R) for k in range(n)]
    task = slogdet_factor if dtype.kind == "c" else slogdet_task
    get_runtime().submit(task, tiles + [(sign.tile(()), W), (logabs.tile(()), W)], (n,))
    return SlogdetResult(sign, logabs)


@dispatched(public="numtile.linalg.det")
def det(x: TileTensor, /) -> TileTensor:
    """The determinant of a square matrix (sign * exp(log|det|) from ``slogdet``).

    >>> import numtile as nt, numpy as np
    >>> a = nt.from_numpy(np.array([[1.0, 2.0], [3.0, 4.0]]), tile_shape=(1, 1))
    >>> round(nt.linalg.det(a).item(), 12)
    -2.0
    """
    sign, logabs = slogdet(x)
    return multiply(sign, exp(logabs))
