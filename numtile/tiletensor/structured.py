"""Structured tensors of the array API: eye, tril, triu, linspace, meshgrid.

Every tile is made by one task: a band kernel keeps the diagonals of a matrix tile that
cross the band and zeroes the rest; tiles wholly inside the band are copied, tiles wholly
outside it filled.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import check_device, empty
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import check_dtype, complex128, float64
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.manipulation import broadcast_to, reshape
from numtile.tiletensor.tensor import TileTensor

R, W, RW = Access.R, Access.W, Access.RW
_FAR = 2**62  # a diagonal beyond any tensor: a band open on that side


def _diagonals(layout: Layout, index) -> tuple[int, int, int, int]:
    """(first row, first column, lowest diagonal, highest diagonal) of tile ``index``
    (diagonal d holds the elements at column - row = d)."""
    (r0, r1), (c0, c1) = layout.tile_bounds(index)[-2:]
    return r0, c0, c0 - (r1 - 1), (c1 - 1) - r0


def eye(
    n_rows: int,
    n_cols: int | None = None,
    /,
    *,
    k: int = 0,
    dtype=None,
    device=None,
    tile_shape=None,
) -> TileTensor:
    """A matrix with ones on diagonal ``k`` (0: the main one, > 0 above it) and zeros
    elsewhere.

    >>> import numtile as nt
    >>> nt.eye(2, 3, k=1, tile_shape=(1, 2)).to_numpy().tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    check_device(device)
    n_cols = n_rows if n_cols is None else n_cols
    k = operator.index(k)
    out = empty((n_rows, n_cols), float64 if dtype is None else dtype, tile_shape)
    runtime = get_runtime()
    zero = out.dtype.type(0)
    for index, handle in zip(out.layout.indices(), out.handles):
        row0, col0, low, high = _diagonals(out.layout, index)
        if low <= k <= high:
            runtime.submit(codelets.copy.eye, [(handle, W)], (row0, col0, k))
        else:
            runtime.submit(codelets.copy.fill, [(handle, W)], (zero,))
    return out


def _triangle(x: TileTensor, lower: int, upper: int, name: str) -> TileTensor:
    """``x`` (a stack of matrices) with the diagonals outside [lower, upper] zeroed."""
    if not isinstance(x, TileTensor):
        raise TypeError(f"{name} needs a TileTensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise ValueError(f"{name} needs at least 2 dimensions, got shape {x.shape}")
    out = TileTensor(x.layout, x.dtype)
    runtime = get_runtime()
    zero = x.dtype.type(0)
    for index, src, dst in zip(x.layout.indices(), x.handles, out.handles):
        row0, col0, low, high = _diagonals(x.layout, index)
        if high < lower or low > upper:  # wholly outside the band
            runtime.submit(codelets.copy.fill, [(dst, W)], (zero,))
        elif lower <= low and high <= upper:  # wholly inside: the tile as it is
            flat = np.array([math.prod(src.shape)], np.int64)
            one = np.ones(1, np.int64)
            args = (0, one, 0, one, flat)
            runtime.submit(codelets.copy.copy_strided, [(src, R), (dst, W)], args)
        else:
            args = (row0, col0, lower, upper)
            runtime.submit(codelets.copy.band, [(src, R), (dst, W)], args)
    return out


@dispatched
def tril(x: TileTensor, /, *, k: int = 0) -> TileTensor:
    """The lower triangle of each matrix of ``x`` (its last two axes): zeros above
    diagonal ``k``.

    >>> import numtile as nt
    >>> nt.tril(nt.ones((2, 3)), k=1).to_numpy().tolist()
    [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    """
    return _triangle(x, -_FAR, operator.index(k), "tril")


@dispatched
def triu(x: TileTensor, /, *, k: int = 0) -> TileTensor:
    """The upper triangle of each matrix of ``x`` (its last two axes): zeros below
    diagonal ``k``.

    >>> import numtile as nt
    >>> nt.triu(nt.ones((2, 3))).to_numpy().tolist()
    [[1.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    """
    return _triangle(x, operator.index(k), _FAR, "triu")


def linspace(
    start,
    stop,
    /,
    num: int,
    *,
    dtype=None,
    device=None,
    endpoint: bool = True,
    tile_shape=None,
) -> TileTensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (included when ``endpoint``),
    computed as NumPy does: ``start + i * step`` in double precision, then cast.

    >>> import numtile as nt
    >>> nt.linspace(0, 1, 5, tile_shape=2).to_numpy().tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    check_device(device)
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"number of samples, {num}, must be non-negative")
    is_complex = isinstance(start, complex) or isinstance(stop, complex)
    if dtype is None:
        dtype = complex128 if is_complex else float64
    dtype = check_dtype(dtype)
    if dtype.kind not in "fc":
        raise TypeError(f"linspace needs a floating or complex dtype, got {dtype.name}")
    if is_complex and dtype.kind != "c":
        raise TypeError(f"linspace of complex bounds needs a complex dtype, got {dtype.name}")
    wide = complex if dtype.kind == "c" else float
    start, stop = wide(start), wide(stop)
    div = num - 1 if endpoint else num
    step = (stop - start) / div if div > 0 else wide(0)
    last = num - 1 if endpoint and num > 1 else -1
    out = empty((num,), dtype, tile_shape)
    runtime = get_runtime()
    for (i,), handle in zip(out.layout.indices(), out.handles):
        offset = out.layout.starts[0][i]
        args = (start, step, offset, last, stop)
        runtime.submit(codelets.copy.linspace, [(handle, W)], args)
    return out


@dispatched
def meshgrid(*arrays: TileTensor, indexing: str = "xy") -> list[TileTensor]:
    """Coordinate matrices from 1-d ``arrays``: with ``indexing="xy"`` (Cartesian) the first
    two output axes are swapped, with ``"ij"`` (matrix) they are not.

    >>> import numtile as nt
    >>> x, y = nt.meshgrid(nt.arange(3), nt.arange(2))
    >>> x.to_numpy().tolist(), y.shape
    ([[0, 1, 2], [0, 1, 2]], (2, 3))
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"indexing must be 'xy' or 'ij', got {indexing!r}")
    for i, a in enumerate(arrays):
        if not isinstance(a, TileTensor) or a.ndim != 1:
            what = f"shape {a.shape}" if isinstance(a, TileTensor) else type(a).__name__
            raise ValueError(f"meshgrid needs 1-d TileTensors; argument {i} is {what}")
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    outputs = []
    for i, a in enumerate(arrays):
        axis = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and len(arrays) >= 2 else i
        spread = [1] * len(arrays)
        spread[axis] = a.shape[0]
        outputs.append(broadcast_to(reshape(a, tuple(spread)), tuple(shape)))
    return outputs
