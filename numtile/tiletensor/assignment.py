"""Assignment: ``x[key] = value`` with the keys of ``x[key]`` (``indexing.py``), as tasks
that write x's own tiles, ordered after every earlier task on them; and the scatter-add
into zeros behind the gradients of indexing.

A basic key copies each tile of the (broadcast) value into the region of x it maps to; an
integer-array key along one axis writes the listed positions of x's tiles directly; a mask
with a scalar (or one-element) value is ``where`` written back into x's tiles; a mask or
several integer arrays with a tensor value write through a flattened copy of x.
"""

from __future__ import annotations

import itertools
import operator

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.copying import _runs
from numtile.tiletensor.copying import copy_regions as _copy_regions
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.elementwise import astype
from numtile.tiletensor.indexing import (
    Key,
    as_values,
    flatten,
    merge_leading,
    parse_key,
    put_positions,
)
from numtile.tiletensor.layout import c_strides, current_config
from numtile.tiletensor.logic import where
from numtile.tiletensor.manipulation import (
    _normalize_key,
    broadcast_to,
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


def _write_region(x: TileTensor, values: TileTensor, axis_map) -> None:
    """Copy tasks writing each tile of ``values`` into the region of x it maps to."""
    runtime = get_runtime()
    for v_index, src in zip(values.layout.indices(), values.handles):
        bounds = values.layout.tile_bounds(v_index)
        per_axis = []
        for axis, entry in enumerate(axis_map):
            if isinstance(entry, int):
                t = x.layout.tile_of(axis, entry)
                per_axis.append([(None, None, t, entry - x.layout.starts[axis][t])])
            else:
                k, start, step = entry
                o0, o1 = bounds[k]
                per_axis.append(list(_runs(x.layout, axis, o0, o1 - o0, start, step)))
        src_strides = c_strides(src.shape)
        for piece in itertools.product(*per_axis):
            dst = x.tile(tuple(run[2] for run in piece))
            dst_strides = c_strides(dst.shape)
            shape, strides = [1] * values.ndim, [0] * values.ndim
            src_offset = dst_offset = 0
            for axis, (begin, end, _, local) in enumerate(piece):
                dst_offset += local * dst_strides[axis]
                entry = axis_map[axis]
                if not isinstance(entry, int):
                    k, _, step = entry
                    shape[k] = end - begin
                    strides[k] = dst_strides[axis] * step
                    src_offset += (begin - bounds[k][0]) * src_strides[k]
            args = (
                src_offset,
                np.array(src_strides, np.int64),
                dst_offset,
                np.array(strides, np.int64),
                np.array(shape, np.int64),
            )
            runtime.submit(codelets.copy.copy_strided, [(src, R), (dst, RW)], args)


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
            _write_region(x, values, axis_map)
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
            _write_back(x, where(broadcast_to(full, x.shape), scalar, x))
            return x
        if parsed.axis:
            raise NotImplementedError("assigning a tensor through a mask that starts after axis 0")
        if mask.ndim != x.ndim:
            positions = np.flatnonzero(mask.to_numpy())
            parsed = Key("arrays", positions=positions, shape=positions.shape, merged=mask.ndim)
            return assign(x, parsed, value, accumulate)
        flat = flatten(x)
        flags = flatten(mask)
        flags = retile(flags, flat.tile_shape) if flags.tile_shape != flat.tile_shape else flags
        positions = np.flatnonzero(flags.to_numpy())
        copy = TileTensor(flat.layout, x.dtype)
        _copy_regions(flat, copy, [(0, 0, 1)])
        put_positions(copy, positions, 0, value, accumulate)
        _write_back(x, copy)
        return x
    if parsed.basic is not None and all(
        k == slice(None) or k is Ellipsis for k in _entries(parsed.basic)
    ):
        return put_positions(
            x, parsed.positions, parsed.axis, _flat_values(value, parsed, x), accumulate
        )
    merged = merge_leading(x, parsed.merged)
    copy = TileTensor(merged.layout, x.dtype)
    _copy_regions(merged, copy, [(a, 0, 1) for a in range(merged.ndim)])
    put_positions(
        copy, parsed.positions, parsed.axis, _flat_values(value, parsed, copy), accumulate
    )
    _write_back(x, copy)
    return x


def _entries(key):
    return key if isinstance(key, tuple) else (key,)


def _flat_values(value, parsed: Key, target: TileTensor):
    """``value`` shaped for a put along the key's axis (the key's shape flattened)."""
    shape = target.shape[: parsed.axis] + tuple(parsed.shape) + target.shape[parsed.axis + 1 :]
    if isinstance(value, TileTensor):
        if value.ndim and value.shape != shape and len(parsed.shape) > 1:
            value = broadcast_to(value, shape)
        if len(parsed.shape) > 1:
            value = reshape(
                retile(value, value.shape),
                target.shape[: parsed.axis]
                + (parsed.positions.size,)
                + target.shape[parsed.axis + 1 :],
            )
        return value
    array = np.broadcast_to(np.asarray(value), shape) if np.ndim(value) else np.asarray(value)
    if array.ndim:
        array = array.reshape(target.shape[: parsed.axis] + (-1,) + target.shape[parsed.axis + 1 :])
    return array


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
