"""The array API's statistics beyond the plain reductions: ``var`` and ``std`` (two passes: the
mean, then the sum of squared deviations from it, numerically stable), and ``cumulative_sum``
as a tiled scan."""

from __future__ import annotations

import math

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import fill_tiles
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import NARROW_FLOATING, check_dtype, float32, float64, int64, uint64
from numtile.tiletensor.elementwise import divide, sqrt, square, subtract
from numtile.tiletensor.elementwise_core import astype, refuse_complex
from numtile.tiletensor.layout import Layout, c_strides
from numtile.tiletensor.reduction import mean, normalize_axes, require_tensor, sum
from numtile.tiletensor.tensor import TileTensor

R, W, RW = Access.R, Access.W, Access.RW


@dispatched
def var(x: TileTensor, /, *, axis=None, correction: float = 0.0, keepdims: bool = False):
    """Variance over ``axis``: the sum of squared deviations from the mean divided by
    ``N - correction`` (0: the population variance, 1: Bessel's unbiased estimate). Integers
    compute in float64. Two passes over the data (mean, then deviations), so no cancellation.

    >>> import numtile as nt
    >>> nt.var(nt.asarray([1.0, 2.0, 3.0, 4.0]), correction=1).item()
    1.6666666666666667
    """
    require_tensor(x, "var")
    refuse_complex(x, "var")
    if x.dtype in NARROW_FLOATING:  # bfloat16: both passes in float32, rounded once
        variance = var(astype(x, float32), axis=axis, correction=correction, keepdims=keepdims)
        return astype(variance, x.dtype)
    if x.dtype.kind != "f":
        x = astype(x, float64)
    axes = normalize_axes(axis, x.ndim)
    count = math.prod(x.shape[a] for a in axes)
    deviations = subtract(x, mean(x, axis=axes, keepdims=True))
    total = sum(square(deviations), axis=axes, keepdims=keepdims)
    # N - correction <= 0 divides by zero (inf, or NaN for no data), as NumPy does
    return divide(total, float(count - correction if count > correction else 0))


@dispatched
def std(x: TileTensor, /, *, axis=None, correction: float = 0.0, keepdims: bool = False):
    """Standard deviation over ``axis``: the square root of ``var`` with the same arguments.

    >>> import numtile as nt
    >>> nt.std(nt.asarray([1.0, 3.0])).item()
    1.0
    """
    narrow = getattr(x, "dtype", None) in NARROW_FLOATING  # bfloat16: rounded once
    wide = astype(x, float32) if narrow else x
    out = sqrt(var(wide, axis=axis, correction=correction, keepdims=keepdims))
    return astype(out, x.dtype) if narrow else out


def scan_axis(x: TileTensor, axis) -> int:
    if x.ndim == 0:
        raise ValueError("cumulative_sum needs a tensor with at least one axis (got a 0-d one)")
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"cumulative_sum of a {x.ndim}-d tensor needs an axis")
        return 0
    (axis,) = normalize_axes(axis, x.ndim)
    return axis


def _plan(shape, axis: int) -> tuple[int, int, int]:
    """(pre, n, post) of a tile read as three axes, ``axis`` in the middle."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


@dispatched
def cumulative_sum(x: TileTensor, /, *, axis=None, dtype=None, include_initial: bool = False):
    """Running sums along ``axis`` (optional for a 1-d tensor), accumulated in ``dtype``
    (default: as ``sum``, int64 or uint64 for integers). With ``include_initial`` the
    result starts with a zero, one longer than ``x`` along ``axis``.

    A tiled scan: every tile's own scan at once, a chain of small carry tasks along the
    axis (the total entering each tile), then every carry added to its tile at once.

    >>> import numtile as nt
    >>> nt.cumulative_sum(nt.arange(5), include_initial=True).to_numpy().tolist()
    [0, 0, 1, 3, 6, 10]
    """
    require_tensor(x, "cumulative_sum")
    axis = scan_axis(x, axis)
    if dtype is not None:
        dtype = check_dtype(dtype)
    else:
        dtype = uint64 if x.dtype.kind == "u" else int64 if x.dtype.kind in "bi" else x.dtype
    if dtype in NARROW_FLOATING:  # bfloat16 running sums in float32, each rounded once
        scan = cumulative_sum(astype(x, float32), axis=axis, include_initial=include_initial)
        return astype(scan, dtype)
    if x.dtype != dtype:
        x = astype(x, dtype)
    out = TileTensor(x.layout, dtype)
    runtime = get_runtime()
    for src, dst in zip(x.handles, out.handles):
        runtime.submit(
            codelets.reduction.cumulative_sum, [(src, R), (dst, W)], _plan(src.shape, axis)
        )
    tiles = x.grid[axis]
    if tiles > 1:
        # carry k is the total of tiles 0..k-1 along the axis: tile k of a tensor with one
        # element per tile along the axis
        carry_shape = x.shape[:axis] + (tiles,) + x.shape[axis + 1 :]
        carry_tiles = x.tile_shape[:axis] + (1,) + x.tile_shape[axis + 1 :]
        carries = fill_tiles(TileTensor(Layout(carry_shape, carry_tiles), dtype), 0)
        for index in x.layout.indices():
            k = index[axis]
            if k == 0:
                continue
            before = index[:axis] + (k - 1,) + index[axis + 1 :]
            scanned = out.tile(before)
            handles = [(scanned, R), (carries.tile(before), R), (carries.tile(index), W)]
            runtime.submit(codelets.reduction.scan_carry, handles, _plan(scanned.shape, axis))
        for index, dst in zip(x.layout.indices(), out.handles):
            if index[axis]:
                handles = [(dst, RW), (carries.tile(index), R)]
                runtime.submit(codelets.reduction.add_carry, handles, _plan(dst.shape, axis))
    return _with_initial_zero(out, axis) if include_initial else out


def _with_initial_zero(scanned: TileTensor, axis: int) -> TileTensor:
    """``scanned`` with a slice of zeros in front along ``axis``, tiled as ``scanned``."""
    shape = list(scanned.shape)
    shape[axis] += 1
    out = fill_tiles(TileTensor(Layout(tuple(shape), scanned.tile_shape), scanned.dtype), 0)
    runtime = get_runtime()
    tile = scanned.tile_shape[axis]
    for index in scanned.layout.indices():
        src = scanned.tile(index)
        start = index[axis] * tile + 1  # where this tile's first element goes in out
        end = start + src.shape[axis]
        for k in range(start // tile, (end - 1) // tile + 1):
            dst = out.tile(index[:axis] + (k,) + index[axis + 1 :])
            first, last = max(start, k * tile), min(end, (k + 1) * tile)
            piece = list(src.shape)
            piece[axis] = last - first
            src_strides, dst_strides = c_strides(src.shape), c_strides(dst.shape)
            args = (
                (first - start) * src_strides[axis],
                np.array(src_strides, np.int64),
                (first - k * tile) * dst_strides[axis],
                np.array(dst_strides, np.int64),
                np.array(piece, np.int64),
            )
            runtime.submit(codelets.copy.copy_strided, [(src, R), (dst, RW)], args)
    return out
