"""Assignment: ``x[key] = value`` with the keys of ``x[key]`` (``indexing.py``), as tasks
that write x's own tiles, ordered after every earlier task on them; and the scatter-add
into zeros behind the gradients of indexing.

A basic key copies each tile of the (broadcast) value into the region of x it maps to; a mask
with a scalar (or one-element) value is ``where`` writing x's own tiles (no copy back); a mask
of x's whole shape with a tensor value writes through a flattened copy of x. Any other key (integer
arrays, masks, boolean scalars among integers, slices, None and ...) puts the value into
``x[basic part]`` with the indexed axes merged into one, then writes that region back; where
those merged axes are x's own tiles (one array among full slices) it writes them directly.
"""

from __future__ import annotations

import operator

import numpy as np

from numtile.runtime import Access
from numtile.tiletensor.copying import copy_regions as _copy_regions
from numtile.tiletensor.copying import write_region
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.elementwise import astype
from numtile.tiletensor.indexing import (
    Key,
    as_values,
    flatten,
    mask_as_arrays,
    merge_advanced,
    move_block,
    parse_key,
    put_positions,
)
from numtile.tiletensor.layout import current_config
from numtile.tiletensor.logic import assign_where
from numtile.tiletensor.manipulation import (
    _normalize_key,
    basic_getitem,
    broadcast_to,
    permute_dims,
    reshape,
    retile,
)
from numtile.tiletensor.tensor import TileTensor

R, RW = Access.R, Access.RW


def _region(x: TileTensor, key):
    """(region shape, axis map for each x axis: a position or (region axis, start, step))."""
    key = _normalize_key(key, x.ndim)
    axis_map, shape = [], []
    axis = 0
    for k in key:
        if k is None:
            shape.append(1)
            continue
        dim = x.shape[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(dim)
            axis_map.append((len(shape), start, step))
            shape.append(len(range(start, stop, step)))
        else:
            position = operator.index(k)
            if not -dim <= position < dim:
                raise IndexError(
                    f"index {position} is out of bounds for axis {axis} with size {dim}"
                )
            axis_map.append(position % dim)
        axis += 1
    return tuple(shape), axis_map


def _write_back(x: TileTensor, copy: TileTensor) -> None:
    """Overwrite x's tiles with the values of ``copy`` (same shape, any tiling)."""
    if copy.shape != x.shape:
        copy = reshape(copy, x.shape)
    _copy_regions(copy, x, [(axis, 0, 1) for axis in range(x.ndim)])


def assign(x: TileTensor, parsed: Key, value, accumulate: bool = False) -> TileTensor:
    """``x[key] = value`` (``+=`` when ``accumulate``, for keys that may repeat elements)
    as tasks writing x's tiles."""
    if parsed.kind == "basic":
        shape, axis_map = _region(x, parsed.basic)
        tiles = tuple(max(1, min(s, current_config().tile)) for s in shape)
        values = as_values(value, x.dtype, shape, tiles)
        if values.size:
            write_region(x, values, axis_map)
        return x
    if parsed.kind == "mask":
        mask = parsed.mask
        small = not isinstance(value, TileTensor) and np.size(value) == 1
        if small or isinstance(value, TileTensor) and value.size == 1:
            full = mask
            if mask.ndim != x.ndim or parsed.axis:
                lead = (1,) * parsed.axis
                full = reshape(mask, lead + mask.shape + (1,) * (x.ndim - mask.ndim - parsed.axis))
            if isinstance(value, TileTensor):
                scalar = astype(reshape(value, ()), x.dtype)
            else:
                scalar = np.asarray(value).reshape(()).item()
            assign_where(full, scalar, x)
            return x
        if parsed.axis or mask.ndim != x.ndim:
            return assign(x, mask_as_arrays(x, parsed), value, accumulate)
        flat = flatten(x)
        flags = flatten(mask)
        flags = retile(flags, flat.tile_shape) if flags.tile_shape != flat.tile_shape else flags
        positions = np.flatnonzero(flags.to_numpy())
        copy = _fresh(flat)
        put_positions(copy, positions, 0, value, accumulate)
        _write_back(x, copy)
        return x
    # integer arrays: put into x[basic] with the indexed axes merged, then write that back
    # (nothing to write back where those merged axes are x's own tiles)
    _, axis_map = _region(x, parsed.basic)
    y = basic_getitem(x, parsed.basic)
    target, axis = merge_advanced(y, parsed.axes)
    owned = {id(handle) for handle in x.handles}
    shared = [id(handle) in owned for handle in target.handles]
    if any(shared) and not all(shared):
        target = _fresh(target)
    values = _values_along(value, parsed, target, axis)
    put_positions(target, parsed.positions, axis, values, accumulate)
    if not all(shared):
        write_region(x, _unmerge(target, y.shape, parsed.axes), axis_map)
    return x


def _fresh(x: TileTensor) -> TileTensor:
    """A copy of ``x`` in new tiles of the same layout."""
    return _copy_regions(x, TileTensor(x.layout, x.dtype), [(a, 0, 1) for a in range(x.ndim)])


def _unmerge(target: TileTensor, shape, axes) -> TileTensor:
    """The inverse of ``merge_advanced``: ``target`` back in the axis order of ``shape``."""
    if len(axes) == 1:
        return target
    if not axes:
        return reshape(target, shape)
    order = [*axes, *(a for a in range(len(shape)) if a not in axes)]
    moved = reshape(target, tuple(shape[a] for a in order))
    return permute_dims(moved, [order.index(a) for a in range(len(shape))])


def _values_along(value, parsed: Key, target: TileTensor, axis: int):
    """``value`` broadcast to ``x[key]``'s shape, with the key's broadcast shape moved to
    ``axis`` and flattened there: the elements put_positions writes along ``axis``."""
    rest = target.shape[:axis] + target.shape[axis + 1 :]
    key_shape, place, count = tuple(parsed.shape), parsed.place, len(parsed.shape)
    result = rest[:place] + key_shape + rest[place:]
    flat_shape = target.shape[:axis] + (parsed.positions.size,) + target.shape[axis + 1 :]
    if not isinstance(value, TileTensor):
        array = np.broadcast_to(np.asarray(value), result)
        array = np.moveaxis(array, range(place, place + count), range(axis, axis + count))
        return array.reshape(flat_shape)
    value = broadcast_to(value, result) if value.shape != result else value
    value = move_block(value, place, count, axis)
    if count != 1:
        value = reshape(retile(value, value.shape), flat_shape)
    return value


@dispatched(public="TileTensor.__setitem__ (assignment)")
def setitem(x: TileTensor, key, value) -> None:
    """``x[key] = value``: the keys of ``x[key]``, ``value`` (a scalar, array or tensor, cast
    to x's dtype) broadcast to the selection; tasks write x's own tiles. Repeated
    integer-array positions keep the last value (NumPy's rule).

    >>> import numtile as nt
    >>> x = nt.zeros(6, tile_shape=4); x[1::2] = 5; x[x < 1] = -1; x.to_numpy().tolist()
    [-1.0, 5.0, -1.0, 5.0, -1.0, 5.0]
    """
    assign(x, parse_key(x, key), value)
