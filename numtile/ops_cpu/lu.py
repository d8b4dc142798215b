"""Tile kernels of the tiled LU factorisation with partial pivoting: ``getrf`` of a panel (a
column of tiles stacked into one C-contiguous array) through LAPACK (``kernel_blas``), and
``laswp``, the row interchanges it chose, applied to other columns. ``getrf_tiles`` and
``laswp_tiles`` do the same on a column given as its separate tiles, with no stacked copy: the
panel's tiles are transposed straight into LAPACK's column-major buffer and back, and the
interchanges swap rows between the tiles in place.

Pivots are 0-based and sequential, as LAPACK's ``ipiv`` less one: for i = 0, 1, ... in order,
row i was interchanged with row ``pivots[i]`` (>= i).

>>> import numpy as np
>>> from numtile.ops_cpu import lu
>>> a = np.array([[1.0, 2.0], [3.0, 4.0]])
>>> pivots, info = np.empty(2, np.int32), np.empty(1, np.int32)
>>> lu.getrf(a, pivots, info)
>>> pivots.tolist(), int(info[0]), a.tolist()     # P a = L U with L = [[1, 0], [1/3, 1]]
([1, 1], 0, [[3.0, 4.0], [0.3333333333333333, 0.6666666666666667]])
>>> b = np.array([[10.0], [20.0]])
>>> lu.laswp(b, pivots)
>>> b.ravel().tolist()
[20.0, 10.0]
"""

import numpy as np
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from numtile.ops_cpu.kernel_blas import call

TRANSPOSE_BLOCK = 16  # 16 x 16 blocks: a block's rows stay in L1 (the strides are powers of 2)
# a panel's tiles to and from LAPACK's buffer: 32 x 32 blocks (on 16 tiles of 512 x 512
# float64, 10.6 / 10.8 ms into / back against 11.6 / 21.2 with 16 x 16 and one loop order)
COLUMN_BLOCK = 32


@njit(nogil=True, cache=True)
def transpose(source, target):
    """target = source.T, block by block (3x NumPy's copy of a transposed view on a panel)."""
    rows, columns = source.shape
    for i0 in range(0, rows, TRANSPOSE_BLOCK):
        i1 = min(i0 + TRANSPOSE_BLOCK, rows)
        for j0 in range(0, columns, TRANSPOSE_BLOCK):
            for j in range(j0, min(j0 + TRANSPOSE_BLOCK, columns)):
                for i in range(i0, i1):
                    target[j, i] = source[i, j]


@intrinsic
def _pointer(typingctx, address):
    """The data pointer held by the integer ``address`` (a tile's ``ctypes.data``)."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, signature, arguments):
        return builder.inttoptr(arguments[0], cgutils.voidptr_t)

    return types.voidptr(address), codegen


@njit(nogil=True, cache=True)
def _tile(addresses, rows, t, like):
    """Tile t of a column given by its data addresses and row counts (like: tile 0)."""
    return carray(_pointer(addresses[t]), (rows[t], like.shape[1]), like.dtype)


def _column(tiles) -> tuple[np.ndarray, np.ndarray]:
    """The addresses and row counts of equally wide C-contiguous tiles of one dtype (the
    kernels see the tiles through them: one compiled signature for any number of tiles)."""
    first = tiles[0]
    for tile in tiles:
        assert tile.flags.c_contiguous, "LU column kernels take C-contiguous tiles"
        assert tile.dtype == first.dtype and tile.shape[1:] == first.shape[1:], "unequal tiles"
    addresses = np.array([tile.ctypes.data for tile in tiles], np.int64)
    return addresses, np.array([tile.shape[0] for tile in tiles], np.int64)


@njit(nogil=True, cache=True)
def transpose_column(addresses, rows, like, buffer, into_buffer):
    """When ``into_buffer``, buffer[j, offset + i] = tile[i, j] for the tiles one under another
    (offset: the rows above the tile), returning whether every element is finite; otherwise
    the inverse, tile[i, j] = buffer[j, offset + i] (returning True)."""
    finite = True
    offset = 0
    block = COLUMN_BLOCK
    for t in range(addresses.size):
        tile = _tile(addresses, rows, t, like)
        for i0 in range(0, rows[t], block):
            i1 = min(i0 + block, rows[t])
            for j0 in range(0, tile.shape[1], block):
                j1 = min(j0 + block, tile.shape[1])
                # each way, the inner loop runs along the rows it writes: 2x faster back into
                # the tiles (8192 x 512 float64) than with the writes strided
                if into_buffer:
                    for j in range(j0, j1):
                        for i in range(i0, i1):
                            value = tile[i, j]
                            finite &= np.isfinite(value)
                            buffer[j, offset + i] = value
                else:
                    for i in range(i0, i1):
                        for j in range(j0, j1):
                            tile[i, j] = buffer[j, offset + i]
        offset += rows[t]
    return finite


@njit(nogil=True, cache=True)
def getrf_column_major(buffer, rows, pivots, info):
    """getrf of the (rows, n) column-major matrix whose columns are buffer's n rows (leading
    dimension buffer.shape[1] >= rows); pivots and info as ``getrf``'s."""
    n = buffer.shape[0]
    k = min(rows, n)
    ipiv = np.empty(max(k, 1), np.int32)
    info[0] = call("getrf", buffer, rows, n, buffer, max(1, buffer.shape[1]), ipiv, 0)
    for i in range(k):
        pivots[i] = ipiv[i] - 1


def leading_dimension(rows: int, itemsize: int) -> int:
    """LAPACK's leading dimension for a column of ``rows``: padded by 8 elements when a column
    would span a multiple of 4 KiB, where the transposes' strides would alias in the caches."""
    return rows + 8 if rows * itemsize % 4096 == 0 else rows


def getrf_tiles(tiles, buffer, pivots, info) -> bool:
    """getrf of the tiles one under another (equally wide, C-contiguous), in place, through
    ``buffer`` (n, >= their rows) for LAPACK; pivots and info as ``getrf``'s. Returns False,
    leaving the tiles alone, if an element is not finite."""
    addresses, rows = _column(tiles)
    if not transpose_column(addresses, rows, tiles[0], buffer, True):
        return False
    getrf_column_major(buffer, int(rows.sum()), pivots, info)
    transpose_column(addresses, rows, tiles[0], buffer, False)
    return True


@njit(nogil=True, cache=True)
def swap_tile_rows(addresses, rows, like, pivots):
    """Interchange rows i and pivots[i] of the tiles stacked, for i = 0, 1, ... in order; rows
    i are in the first tile."""
    first = _tile(addresses, rows, 0, like)
    for i in range(pivots.size):
        row = pivots[i]
        if row == i:
            continue
        t = 0
        while row >= rows[t]:
            row -= rows[t]
            t += 1
        other = _tile(addresses, rows, t, like)
        for c in range(first.shape[1]):
            first[i, c], other[row, c] = other[row, c], first[i, c]


def laswp_tiles(tiles, pivots) -> None:
    """``laswp`` on the tiles one under another (C-contiguous, equally wide, the first one at
    least ``pivots.size`` rows), in place; one compiled kernel serves every dtype (the rows
    are moved as int32 words)."""
    assert pivots.size <= tiles[0].shape[0], "laswp_tiles: more pivots than the first tile's rows"
    addresses, rows = _column(tiles)
    swap_tile_rows(addresses, rows, tiles[0].view(np.int32), pivots)


def getrf(a, pivots, info) -> None:
    """LU with partial pivoting of the (m, n) C-contiguous matrix a in place (unit lower L
    below the diagonal, U on and above it); pivots[:min(m, n)] gets the row interchanges and
    info[0] LAPACK's info: 0, or the 1-based column of the first exactly zero pivot (the
    factorisation is completed all the same, as LAPACK does). The kernels of ``getrf_tiles``
    on one tile, so one compiled set serves both."""
    m, n = a.shape
    assert pivots.size >= min(m, n) and info.size >= 1, "getrf: pivots or info too short"
    info[0] = 0
    if min(m, n) == 0:
        return
    addresses, rows = _column([a])
    buffer = np.empty((n, leading_dimension(m, a.dtype.itemsize)), a.dtype)
    transpose_column(addresses, rows, a, buffer, True)  # non-finite input is factored all the same
    getrf_column_major(buffer, m, pivots, info)
    transpose_column(addresses, rows, a, buffer, False)


@njit(nogil=True, cache=True)
def laswp(a, pivots):
    """Interchange rows i and pivots[i] of a, for i = 0, 1, ..., pivots.size - 1 in order."""
    for i in range(pivots.size):
        p = pivots[i]
        assert i <= p < a.shape[0], "laswp: pivot out of range"
        if p != i:
            for c in range(a.shape[1]):
                a[i, c], a[p, c] = a[p, c], a[i, c]
