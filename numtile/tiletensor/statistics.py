"""The array API's statistics beyond the plain reductions: ``var`` and ``std`` (one pass of a
moments kernel: each chunk's mean, then its deviations, merged by Chan's update; numerically
stable), and ``cumulative_sum`` as a tiled scan."""

from __future__ import annotations

import math

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.codelets import scan as scan_codelets
from numtile.tiletensor.codelets import statistics as statistics_codelets
from numtile.tiletensor.creation import fill_tiles
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import (
    check_dtype,
    float32,
    float64,
    int64,
    is_narrow_floating,
    uint64,
)
from numtile.tiletensor.elementwise import divide, sqrt, square, subtract
from numtile.tiletensor.elementwise_core import astype, refuse_complex
from numtile.tiletensor.layout import Layout, c_strides
from numtile.tiletensor.manipulation import permute_dims, reshape
from numtile.tiletensor.reduction import (
    mean,
    normalize_axes,
    partial_count,
    partial_tiles,
    reduced_layout,
    sum,
    tile_groups,
)
from numtile.tiletensor.tensor import TileTensor

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE
sum_codelet = codelets.reduction.reduce["sum"]


@dispatched
def var(x: TileTensor, /, *, axis=None, correction: float = 0.0, keepdims: bool = False):
    """Variance over ``axis``: the sum of squared deviations from the mean divided by
    ``N - correction`` (0: the population variance, 1: Bessel's unbiased estimate). Integers
    compute in float64. One pass over the data (two over each cached chunk: its mean, then
    its deviations, merged by Chan's update in float64), so no cancellation (axes that are not
    adjacent are made so by a copy first); an ``x`` that requires a gradient goes through the
    mean and the deviations as tensors (two passes, differentiable).

    >>> import numtile as nt
    >>> nt.var(nt.asarray([1.0, 2.0, 3.0, 4.0]), correction=1).item()
    1.6666666666666667
    """
    refuse_complex(x, "var")
    if not isinstance(correction, (int, float, np.number)):
        raise TypeError(f"var/std: correction must be a real number, got {correction!r}")
    if is_narrow_floating(x.dtype):  # bfloat16: both passes in float32, rounded once
        variance = var(astype(x, float32), axis=axis, correction=correction, keepdims=keepdims)
        return astype(variance, x.dtype)
    if x.dtype.kind != "f":
        x = astype(x, float64)
    axes = normalize_axes(axis, x.ndim)
    count = math.prod(x.shape[a] for a in axes)
    if x.requires_grad:  # through differentiable ops
        deviations = subtract(x, mean(x, axis=axes, keepdims=True))
        total = sum(square(deviations), axis=axes, keepdims=keepdims)
    else:
        total = _squared_deviations(x, axes)
        if keepdims:
            total = reshape(total, tuple(1 if a in axes else s for a, s in enumerate(x.shape)))
    # N - correction <= 0 divides by zero (inf, or NaN for no data), as NumPy does
    variance = divide(total, float(count - correction if count > correction else 0))
    return variance if variance.dtype == x.dtype else astype(variance, x.dtype)


def _squared_deviations(x: TileTensor, axes: tuple[int, ...]) -> TileTensor:
    """The sum of squared deviations from the mean over the adjacent ``axes`` (float64), in
    one pass over x: every tile merges its columns' count, mean and M2 into running tiles.
    The mean is held minus a shift, the first value the state took (set with the mean by the
    first chunk), so merges subtract numbers the size of the data's
    spread, not of its offset (data 1e6 from zero keeps NumPy's digits).

    With fewer output tiles than workers (a matrix tiled by rows, reduced over them), the
    tiles of an output tile take turns into a few partial (count, shift, mean, M2) tiles
    instead, and tasks at the end merge those: merging into one running tile, the tiles would
    run one at a time."""
    kept = [a for a in range(x.ndim) if a not in axes]
    if any(b != a + 1 for a, b in zip(axes, axes[1:])):  # reduced axes last, adjacent (a copy)
        x = permute_dims(x, (*kept, *axes))
        kept, axes = list(range(len(kept))), tuple(range(len(kept), x.ndim))
    layout = reduced_layout(x.layout, kept)
    runtime = get_runtime()
    groups = tile_groups(x, kept)
    chains = partial_count(runtime, x, groups)
    running = _moment_tiles(lambda: TileTensor(layout, float64))
    targets = running
    if chains > 1:
        targets = _moment_tiles(lambda: partial_tiles(layout, chains, float64))
    for at, handles in groups.items():
        for i, handle in enumerate(handles):
            into = at if chains == 1 else (i % chains, *at)
            accesses = [(handle, R), *((t.tile(into), ACC) for t in targets)]
            runtime.submit(statistics_codelets.moments, accesses, _plan(handle.shape, axes))
        for k in range(chains if chains > 1 else 0):
            parts = ((t.tile((k, *at)), R) for t in targets)
            accesses = [*((t.tile(at), ACC) for t in running), *parts]
            runtime.submit(statistics_codelets.moments_merge, accesses)
    return running[3]


def _moment_tiles(make) -> list[TileTensor]:
    """Four tensors ``make()`` gives, count, shift, mean and M2, at zero. The kernels need
    only the count (an empty state's first chunk sets the rest), but no task then reads a
    tile that none has written (a GPU or another rank would copy uninitialised memory)."""
    return [fill_tiles(make(), 0) for _ in range(4)]


def _plan(shape, axes: tuple[int, ...]) -> tuple[int, int, int]:
    """(pre, n, post) of a tile read as three axes, the adjacent ``axes`` merged in the middle."""
    if not axes:
        return math.prod(shape), 1, 1
    first, last = axes[0], axes[-1]
    return (
        math.prod(shape[:first]),
        math.prod(shape[first : last + 1]),
        math.prod(shape[last + 1 :]),
    )


@dispatched
def std(x: TileTensor, /, *, axis=None, correction: float = 0.0, keepdims: bool = False):
    """Standard deviation over ``axis``: the square root of ``var`` with the same arguments.

    >>> import numtile as nt
    >>> nt.std(nt.asarray([1.0, 3.0])).item()
    1.0
    """
    narrow = is_narrow_floating(getattr(x, "dtype", None))  # bfloat16: rounded once
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


@dispatched
def cumulative_sum(x: TileTensor, /, *, axis=None, dtype=None, include_initial: bool = False):
    """Running sums along ``axis`` (optional for a 1-d tensor), accumulated in ``dtype``
    (default: as ``sum``, int64 or uint64 for integers). With ``include_initial`` the
    result starts with a zero, one longer than ``x`` along ``axis``.

    A tiled scan that reduces, then scans: every tile's total at once, a chain of small
    carry tasks along the axis (the total entering each tile), then every tile scanned from
    its carry at once (two reads and one write of the data).

    >>> import numtile as nt
    >>> nt.cumulative_sum(nt.arange(5), include_initial=True).to_numpy().tolist()
    [0, 0, 1, 3, 6, 10]
    """
    axis = scan_axis(x, axis)
    if dtype is not None:
        dtype = check_dtype(dtype)
    else:
        dtype = uint64 if x.dtype.kind == "u" else int64 if x.dtype.kind in "bi" else x.dtype
    if is_narrow_floating(dtype):  # bfloat16 running sums in float32, each rounded once
        scan = cumulative_sum(astype(x, float32), axis=axis, include_initial=include_initial)
        return astype(scan, dtype)
    if x.dtype != dtype:
        x = astype(x, dtype)
    out = TileTensor(x.layout, dtype)
    runtime = get_runtime()
    tiles = x.grid[axis]
    if tiles > 1:
        # reduce, then scan: tile k of ``totals`` / ``carries`` (one element per tile along
        # the axis) is the sum of x's tile k / of x's tiles 0..k-1
        carry_shape = x.shape[:axis] + (tiles,) + x.shape[axis + 1 :]
        carry_tiles = x.tile_shape[:axis] + (1,) + x.tile_shape[axis + 1 :]
        totals = fill_tiles(TileTensor(Layout(carry_shape, carry_tiles), dtype), 0)
        carries = fill_tiles(TileTensor(Layout(carry_shape, carry_tiles), dtype), 0)
        for index, src in zip(x.layout.indices(), x.handles):
            if index[axis] < tiles - 1:
                args = (None, *_plan(src.shape, (axis,)))
                runtime.submit(sum_codelet, [(src, R), (totals.tile(index), ACC)], args)
        for index in x.layout.indices():
            if index[axis]:
                before = index[:axis] + (index[axis] - 1,) + index[axis + 1 :]
                total, carry = totals.tile(before), carries.tile(index)
                handles = [(total, R), (carries.tile(before), R), (carry, W)]
                runtime.submit(scan_codelets.scan_carry, handles, _plan(total.shape, (axis,)))
    for index, src, dst in zip(x.layout.indices(), x.handles, out.handles):
        plan = _plan(src.shape, (axis,))
        if index[axis]:
            handles = [(src, R), (carries.tile(index), R), (dst, W)]
            runtime.submit(scan_codelets.cumulative_sum_from, handles, plan)
        else:
            runtime.submit(scan_codelets.cumulative_sum, [(src, R), (dst, W)], plan)
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
