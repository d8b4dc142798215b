"""TSQR with an explicit Q for matrices of one tile column (tall-skinny), as dask's ``tsqr``
but as tasks: each row tile's QR with its Q formed (LAPACK ``geqrf`` + ``orgqr``), the R's
combined ``ARITY`` at a time along a tree (the QR of the stacked R's, its Q kept), the tree's
small Q blocks multiplied from the root down to each leaf, and each leaf's Q times its factor
(one GEMM per row tile). Only the tree's factors (a few n x n tiles) are extra memory.

Why 4 R's per node: a node's QR of k stacked n x n triangles costs (4k - 4/3) n^3 flops as a
dense QR (LAPACK's structured triangle-pair kernels, ``tpqrt``, run 5-10x below GEMM speed
here, so the dense QR of the stack is as fast), and merging p leaves takes (p - 1) / (k - 1)
nodes: k = 2 costs 6.7 (p - 1) n^3, k = 4 4.9 (p - 1) n^3, one flat node (dask's choice for
few chunks) 4p n^3 but serial; 4 keeps two workers busy on the first level.

A float64 leaf whose R is well conditioned (Frobenius condition number <= ``CONDITION_LIMIT``)
does not form its Q: Q_i = A_i R_i^-1 to within that times eps, so its row tile of Q is
A_i (R_i^-1 F_i), one GEMM on the input; this saves ``orgqr``, a third of TSQR's flops.

This is ``qr(mode="reduced")``'s path for one tile column, and the reduction ``svdvals`` and
the reduced ``svd`` use for tall matrices of one tile column; the Householder-reflector path
(``qr.py``) stays for several tile columns and ``mode="complete"`` (and so for
``svd(full_matrices=True)``).
"""

from __future__ import annotations

import numpy as np

from numtile.runtime import get_runtime
from numtile.tiletensor.codelets.tsqr import tsqr_apply, tsqr_down, tsqr_leaf, tsqr_node
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.linalg.common import RW, R, W
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

TREE, LEAF = 2, 1  # priorities: the tree is the critical path
# leaves of at least LEAF_ROWS x n rows while that leaves two per worker: the tree's cost per
# leaf is fixed (about 4.9 n^3), a taller leaf's QR runs nearer BLAS-3 speed
LEAF_ROWS = 8
ARITY = 4  # R's stacked per tree node (see the module docstring)
# a float64 leaf skips orgqr when ||R||_F ||R^-1||_F is at most this: its Q = A R^-1 is then
# orthonormal to within about CONDITION_LIMIT * eps (2e-12), against LAPACK's n * eps
CONDITION_LIMIT = 1e4


def one_tile_column(x: TileTensor) -> bool:
    """Whether ``x`` (2-d) is tiled in one tile column: TSQR's shape."""
    return x.tile_shape[1] >= x.shape[1]


def _single(shape, dtype) -> TileTensor:
    return TileTensor(Layout(shape, tuple(max(1, s) for s in shape)), dtype)


class _Item:
    """A leaf (row tile ``leaf``, with its flag: Q formed or not) or a tree node
    (``children``) and its R (k x n)."""

    def __init__(self, r: TileTensor, leaf: int | None = None, children=(), q=None, flag=None):
        self.r, self.leaf, self.children, self.q, self.flag = r, leaf, children, q, flag

    @property
    def k(self) -> int:
        return self.r.shape[0]


def tsqr(x: TileTensor, form_q: bool = True) -> tuple[TileTensor | None, TileTensor]:
    """(Q, R) of the float matrix ``x`` (m, n), one tile column: Q (m, k) with the leaves' row
    tiles (``x``'s, or taller ones: ``LEAF_ROWS``), R (k, n) in one tile, k = min(m, n); Q is
    None unless ``form_q``."""
    m, n = x.shape
    runtime = get_runtime()
    workers = max(1, sum(runtime.worker_counts.values()))
    rows = max(x.tile_shape[0], n, 1, min(LEAF_ROWS * n, -(-m // (2 * workers))))
    if x.tile_shape != (rows, max(n, 1)):
        x = retile(x, (rows, max(n, 1)))
    k = min(m, n)
    q = TileTensor(Layout((m, k), (rows, max(k, 1))), x.dtype) if form_q else None
    level = []
    # a single leaf's Q is the result: it is always formed
    limit = CONDITION_LIMIT if x.dtype == np.float64 and x.grid[0] > 1 else 0.0
    for i in range(x.grid[0]):
        r = _single((min(x.tile((i, 0)).shape[0], n), n), x.dtype)
        flag = TileTensor(Layout((1,), (1,)), np.int64) if form_q else None
        formed = [(q.tile((i, 0)), W), (flag.tile((0,)), W)] if form_q else []
        accesses = [(x.tile((i, 0)), R)] + formed + [(r.tile((0, 0)), W)]
        runtime.submit(tsqr_leaf, accesses, (limit,), priority=LEAF)
        level.append(_Item(r, leaf=i, flag=flag))
    while len(level) > 1:
        merged = []
        for start in range(0, len(level), ARITY):
            children = level[start : start + ARITY]
            if len(children) == 1:
                merged.append(children[0])
                continue
            stacked = sum(child.k for child in children)
            r = _single((min(stacked, n), n), x.dtype)
            node_q = _single((stacked, r.shape[0]), x.dtype) if form_q else None
            outputs = ([(node_q.tile((0, 0)), W)] if form_q else []) + [(r.tile((0, 0)), W)]
            inputs = [(child.r.tile((0, 0)), R) for child in children]
            runtime.submit(tsqr_node, inputs + outputs, (len(children),), priority=TREE)
            merged.append(_Item(r, children=tuple(children), q=node_q))
        level = merged
    root = level[0]
    if form_q and root.children:
        _descend(root, None, x, q, k)
    return q, root.r


def _descend(item: _Item, factor: TileTensor | None, x: TileTensor, q: TileTensor, k: int):
    """Multiply the tree's Q blocks down from ``item`` (whose factor is ``factor``; None at the
    root, the identity) and finish each leaf's Q tile (from its Q, or from its input x)."""
    runtime = get_runtime()
    if item.leaf is not None:
        leaf = [(item.r.tile((0, 0)), R), (item.flag.tile((0,)), R), (x.tile((item.leaf, 0)), R)]
        accesses = [(factor.tile((0, 0)), R)] + leaf + [(q.tile((item.leaf, 0)), RW)]
        runtime.submit(tsqr_apply, accesses, priority=LEAF)
        return
    factors = [_single((child.k, k), q.dtype) for child in item.children]
    parent = [] if factor is None else [(factor.tile((0, 0)), R)]
    outputs = [(f.tile((0, 0)), W) for f in factors]
    accesses = [(item.q.tile((0, 0)), R)] + parent + outputs
    runtime.submit(tsqr_down, accesses, (factor is None,), priority=TREE)
    for child, child_factor in zip(item.children, factors):
        _descend(child, child_factor, x, q, k)
