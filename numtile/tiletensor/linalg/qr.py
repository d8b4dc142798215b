"""Tiled Householder QR, as PLASMA's and Chameleon's ``geqrf``, and TSQR for tall matrices.

Square and wide matrices (and tall ones of one row tile) take the blocked QR of
``qr_blocked.py``: one LAPACK panel task per tile column and GEMM updates. A tall matrix (at
least twice as many rows as columns, several row tiles) reduces along a tree of tile kernels
instead: for each tile column k, ``geqrt`` factors each tile of the panel on its own,
``gemqrt`` applies its Q^T to the rest of its tile row, and the R's are reduced pairwise
along a binary tree (``tpqrt`` "TT" steps, whose reflectors fill the upper trapezoid the
tile's own reflectors leave free, and ``tpmqrt`` on the pair's rows to the right): with one
tile column this is the communication-avoiding TSQR, log2(row tiles) steps deep. Priorities
follow the critical path: the panel first, then the updates of column k + 1.

With one tile column and ``mode="reduced"``, ``qr`` takes TSQR with an explicit Q instead
(``tsqr.py``: LAPACK's blocked geqrf + orgqr per row tile and GEMMs, faster than the reflector
kernels). Q is never formed unless asked: ``apply_q`` applies it (or Q^T) to any matrix with
the factor's row tiles, and ``qr`` applies it to the identity's first columns. Tiles are
square (side: the smaller of the input's tile sides) except with one tile column, where the
row tiles are kept (at least as tall as the matrix is wide).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from numtile.runtime import get_runtime
from numtile.tiletensor.codelets.qr import eye_fill, gemqrt, geqrt, tpmqrt, tpqrt, triu_copy
from numtile.tiletensor.creation import zeros
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.elementwise import astype
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.linalg import qr_blocked
from numtile.tiletensor.linalg.common import RW, R, W, float_matrices
from numtile.tiletensor.linalg.qr_blocked import BlockedFactor
from numtile.tiletensor.linalg.tsqr import one_tile_column, tsqr
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

INNER_BLOCK = 32  # LAPACK's nb inside a tile: the width of each block reflector


class QRFactor(NamedTuple):
    """A tall matrix's tiled Householder QR in place: ``a`` holds R and the reflectors,
    ``t_tile`` the block factors of each tile's own QR, ``t_tree`` those of the tree's steps
    that eliminate it."""

    a: TileTensor
    t_tile: TileTensor
    t_tree: TileTensor

    tree = True  # square and wide matrices: qr_blocked.BlockedFactor

    def panels(self) -> int:
        return min(self.a.grid)

    def leaves(self, k: int) -> list[int]:
        """The row tiles ``geqrt`` factors in panel k."""
        return list(range(k, self.a.grid[0]))

    def steps(self, k: int) -> list[tuple[int, int]]:
        """(top, bottom) row tiles of panel k's eliminations (TT steps), in order."""
        rows = self.a.grid[0]
        pairs, stride = [], 1
        while k + stride < rows:
            pairs += [(i, i + stride) for i in range(k, rows - stride, 2 * stride)]
            stride *= 2
        return pairs


def factor_tiles(x: TileTensor) -> TileTensor:
    """``x`` copied onto the tiles the factorisation runs on (see the module docstring)."""
    m, n = x.shape
    rows, columns = x.tile_shape
    if columns >= n:  # one tile column: TSQR's row tiles, at least n tall
        tiles = (max(rows, n, 1), max(n, 1))
    else:
        side = min(rows, columns)
        tiles = (side, side)
    if tiles == x.tile_shape:
        return astype(x, x.dtype, copy=True)
    return retile(x, tiles)


def qr_factor(x: TileTensor) -> QRFactor | BlockedFactor:
    """Householder QR of the 2-d float matrix ``x`` (left alone) as tasks."""
    a = factor_tiles(x)
    m, n = a.shape
    p, q = a.grid
    if m < 2 * n or p == 1:
        return qr_blocked.factor(a)
    t_layout = Layout((n, p * INNER_BLOCK), (a.tile_shape[1], INNER_BLOCK))
    factor = QRFactor(a, TileTensor(t_layout, a.dtype), TileTensor(t_layout, a.dtype))
    runtime = get_runtime()
    panel_first, next_column = 3 * q, 2 * q
    for k in range(factor.panels()):
        panel = panel_first + q - k

        def priority(j, k=k):
            return (next_column if j == k + 1 else 0) + q - k

        for i in factor.leaves(k):
            v, t = a.tile((i, k)), factor.t_tile.tile((k, i))
            runtime.submit(geqrt, [(v, RW), (t, W)], priority=panel)
            for j in range(k + 1, q):
                runtime.submit(gemqrt, [(v, R), (t, R), (a.tile((i, j)), RW)], (True,), priority(j))
        for top, bottom in factor.steps(k):
            v, t = a.tile((bottom, k)), factor.t_tree.tile((k, bottom))
            runtime.submit(tpqrt, [(a.tile((top, k)), RW), (v, RW), (t, W)], (True,), panel)
            for j in range(k + 1, q):
                tiles = [(v, R), (t, R), (a.tile((top, j)), RW), (a.tile((bottom, j)), RW)]
                runtime.submit(tpmqrt, tiles, (True, True), priority(j))
    return factor


def apply_q(factor, c: TileTensor, transpose: bool = False, identity=False) -> None:
    """c = Q c (or Q^T c) in place; c has the factor's row tiles. ``identity``: c starts as
    the identity's first columns, so step k leaves the tile columns left of row k alone."""
    if isinstance(factor, BlockedFactor):
        qr_blocked.apply(factor, c, transpose, identity)
        return
    a = factor.a
    rows, column_tile = a.tile_shape[0], c.tile_shape[1]
    runtime = get_runtime()
    order = range(factor.panels()) if transpose else range(factor.panels() - 1, -1, -1)
    for k in order:
        first = (k * rows) // column_tile if identity else 0
        columns = range(first, c.grid[1])

        def leaves(k=k, columns=columns):
            for i in factor.leaves(k):
                v, t = a.tile((i, k)), factor.t_tile.tile((k, i))
                for j in columns:
                    runtime.submit(gemqrt, [(v, R), (t, R), (c.tile((i, j)), RW)], (transpose,))

        if transpose:
            leaves()
        steps = factor.steps(k)
        for top, bottom in steps if transpose else steps[::-1]:
            v, t = a.tile((bottom, k)), factor.t_tree.tile((k, bottom))
            for j in columns:
                tiles = [(v, R), (t, R), (c.tile((top, j)), RW), (c.tile((bottom, j)), RW)]
                runtime.submit(tpmqrt, tiles, (transpose, True))
        if not transpose:
            leaves()


def eye(rows: int, columns: int, tiles, dtype) -> TileTensor:
    """numpy.eye(rows, columns) with tile shape ``tiles``."""
    out = TileTensor(Layout((rows, columns), tiles), dtype)
    runtime = get_runtime()
    for i, j in out.layout.indices():
        runtime.submit(eye_fill, [(out.tile((i, j)), W)], (i * tiles[0] - j * tiles[1],))
    return out


def triu(x: TileTensor, diagonal: int = 0) -> TileTensor:
    """numpy.triu(x, diagonal) of a 2-d tensor, with x's tiles."""
    out = TileTensor(x.layout, x.dtype)
    rows, columns = x.tile_shape
    runtime = get_runtime()
    for i, j in x.layout.indices():
        shift = i * rows - j * columns + diagonal
        runtime.submit(triu_copy, [(x.tile((i, j)), R), (out.tile((i, j)), W)], (shift,))
    return out


def q_matrix(factor: QRFactor, columns: int) -> TileTensor:
    """The first ``columns`` columns of Q."""
    a = factor.a
    tiles = (a.tile_shape[0], min(a.tile_shape[1], max(columns, 1)))
    q = eye(a.shape[0], columns, tiles, a.dtype)
    apply_q(factor, q, identity=True)
    return q


def r_matrix(factor: QRFactor, rows: int) -> TileTensor:
    """The first ``rows`` rows of R (upper trapezoidal, rows x n)."""
    a = factor.a
    tiles = a.tile_shape
    r = TileTensor(Layout((rows, a.shape[1]), tiles), a.dtype)
    runtime = get_runtime()
    for i, j in r.layout.indices():
        diagonal = i * tiles[0] - j * tiles[1]
        runtime.submit(triu_copy, [(a.tile((i, j)), R), (r.tile((i, j)), W)], (diagonal,))
    return r


class QRResult(NamedTuple):
    """``qr``'s result, as NumPy's: x = Q @ R."""

    Q: TileTensor
    R: TileTensor


def check_matrix(x, name: str) -> TileTensor:
    """``x`` as a 2-d float matrix, or the error NumPy's linalg raises."""
    (x,), _ = float_matrices(name, x)
    if x.ndim != 2:
        raise np.linalg.LinAlgError(  # NumPy's error (a ValueError)
            f"{name}: expected a 2-d matrix, got an array of shape {x.shape} "
            "(stacked matrices are not supported here yet)"
        )
    return x


@dispatched(public="numtile.linalg.qr")
def qr(x: TileTensor, /, *, mode: str = "reduced") -> QRResult:
    """QR factorisation x = Q @ R of an (m, n) matrix: ``mode="reduced"`` gives Q (m, k) and
    R (k, n) with k = min(m, n), ``"complete"`` Q (m, m) and R (m, n). Q has orthonormal
    columns and R is upper triangular; signs may differ from NumPy's (both are valid).

    >>> import numtile as nt, numpy as np
    >>> x = nt.from_numpy(np.array([[3.0, 1.0], [4.0, 2.0], [0.0, 5.0]]), tile_shape=(2, 2))
    >>> q, r = nt.linalg.qr(x)
    >>> q.shape, r.shape, bool(np.allclose(q.to_numpy() @ r.to_numpy(), x.to_numpy()))
    ((3, 2), (2, 2), True)
    """
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    x = check_matrix(x, "qr")
    if 0 in x.shape:  # no tiles to factor: NumPy's shapes, Q the identity where it has any
        m, n = x.shape
        k = min(m, n) if mode == "reduced" else m
        q = eye(m, k, (max(m, 1), max(k, 1)), x.dtype)
        return QRResult(q, zeros((k, n), dtype=x.dtype))
    if mode == "reduced" and one_tile_column(x):
        return QRResult(*tsqr(x))
    m, n = x.shape
    factor = qr_factor(x)
    k = min(m, n) if mode == "reduced" else m
    return QRResult(q_matrix(factor, k), r_matrix(factor, k))
