"""Searching: ``argmax``, ``argmin``, ``nonzero`` and ``searchsorted``.

``argmax``/``argmin`` fold each tile into running (value, index) pairs; the partial results
of the tiles along the reduced axes combine in any order (ties go to the smaller index, NaN
beats everything), so the first occurrence wins as in NumPy. ``nonzero`` waits for one count
per tile, then compacts the positions of the nonzero elements with one task per piece.
"""

from __future__ import annotations

import math

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.copying import normalize_axis
from numtile.tiletensor.creation import fill_tiles, zeros
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import int64, result_type
from numtile.tiletensor.elementwise import astype, floor_divide, remainder
from numtile.tiletensor.indexing import flagged_positions, flatten, take, tile_counts
from numtile.tiletensor.layout import c_strides
from numtile.tiletensor.manipulation import reshape
from numtile.tiletensor.reduction import reduced_layout
from numtile.tiletensor.sorting import check_sortable
from numtile.tiletensor.tensor import TileTensor

R, ACC = Access.R, Access.ACCUMULATE


def _arg_extremum(x: TileTensor, axis, keepdims: bool, find_max: bool, name: str) -> TileTensor:
    if not isinstance(x, TileTensor):
        raise TypeError(f"{name} expects a TileTensor, got {type(x).__name__}")
    if x.dtype.kind == "c":
        raise TypeError(f"{name} is defined for real dtypes, not {x.dtype.name}")
    if axis is not None:
        axis = normalize_axis(axis, x.ndim)
    reduced = range(x.ndim) if axis is None else (axis,)
    if any(x.shape[a] == 0 for a in reduced):
        raise ValueError(f"{name} of an empty axis (shape {x.shape}, axis {axis})")
    kept = [a for a in range(x.ndim) if a not in reduced]
    layout = reduced_layout(x.layout, kept)
    values = fill_tiles(TileTensor(layout, x.dtype), 0)
    indices = fill_tiles(TileTensor(layout, int64), -1)
    runtime = get_runtime()
    strides = np.array(c_strides(x.shape), np.int64)
    # the tiles folded into one output tile run one at a time (they take its lock): with the
    # reduced axes' tile indices outermost, consecutive tasks write different output tiles
    tiles = sorted(zip(x.layout.indices(), x.handles), key=lambda t: [t[0][a] for a in reduced])
    for index, handle in tiles:
        bounds = x.layout.tile_bounds(index)
        out_index = tuple(index[a] for a in kept)
        if axis is None:
            plan = (1, math.prod(handle.shape), 1, np.array(handle.shape, np.int64))
            plan += (np.array([b[0] for b in bounds], np.int64), strides)
        else:
            shape = handle.shape
            n = shape[axis]
            plan = (math.prod(shape[:axis]), n, math.prod(shape[axis + 1 :]))
            plan += (np.array([n], np.int64), np.array([bounds[axis][0]], np.int64))
            plan += (np.ones(1, np.int64),)
        accesses = [(handle, R), (values.tile(out_index), ACC), (indices.tile(out_index), ACC)]
        runtime.submit(codelets.sorting.arg_reduce, accesses, (*plan, find_max))
    if keepdims:
        shape = tuple(1 if a in reduced else s for a, s in enumerate(x.shape))
        indices = reshape(indices, shape)
    return indices


@dispatched
def argmax(x: TileTensor, /, *, axis: int | None = None, keepdims: bool = False) -> TileTensor:
    """Index of the first maximum along ``axis`` (of the flattened tensor when None; a NaN
    counts as the maximum, as in NumPy).

    >>> import numtile as nt
    >>> x = nt.from_numpy([[1, 5, 5], [7, 0, 7]], tile_shape=(1, 2))
    >>> nt.argmax(x, axis=1).to_numpy().tolist()
    [1, 0]
    """
    return _arg_extremum(x, axis, keepdims, True, "argmax")


@dispatched
def argmin(x: TileTensor, /, *, axis: int | None = None, keepdims: bool = False) -> TileTensor:
    """Index of the first minimum along ``axis`` (a NaN counts as the minimum, as in NumPy).

    >>> import numtile as nt
    >>> nt.argmin(nt.from_numpy([3, 1, 2, 1], tile_shape=3)).item()
    1
    """
    return _arg_extremum(x, axis, keepdims, False, "argmin")


def nonzero_positions(x: TileTensor) -> TileTensor:
    """The C-order flat positions of x's nonzero elements (waits for one count per tile)."""
    flat = flatten(x)
    out = flagged_positions(flat, tile_counts(flat))
    return out


@dispatched
def nonzero(x: TileTensor, /) -> tuple[TileTensor, ...]:
    """The indices of the nonzero elements, one int64 tensor per axis (C order).

    The output's size depends on the data: this waits for one count per tile of ``x``.

    >>> import numtile as nt
    >>> rows, cols = nt.nonzero(nt.from_numpy([[0, 3], [4, 0]], tile_shape=(1, 1)))
    >>> rows.to_numpy().tolist(), cols.to_numpy().tolist()
    ([0, 1], [1, 0])
    """
    if not isinstance(x, TileTensor):
        raise TypeError(f"nonzero expects a TileTensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError("nonzero needs a tensor with at least one axis, got a 0-d tensor")
    positions = nonzero_positions(x)
    if x.ndim == 1:
        return (positions,)
    strides = c_strides(x.shape)
    return tuple(
        remainder(floor_divide(positions, stride), extent) if a else floor_divide(positions, stride)
        for a, (stride, extent) in enumerate(zip(strides, x.shape))
    )


@dispatched
def searchsorted(
    x1: TileTensor, x2: TileTensor, /, *, side: str = "left", sorter: TileTensor | None = None
) -> TileTensor:
    """Where each element of ``x2`` would go in the sorted 1-D ``x1`` (ascending, NaNs last):
    the first such index for ``side="left"``, the last for ``"right"``. One task per pair of
    tiles counts the elements of an ``x1`` tile before an ``x2`` tile's elements.

    >>> import numtile as nt
    >>> x1 = nt.from_numpy([1.0, 2.0, 2.0, 5.0], tile_shape=3)
    >>> nt.searchsorted(x1, nt.from_numpy([2.0, 6.0]), side="right").to_numpy().tolist()
    [3, 4]
    """
    for name, value in (("x1", x1), ("x2", x2)):
        if not isinstance(value, TileTensor):
            raise TypeError(f"searchsorted expects TileTensors, got {type(value).__name__} {name}")
    check_sortable(x1, "searchsorted")
    if x1.ndim != 1:
        raise ValueError(f"searchsorted needs a 1-D x1, got shape {x1.shape}")
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    if sorter is not None:
        if not isinstance(sorter, TileTensor) or sorter.dtype.kind not in "iu":
            kind = sorter.dtype.name if isinstance(sorter, TileTensor) else type(sorter).__name__
            raise TypeError(f"searchsorted: sorter must be an integer TileTensor, got {kind}")
        if sorter.shape != x1.shape:
            raise ValueError(
                f"searchsorted: sorter has shape {sorter.shape}, x1 has shape {x1.shape}"
            )
        x1 = take(x1, sorter)
    dtype = result_type(x1.dtype, x2.dtype)
    if dtype.kind == "c":
        raise TypeError(f"searchsorted is defined for real dtypes, not {dtype.name}")
    x1, x2 = (astype(t, dtype) if t.dtype != dtype else t for t in (x1, x2))
    out = zeros(x2.shape, int64, tile_shape=x2.tile_shape)
    runtime = get_runtime()
    for run in x1.handles:
        for needles, counts in zip(x2.handles, out.handles):
            runtime.submit(
                codelets.sorting.count_before,
                [(run, R), (needles, R), (counts, ACC)],
                (side == "right",),
            )
    return out
