"""Tile copies: how a tensor made of regions of other tensors is filled with strided copies.

Every manipulation that moves elements without computing on them (retile, transpose,
broadcast, slicing, concat, flip, roll, ...) is a set of *parts*: a source tensor, a map
from its axes to the output's, and the region of the output the part fills. Each output
tile gets one ``copy_strided`` task per source tile a part brings into it: one task writes
the tile (``W``); several write disjoint pieces of it (commutative ``ACCUMULATE`` tasks).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.layout import Layout, c_strides
from numtile.tiletensor.tensor import TileTensor

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE


def check_copy(copy) -> None:
    """Refuse a ``copy=`` keyword other than True, False or None with NumPy's ``ValueError``.

    >>> check_copy("x")
    Traceback (most recent call last):
    ValueError: copy must be True, False or None, got 'x'
    """
    if not (copy is None or isinstance(copy, (bool, np.bool_))):
        raise ValueError(f"copy must be True, False or None, got {copy!r}")


def normalize_axis(axis, ndim: int) -> int:
    """``axis`` in [0, ndim), from NumPy's accepted range [-ndim, ndim); else NumPy's
    ``AxisError`` (a ``ValueError`` and an ``IndexError``) naming both."""
    try:
        position = operator.index(axis)
    except TypeError:
        raise TypeError(f"axis must be an integer, got {axis!r}") from None
    if not -ndim <= position < ndim:
        raise np.exceptions.AxisError(position, ndim)
    return position % ndim


def region_along(shape, axis: int, begin: int, end: int) -> tuple[tuple[int, int], ...]:
    """The region of ``shape`` that spans [begin, end) along ``axis`` and all of the others."""
    return tuple((begin, end) if k == axis else (0, n) for k, n in enumerate(shape))


def _runs(src: Layout, axis: int, first: int, count: int, start: int, step: int):
    """Split out positions [first, first+count) -> src positions start+p*step into per-tile runs.

    Yields (out_begin, out_end, src_tile, src_local_begin).
    """
    tile = src.tile_shape[axis]
    p, end = first, first + count
    while p < end:
        q = start + p * step
        t = q // tile
        if step == 0:  # broadcast: every position reads the same element
            n = end - p
        elif step > 0:
            n = -(-((t + 1) * tile - q) // step)
        else:
            n = (q - t * tile) // (-step) + 1
        n = min(n, end - p)
        yield p, p + n, t, q - t * tile
        p += n


def _pieces(src: TileTensor, layout: Layout, axis_map, region):
    """Every piece of a part: (flat index of a tile of ``layout``, the ``src`` handle, the
    offset and element strides of the piece in that source tile, its offset and strides in
    the ``layout`` tile, its shape). The ``axis_map`` and ``region`` of ``copy_parts``."""
    grid_ranges = []
    for k in range(layout.ndim):
        lo, hi = region[k]
        if hi <= lo:
            return
        tile = layout.tile_shape[k]
        grid_ranges.append(range(lo // tile, (hi - 1) // tile + 1))
    mapped = {entry[0] for entry in axis_map if not isinstance(entry, int)}
    unmapped = [k for k in range(layout.ndim) if k not in mapped]
    assert all(region[k][1] - region[k][0] == 1 for k in unmapped)
    grid_strides = c_strides(layout.grid)
    for out_index in itertools.product(*grid_ranges):
        bounds = layout.tile_bounds(out_index)
        flat = sum(i * s for i, s in zip(out_index, grid_strides))
        per_axis = []
        for axis, entry in enumerate(axis_map):
            if isinstance(entry, int):
                t = src.layout.tile_of(axis, entry)
                per_axis.append([(None, None, t, entry - src.layout.starts[axis][t])])
            else:
                k, start, step = entry
                o0, o1 = max(bounds[k][0], region[k][0]), min(bounds[k][1], region[k][1])
                per_axis.append(list(_runs(src.layout, axis, o0, o1 - o0, start, step)))
        dst_strides = np.array(c_strides(layout.tile_shape_at(out_index)), np.int64)
        for piece in itertools.product(*per_axis):
            handle = src.tile(tuple(run[2] for run in piece))
            src_strides = c_strides(handle.shape)
            shape = [1] * layout.ndim
            piece_src_strides = [0] * layout.ndim
            src_offset = 0
            # an output axis no source axis maps to: one position of it (stack's new axis)
            dst_offset = sum((region[k][0] - bounds[k][0]) * dst_strides[k] for k in unmapped)
            for axis, (begin, end, _, local) in enumerate(piece):
                src_offset += local * src_strides[axis]
                entry = axis_map[axis]
                if not isinstance(entry, int):
                    k, _, step = entry
                    shape[k] = end - begin
                    piece_src_strides[k] = src_strides[axis] * step
                    dst_offset += (begin - bounds[k][0]) * dst_strides[k]
            source = (src_offset, np.array(piece_src_strides, np.int64))
            yield flat, handle, source, (dst_offset, dst_strides), np.array(shape, np.int64)


def copy_parts(out: TileTensor, parts: Sequence[tuple]) -> TileTensor:
    """Fill ``out`` from ``parts``: ``(src, axis_map, region)`` each, the regions covering
    ``out`` without overlapping.

    ``axis_map`` has one entry per source axis: an int (a fixed position on that axis) or
    ``(out_axis, start, step)`` (out position p reads source position start + p * step).
    An output axis no source axis maps to is one position long in the part's region.
    ``region`` is one ``(begin, end)`` per output axis, or None for the whole output.
    """
    whole = tuple((0, n) for n in out.shape)
    pieces = [
        piece
        for src, axis_map, region in parts
        for piece in _pieces(src, out.layout, axis_map, region or whole)
    ]
    count = [0] * out.layout.ntiles
    for flat, *_ in pieces:
        count[flat] += 1
    runtime = get_runtime()
    for flat, handle, source, target, shape in pieces:
        dst = out.handles[flat]
        mode = W if count[flat] == 1 else ACC
        args = (*source, *target, shape)
        runtime.submit(codelets.copy.copy_strided, [(handle, R), (dst, mode)], args)
    return out


def write_region(x: TileTensor, values: TileTensor, axis_map) -> TileTensor:
    """Copy every tile of ``values`` into the region of ``x`` it maps to, in x's own tiles
    (``RW``: the region need not cover a tile). ``axis_map`` maps x's axes to values' as in
    ``copy_parts`` (the roles swapped: values position p is x position start + p * step)."""
    runtime = get_runtime()
    whole = tuple((0, n) for n in values.shape)
    for flat, handle, target, source, shape in _pieces(x, values.layout, axis_map, whole):
        args = (*source, *target, shape)
        runtime.submit(codelets.copy.copy_strided, [(values.handles[flat], R), (handle, RW)], args)
    return x


def copy_regions(src: TileTensor, out: TileTensor, axis_map) -> TileTensor:
    """Fill all of ``out`` from ``src`` (one part: see ``copy_parts``)."""
    return copy_parts(out, [(src, axis_map, None)])


def slice_axis(x: TileTensor, axis: int, start: int, stop: int, tile_shape=None) -> TileTensor:
    """``x[..., start:stop, ...]`` along ``axis`` (0 <= start <= stop <= its length), copied
    into tiles of ``tile_shape`` (by default ``x``'s, clipped to the new length)."""
    shape = x.shape[:axis] + (stop - start,) + x.shape[axis + 1 :]
    if tile_shape is None:
        tile_shape = tuple(max(1, min(t, s)) for t, s in zip(x.tile_shape, shape))
    out = TileTensor(Layout(shape, tile_shape), x.dtype)
    axis_map = [(k, start if k == axis else 0, 1) for k in range(x.ndim)]
    return copy_regions(x, out, axis_map)
