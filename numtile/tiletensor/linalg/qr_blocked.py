"""Blocked Householder QR over tiles, as LAPACK's ``geqrf`` with one tile column per block:
the QR of square and wide matrices (tall ones reduce along a tree of tile kernels, ``qr.py``).

For each tile column k (a panel) one task runs LAPACK's ``geqrt`` on the panel's tiles
stacked together (the diagonal tile down), which leaves R and the reflectors V in the tiles
and the panel's block reflector I - V T V^T (V^H for complex tiles) in two small tiles: T^T
(``t``; T^H for complex tiles) and the unit
lower V of the diagonal tile (``v``, kept apart since R shares that tile). Each tile column
j to the right is then updated with GEMMs only, as ``larfb`` does: W_j = sum_i V_i^T A_ij
down the panel, Z_j = T^T W_j, A_ij -= V_i Z_j. Applying Q (or Q^T) to a matrix is the same
three GEMM steps per panel, in reverse (or forward) order.

Why not PLASMA's tile kernels (``tpqrt`` / ``tpmqrt``, the flat elimination ``qr.py`` ran
before): they run at a half to a third of GEMM's speed on one core here, and they are
almost all of the flops; here almost all of them are GEMMs on whole tiles, and only the
panel (m b^2 flops per tile column b wide) runs at LAPACK's panel speed. Priorities follow
the critical path, as the LU's: panels first, then the update of column k + 1 (which the
next panel waits for), then the rest.
"""

from __future__ import annotations

from typing import NamedTuple

from numtile.runtime import get_runtime
from numtile.tiletensor.codelets.linalg import gemm
from numtile.tiletensor.codelets.qr import geqrt_panel
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.linalg.common import RW, R, W
from numtile.tiletensor.tensor import TileTensor


class BlockedFactor(NamedTuple):
    """A blocked Householder QR in place: ``a`` holds R and the reflectors; tile (k, k) of
    ``t`` is panel k's T^T and of ``v`` the unit lower V of its diagonal tile."""

    a: TileTensor
    t: TileTensor
    v: TileTensor

    tree = False  # tall matrices take the tree of tile kernels (qr.QRFactor)

    def panels(self) -> int:
        return min(self.a.grid)

    def reflector(self, k: int, i: int):
        """The handle of V's part in row tile i of panel k."""
        return self.v.tile((k, k)) if i == k else self.a.tile((i, k))


def factor(a: TileTensor) -> BlockedFactor:
    """Factor ``a`` (square tiles, overwritten) as tasks."""
    n = a.shape[1]
    p, q = a.grid
    factor = BlockedFactor(a, TileTensor(Layout((n, n), a.tile_shape), a.dtype),
                           TileTensor(a.layout, a.dtype))  # fmt: skip
    runtime = get_runtime()
    panel_first, next_column = 3 * q, 2 * q
    for k in range(factor.panels()):
        column = [(a.tile((i, k)), RW) for i in range(k, p)]
        outputs = [(factor.t.tile((k, k)), W), (factor.v.tile((k, k)), W)]
        runtime.submit(geqrt_panel, column + outputs, priority=panel_first + q - k)
        for j in range(k + 1, q):
            priority = (next_column if j == k + 1 else 0) + q - k
            _reflect(factor, k, [a.tile((i, j)) for i in range(k, p)], True, priority)
    return factor


def _reflect(factor: BlockedFactor, k: int, tiles: list, transpose: bool, priority=0) -> None:
    """C = H_k^T C (``transpose``) or H_k C for the tile column C = ``tiles`` (row tiles k
    and down): W = V^T C, Z = T^T W (or T W), C -= V Z. Complex tiles: H_k^H, with V^H and
    T^H (the panel keeps T^H in ``t``, so the flags read T^H W = t W, T W = t^H W)."""
    runtime = get_runtime()
    adjoint = 2 if factor.a.dtype.kind == "c" else True  # GEMM flag of V^T / V^H
    rows, columns = factor.t.tile((k, k)).shape[0], tiles[0].shape[1]
    scratch = TileTensor(Layout((2 * rows, columns), (rows, columns)), factor.a.dtype)
    w, z = scratch.tile((0, 0)), scratch.tile((1, 0))
    for step, tile in enumerate(tiles):
        v = factor.reflector(k, k + step)
        beta = 1.0 if step else 0.0
        runtime.submit(gemm, [(v, R), (tile, R), (w, RW if step else W)],
                       (adjoint, False, 1.0, beta), priority)  # fmt: skip
    t = factor.t.tile((k, k))
    flag = False if transpose else adjoint
    runtime.submit(gemm, [(t, R), (w, R), (z, W)], (flag, False, 1.0, 0.0), priority)
    for step, tile in enumerate(tiles):
        v = factor.reflector(k, k + step)
        runtime.submit(gemm, [(v, R), (z, R), (tile, RW)], (False, False, -1.0, 1.0), priority)


def apply(factor: BlockedFactor, c: TileTensor, transpose: bool, identity: bool) -> None:
    """c = Q c (or Q^T c) in place; c has the factor's row tiles. ``identity``: c starts as
    the identity's first columns, so panel k leaves the tile columns left of row k alone."""
    rows, column_tile = factor.a.tile_shape[0], c.tile_shape[1]
    order = range(factor.panels()) if transpose else range(factor.panels() - 1, -1, -1)
    for k in order:
        first = (k * rows) // column_tile if identity else 0
        for j in range(first, c.grid[1]):
            tiles = [c.tile((i, j)) for i in range(k, c.grid[0])]
            _reflect(factor, k, tiles, transpose)
