"""Codelets of TSQR with an explicit Q (``linalg/tsqr.py``), dask's algorithm as tasks: each row
tile's QR with its Q formed (``tsqr_leaf``), the QR of a few stacked R's along a tree
(``tsqr_node``), the tree's small Q factors multiplied down to each leaf (``tsqr_down``) and
each leaf's Q times its (k, n) factor (``tsqr_apply``, one GEMM).

On a CPU the QRs are geqrf's factorisation (computed by LAPACK's ``geqrt`` in 128-wide blocks)
+ ``orgqr`` (``ops_cpu.qr_explicit``, blocked BLAS-3 Householder, faster than applying
``geqrt``'s reflectors to an identity); a float64 leaf whose
R is well conditioned skips ``orgqr`` (``ops_cpu.qr_leaf`` says so in a flag tile) and its
``tsqr_apply`` multiplies the leaf's input by R^-1 F instead (a triangular solve on the small
factor F). Elsewhere (a GPU worker) the generic kernels build Q from the ``geqrt``/``gemqrt``
tile kernels and leave the flag 0. The GEMMs go through ``ops.gemm`` (one BLAS thread per
worker).
"""

from __future__ import annotations

from numtile.runtime import Codelet
from numtile.tiletensor.codelets.qr import COMPLEX_FLOPS

INNER_BLOCK = 32  # the block width of geqrt's reflectors on the generic path


def _shape(tile):
    return tuple(tile.shape)


def _qr_generic(ops, a, q, r, form_q):
    # the same as ops_cpu.qr_explicit from the tile kernels both backends have
    m, n = _shape(a)
    k = min(m, n)
    if k == 0:
        return
    v, t = ops.empty((m, n), a.dtype), ops.empty((n, INNER_BLOCK), a.dtype)
    c = ops.empty((m, k), a.dtype)
    ops.triu_copy(a, v, -m)  # a copy of a
    ops.geqrt(v, t)
    ops.triu_copy(v, r, 0)
    if not form_q:
        return
    ops.eye_fill(c, 0)
    ops.gemqrt(v, t, c, False)
    ops.triu_copy(c, q[:, :k], -m)


def _stacked(ops, parts):
    """The matrices ``parts`` stacked vertically in one scratch array."""
    total = sum(_shape(part)[0] for part in parts)
    out = ops.empty((total, _shape(parts[0])[1]), parts[0].dtype)
    start = 0
    for part in parts:
        rows = _shape(part)[0]
        ops.triu_copy(part, out[start : start + rows], -total)
        start += rows
    return out


# the QR codelets take their Q tile (W) only when they form Q: (a, [q,] r) for a node,
# (a, [q, flag,] r, limit) for a leaf; a node's inputs are its children's R's, their count its
# first argument


def _leaf(ops, a, *tiles_then_limit):
    *q_r, _limit = tiles_then_limit
    if len(q_r) == 3:
        ops.fill(q_r[1], 0)  # Q formed
    _qr_generic(ops, a, q_r[0], q_r[-1], len(q_r) == 3)


def _leaf_cpu(ops, a, *tiles_then_limit):
    *q_r, limit = tiles_then_limit
    if len(q_r) == 3 and a.dtype.kind == "c":  # the R^-1 shortcut is for real float64 leaves
        ops.fill(q_r[1], 0)
        ops.qr_explicit(a, q_r[0], q_r[2], True)
    elif len(q_r) == 3:
        ops.qr_leaf(a, q_r[0], q_r[2], q_r[1], limit)
    else:
        ops.qr_explicit(a, q_r[0], q_r[0], False)


def _node(ops, *tiles_then_count):
    *tiles, count = tiles_then_count
    q_r = tiles[count:]
    _qr_generic(ops, _stacked(ops, tiles[:count]), q_r[0], q_r[-1], len(q_r) == 2)


def _node_cpu(ops, *tiles_then_count):
    *tiles, count = tiles_then_count
    q_r = tiles[count:]
    ops.qr_explicit(_stacked(ops, tiles[:count]), q_r[0], q_r[-1], len(q_r) == 2)


def _down(ops, q, *tiles_then_root):
    # q: a node's Q ((sum of k_child) x k); then the parent's factor (k x K) unless the node
    # is the root; then the children's factors (k_child x K)
    *tiles, root = tiles_then_root
    parent, children = (None, tiles) if root else (tiles[0], tiles[1:])
    start = 0
    for child in children:
        rows = _shape(child)[0]
        block = q[start : start + rows]
        if parent is None:  # the root: its children's factors are its Q's blocks
            ops.triu_copy(block, child, -rows)
        else:
            ops.gemm(block, parent, child, False, False, 1.0, 0.0)
        start += rows


def _apply(ops, factor, r, flag, a, q):
    # q (rows x K) = q[:, :k] @ factor (k x K), or a @ (r^-1 factor) where the leaf's flag says
    # its Q is a r^-1 (r: the leaf's (k, k) R; a: its input)
    rows, k = _shape(q)[0], _shape(factor)[0]
    if int(ops.to_host(flag)[0]):
        solved = ops.empty(_shape(factor), q.dtype)
        ops.triu_copy(factor, solved, -k)
        ops.trsm(r, solved, True, False, False, False, 1.0)
        ops.gemm(a, solved, q, False, False, 1.0, 0.0)
        return
    leaf = ops.empty((rows, k), q.dtype)
    ops.triu_copy(q, leaf, -rows)
    ops.gemm(leaf, factor, q, False, False, 1.0, 0.0)


def _qr_flops(a, *q_r) -> float:
    m, n = a
    k = min(m, n)
    return len(q_r) * (2.0 * m * n * k - 2.0 * k**3 / 3.0)


def _leaf_flops(a, *shapes_then_limit) -> float:
    # geqrf, and orgqr when Q is asked for (which a well-conditioned leaf skips)
    *shapes, _limit = shapes_then_limit
    return _qr_flops(a, *shapes[: 1 + (len(shapes) == 3)])


def _node_flops(*shapes_then_count) -> float:
    *shapes, count = shapes_then_count
    stacked = (sum(s[0] for s in shapes[:count]), shapes[0][1])
    return _qr_flops(stacked, *shapes[count:])


def _down_flops(q, *shapes_then_root) -> float:
    *shapes, root = shapes_then_root
    return 0.0 if root else 2.0 * q[0] * q[1] * shapes[0][1]


tsqr_leaf = Codelet(
    "tsqr_leaf",
    kernel=_leaf,
    implementations={"cpu": _leaf_cpu},
    flops=_leaf_flops,
    complex_flops=COMPLEX_FLOPS,
)
tsqr_node = Codelet(
    "tsqr_node",
    kernel=_node,
    implementations={"cpu": _node_cpu},
    flops=_node_flops,
    complex_flops=COMPLEX_FLOPS,
)
tsqr_down = Codelet("tsqr_down", kernel=_down, flops=_down_flops, complex_flops=COMPLEX_FLOPS)
tsqr_apply = Codelet(
    "tsqr_apply",
    kernel=_apply,
    flops=lambda f, _r, _flag, _a, q: 2.0 * q[0] * q[1] * f[0],
    complex_flops=COMPLEX_FLOPS,
)
