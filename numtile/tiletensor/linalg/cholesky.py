"""Tiled Cholesky, triangular solves and the symmetric positive definite solve."""

from __future__ import annotations

import numpy as np

from numtile.runtime import get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.codelets.linalg import (
    check_diagonal,
    check_symmetric,
    gemm,
    herk,
    potrf,
    syrk,
    trsm,
)
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.elementwise import astype, conj
from numtile.tiletensor.linalg import batched
from numtile.tiletensor.linalg.common import RW, R, W, float_operands, guard, square_tiles
from numtile.tiletensor.manipulation import reshape, retile
from numtile.tiletensor.tensor import TileTensor


@dispatched(public="numtile.linalg.cholesky")
def cholesky(x: TileTensor, /, *, upper: bool = False) -> TileTensor:
    """Lower Cholesky factor L of a symmetric positive definite matrix (x = L @ L.T), or of a
    Hermitian positive definite complex one (x = L @ L^H; ``upper`` gives L^H).

    Right-looking tiled algorithm: POTRF on the diagonal tile, TRSM below it, then
    SYRK/GEMM updates of the trailing matrix (HERK and GEMM with conjugate transposes for
    complex tiles), all independent updates in parallel. A matrix
    that is not positive definite raises ``numpy.linalg.LinAlgError`` when the result is
    read. Only the lower triangle of ``x`` is used. A stack of matrices (..., M, M) gives the
    stack of factors (see ``batched``).

    >>> import numtile as nt, numpy as np
    >>> a = nt.from_numpy(np.array([[4.0, 2.0], [2.0, 5.0]]), tile_shape=(1, 1))
    >>> nt.linalg.cholesky(a).to_numpy().tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    (x,), dtype = float_operands("cholesky", x)
    if dtype.kind not in "fc":
        (x,), dtype = [astype(x, np.float64)], np.dtype(np.float64)
    if x.ndim > 2:
        if x.shape[-1] != x.shape[-2]:
            raise ValueError(f"cholesky needs a stack of square matrices, got shape {x.shape}")
        out = batched.cholesky(x, _cholesky_matrix)
    else:
        out = _cholesky_matrix(x)
    if upper:
        return conj(out.mT) if dtype.kind == "c" else out.mT
    return out


def _cholesky_matrix(x: TileTensor) -> TileTensor:
    """The lower Cholesky factor of one 2-d matrix (the tiled algorithm)."""
    dtype = x.dtype
    x = square_tiles(x, "cholesky")
    out = astype(x, dtype, copy=True)
    n = out.grid[0]
    tile = out.tile_shape[0]
    runtime = get_runtime()
    # complex tiles: L_ik = A_ik L_kk^-H, A_ii -= L_ik L_ik^H (herk), A_ij -= L_ik L_jk^H
    adjoint = 2 if dtype.kind == "c" else True  # the GEMM/TRSM flag of the (conjugate) transpose
    update = herk if dtype.kind == "c" else syrk
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
                (False, True, adjoint, False, 1.0),
                priority=2 * (n - k),
            )
        for i in range(k + 1, n):
            aik = out.tile((i, k))
            runtime.submit(
                update,
                [(aik, R), (out.tile((i, i)), RW)],
                (False, -1.0, 1.0),
                priority=(n - k) + (1 if i == k + 1 else 0),
            )
            for j in range(k + 1, i):
                runtime.submit(
                    gemm,
                    [(aik, R), (out.tile((j, k)), R), (out.tile((i, j)), RW)],
                    (False, adjoint, -1.0, 1.0),
                    priority=(n - k) + (1 if j == k + 1 else 0),
                )
    return out


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
    """Solve op(a) @ x = b for x with a triangular (``op`` transposes when ``trans`` is True
    or 1, and takes the conjugate transpose when it is 2, as SciPy's ``trans``).

    Like ``scipy.linalg.solve_triangular`` (but ``lower`` defaults to True); ``b`` may be
    1-D or 2-D, or, for a stack ``a`` (..., M, M), a stack (..., M, K) (each matrix in
    turn). Tiles of x are solved with TRSM and the rest updated with GEMM.

    >>> import numtile as nt, numpy as np
    >>> L = nt.from_numpy(np.array([[2.0, 0.0], [1.0, 4.0]]), tile_shape=(1, 1))
    >>> b = nt.from_numpy(np.array([2.0, 9.0]), tile_shape=1)
    >>> nt.linalg.solve_triangular(L, b).to_numpy().tolist()
    [1.0, 2.0]
    """
    (a, b), dtype = float_operands("solve_triangular", a, b)
    if trans not in (False, True, 0, 1, 2):
        raise ValueError(f"solve_triangular: trans must be 0, 1 or 2, got {trans!r}")
    # the TRSM/GEMM flag: the conjugate transpose only where it differs from the transpose
    trans = 2 if trans == 2 and dtype.kind == "c" else bool(trans)
    if dtype.kind not in "fc":
        (a, b), dtype = [astype(a, np.float64), astype(b, np.float64)], np.dtype(np.float64)
    if a.ndim > 2 or b.ndim > 2:  # stacks: (..., M, M) and (M,) or (..., M, K), per matrix
        vector = b.ndim == 1
        if vector:
            b = reshape(b, (b.shape[0], 1))
        if a.ndim < 2 or a.shape[-1] != a.shape[-2] or b.shape[-2] != a.shape[-1]:
            raise ValueError(
                f"solve_triangular: a has shape {a.shape} and b {b.shape}; expected a stack of "
                f"square matrices (..., M, M) and b (M,) or (..., M, K)"
            )
        flags = {"lower": lower, "trans": trans, "unit_diagonal": unit_diagonal}
        pair = batched.broadcast_pair(a, b, "solve_triangular")
        x = batched.per_matrix(lambda m, r: solve_triangular(m, r, **flags), *pair)
        return reshape(x, x.shape[:-1]) if vector else x
    a = square_tiles(a, "solve_triangular")
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
        guard(x, [(check_diagonal, [a.tile((k, k))], (k * tile,), k) for k in range(n)])
    # op(a) is lower-triangular when exactly one of lower / trans holds: solve top down
    forward = lower != bool(trans)
    order = range(n) if forward else range(n - 1, -1, -1)
    runtime = get_runtime()

    def a_tile(i, k):  # tile (i, k) of op(a) and whether to transpose it
        return (a.tile((k, i)), trans) if trans else (a.tile((i, k)), False)

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


def solve_spd(a: TileTensor, b: TileTensor) -> TileTensor:
    """Solve a @ x = b for a symmetric (Hermitian) positive definite ``a`` (Cholesky, two
    triangular solves): ``nt.linalg.solve(a, b, assume_a="pos")``; a non-symmetric ``a``
    fails x.
    ``a`` has square tiles and ``b`` (1-d or 2-d, a's row tiles) is a copy the checks write.

    >>> import numtile as nt, numpy as np
    >>> a = nt.from_numpy(np.array([[4.0, 2.0], [2.0, 5.0]]), tile_shape=(1, 1))
    >>> b = nt.from_numpy(np.array([6.0, 7.0]), tile_shape=1)
    >>> np.round(nt.linalg.solve(a, b, assume_a="pos").to_numpy(), 12).tolist()
    [1.0, 1.0]
    """
    n, tile = a.grid[0], a.tile_shape[0]
    checks = []
    for i in range(n):
        tiles = [a.tile((i, i))]
        for j in range(i + 1, n):
            tiles += [a.tile((i, j)), a.tile((j, i))]
        checks.append((check_symmetric, tiles, (i, n - 1 - i, tile), i))
    guard(b, checks)
    factor = cholesky(a)
    y = solve_triangular(factor, b, lower=True)
    return solve_triangular(factor, y, lower=True, trans=2)  # L^H x = y (L^T x for real a)
