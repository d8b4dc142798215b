"""Codelets of the tiled LU factorisation with partial pivoting: the panel (getrf over a
column of tiles), row interchanges applied to another column of tiles (laswp), the
determinant's sign and log-magnitude from the factor, and identity tiles.

A panel's tiles are stacked into one scratch array for LAPACK and copied back (declared as
the task's scratch, so a memory manager makes room for it); its pivots are relative to the
panel's first row. On a CPU the tiles are transposed straight into LAPACK's column-major
buffer (from the host buffer pool when no memory manager runs) and back, which saves two of
the four copies, and a wide panel is factored recursively (``ops_cpu.lu``). ``laswp`` stacks
a whole column on a GPU; on a CPU it swaps the rows between the tiles in place.
"""

from __future__ import annotations

import numpy as np

from numtile.runtime import Codelet
from numtile.runtime import handle as handles
from numtile.runtime.pool import POOL

# a complex multiply-add costs 8 real flops to a real one's 2: the factorisation and product
# codelets count complex tiles 4x (Codelet.complex_flops)
COMPLEX_FLOPS = 4.0

_ONE = np.ones(1, np.int64)


def stack(ops, tiles, buffer):
    """Copy equally wide tiles one under another into the C-contiguous ``buffer``."""
    offset = 0
    for tile in tiles:
        size = np.array([tile.size], np.int64)
        ops.copy_strided(tile.reshape(-1), 0, _ONE, buffer.reshape(-1), offset, _ONE, size)
        offset += tile.size


def unstack(ops, buffer, tiles):
    """The inverse of ``stack``: copy the rows of ``buffer`` back into the tiles."""
    offset = 0
    for tile in tiles:
        size = np.array([tile.size], np.int64)
        ops.copy_strided(buffer.reshape(-1), offset, _ONE, tile.reshape(-1), 0, _ONE, size)
        offset += tile.size


def stacked(ops, tiles):
    rows = sum(tile.shape[0] for tile in tiles)
    buffer = ops.empty((rows, tiles[0].shape[1]), tiles[0].dtype)
    stack(ops, tiles, buffer)
    return buffer


def _not_finite(order, offset, width) -> ValueError:
    return ValueError(
        f"linalg: the matrix of shape ({order}, {order}) contains infs or NaNs "
        f"(found in its columns {offset} to {offset + width - 1})"
    )


def _check_pivot(ops, info, offset, order, singular_raises) -> None:
    zero = int(ops.to_host(info)[0])
    if zero and singular_raises:
        row = offset + zero - 1
        raise np.linalg.LinAlgError(
            f"singular matrix: the matrix of shape ({order}, {order}) has an exactly zero "
            f"pivot U[{row}, {row}] in its LU factorisation"
        )


def _getrf_panel(ops, *tiles_then_args):
    # tiles: the panel's tiles from the diagonal down, then its pivots tile
    *tiles, pivots, offset, order, singular_raises = tiles_then_args
    panel = stacked(ops, tiles)
    if not np.isfinite(ops.to_host(panel)).all():
        raise _not_finite(order, offset, panel.shape[1])
    info = ops.empty(1, np.int32)
    ops.getrf(panel, pivots, info)
    _check_pivot(ops, info, offset, order, singular_raises)
    unstack(ops, panel, tiles)


def _getrf_panel_cpu(ops, *tiles_then_args):
    *tiles, pivots, offset, order, singular_raises = tiles_then_args
    rows, width, dtype = sum(tile.shape[0] for tile in tiles), tiles[0].shape[1], tiles[0].dtype
    buffer = POOL.allocate((width, ops.leading_dimension(rows, dtype.itemsize)), dtype)
    info = np.zeros(1, np.int32)
    try:
        if not ops.getrf_tiles(tiles, buffer, pivots, info):
            raise _not_finite(order, offset, width)
    finally:
        if handles.MANAGER is None:  # under a memory manager, kept buffers would escape its limit
            POOL.release(buffer)
    _check_pivot(ops, info, offset, order, singular_raises)


def _getrf_panel_flops(*shapes_then_args) -> float:
    *shapes, _pivots, _offset, _order, _raises = shapes_then_args
    m, n = sum(s[0] for s in shapes), shapes[0][1]
    return m * n * n - n**3 / 3.0


def _laswp(ops, *tiles_then_pivots):
    # a column of tiles from the panel's row down; the panel's pivots last
    *tiles, pivots = tiles_then_pivots
    column = stacked(ops, tiles)
    ops.laswp(column, pivots)
    unstack(ops, column, tiles)


def _laswp_cpu(ops, *tiles_then_pivots):
    *tiles, pivots = tiles_then_pivots
    ops.laswp_tiles(tiles, pivots)


def _slogdet(ops, *tiles_then_count):
    # the diagonal tiles of the factor, their pivots, then the sign and log|det| outputs
    *tiles, sign, logabs, count = tiles_then_count
    diagonals, pivots = tiles[:count], tiles[count:]
    total_sign, total_log = 1.0, 0.0
    for diagonal, pivot in zip(diagonals, pivots):
        values = np.diagonal(ops.to_host(diagonal)).astype(np.float64)
        swaps = int(np.count_nonzero(ops.to_host(pivot) != np.arange(pivot.shape[0])))
        negatives = int(np.count_nonzero(values < 0)) + swaps
        total_sign *= 0.0 if (values == 0).any() else (-1.0) ** negatives
        with np.errstate(divide="ignore"):
            total_log += float(np.log(np.abs(values)).sum())
    ops.fill(sign.reshape(-1), total_sign)
    ops.fill(logabs.reshape(-1), total_log)


def _identity(ops, out):
    flat = out.reshape(-1)
    ops.fill(flat, 0)
    ops.fill(flat[:: out.shape[1] + 1], 1)


def _getrf_panel_scratch(*tiles_then_args) -> int:
    # the stacked panel, the finiteness check's booleans over it, and LAPACK's info
    *tiles, _pivots, _offset, _order, _raises = tiles_then_args
    panel = sum(tile.nbytes for tile in tiles)
    return panel + panel // tiles[0].dtype.itemsize + 4


getrf_panel = Codelet(
    "getrf_panel",
    kernel=_getrf_panel,
    implementations={"cpu": _getrf_panel_cpu},
    flops=_getrf_panel_flops,
    scratch=_getrf_panel_scratch,
    complex_flops=COMPLEX_FLOPS,
)


def _laswp_scratch(*tiles_then_pivots) -> int:
    """What ``_laswp_cpu`` allocates: an int32 view of each tile and the list holding them.
    (A GPU stacks the whole column instead: not declared, the CPU's bound is.)"""
    *tiles, _pivots = tiles_then_pivots
    return 512 * (len(tiles) + 1)


laswp = Codelet("laswp", kernel=_laswp, implementations={"cpu": _laswp_cpu}, scratch=_laswp_scratch)
slogdet = Codelet("slogdet", kernel=_slogdet)
identity = Codelet("identity", kernel=_identity)
