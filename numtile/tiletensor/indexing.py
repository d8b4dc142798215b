"""Indexing: ``x[key]``, ``x[key] = value`` and ``take`` with basic, boolean-mask and
integer-array keys (NumPy's semantics for the keys the array API 2023.12 defines).

Keys whose output depends on data wait for what they need, and only that: an integer-array
key given as a TileTensor waits for its values (the tasks it needs are chosen from them); a
boolean mask of x's whole shape waits for one count per tile (the output's size), then tasks
compact the selected elements; a mask of x's leading axes waits for the mask itself.
Assignments are tasks that write x's own tiles, ordered after every earlier task on them.
"""

from __future__ import annotations

import itertools
import math
import operator

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import from_numpy, zeros
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import int64
from numtile.tiletensor.elementwise import astype
from numtile.tiletensor.layout import Layout, current_config
from numtile.tiletensor.manipulation import (
    _normalize_key,
    basic_getitem,
    broadcast_to,
    permute_dims,
    reshape,
    retile,
)
from numtile.tiletensor.tensor import TileTensor

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE


def flatten(x: TileTensor) -> TileTensor:
    """``x`` as one axis in C order (retiled first so that every tile is a run of it).

    >>> import numtile as nt
    >>> flatten(nt.arange(6).reshape(2, 3)).to_numpy().tolist()
    [0, 1, 2, 3, 4, 5]
    """
    if x.ndim == 1:
        return x
    if x.ndim == 0 or x.size == 0:
        return reshape(x, (x.size,))
    trailing = math.prod(x.shape[1:])
    lead = max(1, min(x.shape[0], math.prod(x.tile_shape) // trailing))
    return reshape(retile(x, (lead, *x.shape[1:])), (x.size,))


def merge_leading(x: TileTensor, count: int) -> TileTensor:
    """``x`` with its first ``count`` axes merged into one (a copy where the tiling needs it)."""
    if count == 1:
        return x
    inner = math.prod(x.shape[1:count])
    lead = max(1, min(x.shape[0], current_config().tile // max(inner, 1)))
    whole = retile(x, (lead, *x.shape[1:count], *x.tile_shape[count:]))
    return reshape(whole, (math.prod(x.shape[:count]), *x.shape[count:]))


def _is_array_key(k) -> bool:
    return isinstance(k, (list, np.ndarray, TileTensor))


def host_index_array(k) -> np.ndarray:
    """An array key as a host array (a TileTensor key is waited for)."""
    array = k.to_numpy() if isinstance(k, TileTensor) else np.asarray(k)
    if array.dtype == np.bool_ or array.dtype.kind in "iu":
        return array
    if array.size == 0 and array.dtype.kind == "f":  # [] is an empty integer key
        return array.astype(np.int64)
    raise IndexError(
        f"arrays used as indices must be of integer or boolean type, got {array.dtype}"
    )


def wrap_positions(positions: np.ndarray, size: int, axis: int) -> np.ndarray:
    """Integer ``positions`` along an axis of ``size`` as int64 in [0, size): negative ones
    count from the end; one out of range raises ``IndexError`` naming it and the size."""
    positions = np.asarray(positions).astype(np.int64, copy=False)
    bad = (positions < -size) | (positions >= size)
    if bad.any():
        first = int(positions[bad].reshape(-1)[0])
        raise IndexError(f"index {first} is out of bounds for axis {axis} with size {size}")
    return np.where(positions < 0, positions + size, positions)


def _pairs(positions: np.ndarray, listed_tile: int, target_tile: int):
    """Group the k-th listed element <-> target position ``positions[k]`` by (listed tile,
    target tile): yields (listed tile, target tile, listed locals, target locals), each
    group in the order listed (so a later duplicate is written later)."""
    listed = np.arange(positions.size, dtype=np.int64) // listed_tile
    target = positions // target_tile
    key = listed * (int(target.max(initial=0)) + 1) + target
    order = np.argsort(key, kind="stable")
    edges = np.flatnonzero(np.diff(key[order])) + 1
    for group in np.split(order, edges):
        if group.size:
            j, s = int(listed[group[0]]), int(target[group[0]])
            yield j, s, group - j * listed_tile, positions[group] - s * target_tile


def _axis_plan(shape, axis):
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def _move_positions(listed, target, positions, axis, gather, accumulate=False):
    """Copy between ``target``'s elements at ``positions`` along ``axis`` and ``listed``'s
    axis (both tiled alike on the other axes): ``gather`` fills listed from target, else
    target is written (or accumulated into) from listed."""
    runtime = get_runtime()
    groups = list(_pairs(positions, listed.tile_shape[axis], target.tile_shape[axis]))
    per_listed = {}
    for j, *_ in groups:
        per_listed[j] = per_listed.get(j, 0) + 1
    others = [range(g) for a, g in enumerate(listed.grid) if a != axis]
    for j, s, listed_local, target_local in groups:
        for rest in itertools.product(*others):
            li = rest[:axis] + (j,) + rest[axis:]
            ti = rest[:axis] + (s,) + rest[axis:]
            lh, th = listed.tile(li), target.tile(ti)
            pre, ln, post = _axis_plan(lh.shape, axis)
            tn = th.shape[axis]
            if gather:
                mode = W if per_listed[j] == 1 else ACC
                args = (pre, tn, post, ln, target_local, listed_local, False)
                runtime.submit(codelets.indexing.take, [(th, R), (lh, mode)], args)
            else:
                args = (pre, ln, post, tn, listed_local, target_local, accumulate)
                mode = ACC if accumulate else RW
                runtime.submit(codelets.indexing.take, [(lh, R), (th, mode)], args)


def take_positions(x: TileTensor, positions: np.ndarray, axis: int) -> TileTensor:
    """x's elements at the in-range int64 ``positions`` (1-D, host) along ``axis``."""
    m = positions.size
    tile = max(1, min(x.tile_shape[axis], m))
    layout = Layout(
        x.shape[:axis] + (m,) + x.shape[axis + 1 :],
        x.tile_shape[:axis] + (tile,) + x.tile_shape[axis + 1 :],
    )
    out = TileTensor(layout, x.dtype)
    if out.size:
        _move_positions(out, x, positions, axis, gather=True)
    return out


def put_positions(x: TileTensor, positions: np.ndarray, axis: int, values, accumulate=False):
    """x's elements at ``positions`` along ``axis`` = (or += when ``accumulate``) the
    elements of ``values`` along that axis (broadcast to the selection), in x's tiles."""
    shape = x.shape[:axis] + (positions.size,) + x.shape[axis + 1 :]
    tiles = x.tile_shape[:axis] + (max(1, min(x.tile_shape[axis], positions.size)),)
    tiles += x.tile_shape[axis + 1 :]
    values = as_values(values, x.dtype, shape, tiles)
    if values.size:
        _move_positions(values, x, positions, axis, gather=False, accumulate=accumulate)
    return x


def as_values(value, dtype, shape, tile_shape) -> TileTensor:
    """``value`` (a scalar, array or tensor) in ``dtype`` broadcast to ``shape`` in
    ``tile_shape`` tiles."""
    if not isinstance(value, TileTensor):
        value = from_numpy(np.asarray(value, dtype=dtype))
    if value.dtype != dtype:
        value = astype(value, dtype)
    return broadcast_to(value, tuple(shape), tuple(tile_shape))


class Key:
    """A parsed key: ``kind`` is "basic", "mask" (the mask covers axes [axis, axis + ndim))
    or "arrays" (int64 ``positions`` of the merged leading axes, or of one axis)."""

    __slots__ = ("kind", "basic", "mask", "axis", "positions", "shape", "merged")

    def __init__(self, kind, basic=None, mask=None, axis=0, positions=None, shape=(), merged=1):
        self.kind, self.basic, self.mask, self.axis = kind, basic, mask, axis
        self.positions, self.shape, self.merged = positions, shape, merged


def parse_key(x: TileTensor, key) -> Key:
    """Classify ``key`` for ``x`` (integer arrays and leading-axis masks are waited for)."""
    entries = key if isinstance(key, tuple) else (key,)
    advanced = [i for i, k in enumerate(entries) if _is_array_key(k)]
    if any(isinstance(k, (bool, np.bool_)) for k in entries):
        raise TypeError("boolean scalars as indices are not supported; use a boolean mask")
    if not advanced:
        return Key("basic", basic=key)
    arrays = {
        i: host_index_array(entries[i]) if not _is_device_mask(entries[i]) else None
        for i in advanced
    }
    masks = [i for i in advanced if arrays[i] is None or arrays[i].dtype == np.bool_]
    if masks:
        if len(advanced) > 1:
            raise IndexError("a boolean mask cannot be combined with other array indices")
        return _mask_key(x, entries, masks[0], arrays[masks[0]])
    rest = [k for i, k in enumerate(entries) if i not in advanced]
    if all(isinstance(k, slice) or k is Ellipsis for k in rest) and len(advanced) == 1:
        (at,) = advanced
        if Ellipsis in entries[:at]:
            at = x.ndim - (len(entries) - at)
        basic = tuple(k for k in entries[: advanced[0]]) + (slice(None),)
        basic += tuple(entries[advanced[0] + 1 :])
        _normalize_key(basic, x.ndim)  # too many indices raise here
        index = arrays[advanced[0]]
        positions = wrap_positions(index.reshape(-1), x.shape[at], at)
        return Key("arrays", basic=basic, axis=at, positions=positions, shape=index.shape)
    if not all(
        hasattr(k, "__index__") or i in advanced
        for i, k in enumerate(entries)
        if not (k is Ellipsis and i == len(entries) - 1)
    ):
        raise IndexError(
            "integer arrays combine with integers only (or, one array, with slices); "
            f"got key {key!r}"
        )
    count = len(entries) - (entries[-1] is Ellipsis)
    if count > x.ndim:
        raise IndexError(f"too many indices: {count} for a tensor with {x.ndim} axes")
    parts = [
        arrays[i] if i in advanced else np.asarray(operator.index(entries[i])) for i in range(count)
    ]
    try:
        parts = np.broadcast_arrays(*parts)
    except ValueError:
        shapes = [p.shape for p in parts]
        raise IndexError(
            f"shape mismatch: index arrays of shapes {shapes} do not broadcast"
        ) from None
    wrapped = [wrap_positions(p, x.shape[a], a) for a, p in enumerate(parts)]
    flat = np.ravel_multi_index(wrapped, x.shape[:count]) if count else np.zeros(0, np.int64)
    return Key(
        "arrays",
        axis=0,
        positions=flat.reshape(-1).astype(np.int64),
        shape=parts[0].shape,
        merged=count,
    )


def _is_device_mask(k) -> bool:
    return isinstance(k, TileTensor) and k.dtype == np.bool_


def _mask_key(x, entries, at, host_mask) -> Key:
    mask = entries[at]
    ndim = mask.ndim if isinstance(mask, TileTensor) else np.ndim(host_mask)
    rest = entries[:at] + entries[at + 1 :]
    if not all(isinstance(k, slice) and k == slice(None) or k is Ellipsis for k in rest):
        raise IndexError("a boolean mask combines with ':' and '...' only")
    if Ellipsis in entries[:at]:
        at = x.ndim - ndim - (len(entries) - 1 - at)
    shape = x.shape[at : at + ndim]
    mask_shape = mask.shape if isinstance(mask, TileTensor) else np.shape(host_mask)
    if tuple(mask_shape) != shape:
        raise IndexError(
            f"boolean index of shape {tuple(mask_shape)} does not match the indexed axes "
            f"{shape} of a tensor of shape {x.shape} (from axis {at})"
        )
    if not isinstance(mask, TileTensor):
        mask = from_numpy(host_mask)
    return Key("mask", mask=mask, axis=at)


def _masked_whole(x: TileTensor, mask: TileTensor) -> TileTensor:
    """x's elements where ``mask`` (of x's shape) is True, in C order (a 1-D tensor)."""
    flat, flags = flatten(x), flatten(mask)
    if flags.tile_shape != flat.tile_shape:
        flags = retile(flags, flat.tile_shape)
    counts = tile_counts(flags)
    out = TileTensor(Layout((int(counts.sum()),)), x.dtype)
    compact_into(
        out,
        counts,
        lambda i: ((flat.handles[i], R), (flags.handles[i], R)),
        codelets.indexing.compact,
    )
    return out


def tile_counts(flags: TileTensor) -> np.ndarray:
    """The number of nonzero elements of each tile of ``flags`` (waits for them)."""
    counts = zeros((len(flags.handles),), int64, tile_shape=1)
    runtime = get_runtime()
    for handle, out in zip(flags.handles, counts.handles):
        runtime.submit(codelets.indexing.count_nonzero, [(handle, R), (out, ACC)])
    return counts.to_numpy()


def compact_into(out: TileTensor, counts, sources, codelet, extra=lambda i: ()) -> None:
    """Write the ``counts[i]`` selected elements of source tile i, one after another, into
    1-D ``out``: a task per (source tile, out tile) piece, ``sources(i)`` naming its inputs."""
    runtime = get_runtime()
    starts = np.concatenate([[0], np.cumsum(counts)])
    size = out.tile_shape[0] if out.ndim else 1
    pieces_of = [0] * len(out.handles)
    plan = []
    for i, count in enumerate(counts):
        begin, end = int(starts[i]), int(starts[i] + count)
        for j in range(begin // size, -(-end // size)):
            lo, hi = max(begin, j * size), min(end, (j + 1) * size)
            plan.append((i, j, lo - begin, lo - j * size, hi - lo))
            pieces_of[j] += 1
    for i, j, skip, dst_begin, count in plan:
        mode = W if pieces_of[j] == 1 else ACC
        accesses = [*sources(i), (out.handles[j], mode)]
        runtime.submit(codelet, accesses, (skip, dst_begin, count, *extra(i)))


def apply_key(x: TileTensor, parsed: Key) -> TileTensor:
    """``x[key]`` for a parsed key."""
    if parsed.kind == "basic":
        return basic_getitem(x, parsed.basic)
    if parsed.kind == "mask":
        at, mask = parsed.axis, parsed.mask
        if at == 0 and mask.ndim == x.ndim:
            return _masked_whole(x, mask)
        order = list(range(at, at + mask.ndim))
        order += [a for a in range(x.ndim) if a not in order]
        moved = permute_dims(x, order) if at else x
        positions = np.flatnonzero(mask.to_numpy())
        out = take_positions(merge_leading(moved, mask.ndim), positions, 0)
        if at:
            back = list(range(1, at + 1)) + [0] + list(range(at + 1, out.ndim))
            out = permute_dims(out, back)
        return out
    if parsed.basic is not None:  # one array among slices: take along its axis
        y = basic_getitem(x, parsed.basic)
        out = take_positions(y, parsed.positions, parsed.axis)
        return _split_axis(out, parsed.axis, parsed.shape)
    out = take_positions(merge_leading(x, parsed.merged), parsed.positions, 0)
    return _split_axis(out, 0, parsed.shape)


def _split_axis(x: TileTensor, axis: int, shape) -> TileTensor:
    """Axis ``axis`` of ``x`` reshaped into ``shape`` (the shape of an integer-array key)."""
    shape = tuple(shape)
    if len(shape) == 1:
        return x
    whole = x.tile_shape[:axis] + (max(1, x.shape[axis]),) + x.tile_shape[axis + 1 :]
    x = retile(x, whole) if x.tile_shape != whole else x
    return reshape(x, x.shape[:axis] + shape + x.shape[axis + 1 :])


@dispatched(public="TileTensor.__getitem__ (indexing)")
def getitem(x: TileTensor, key) -> TileTensor:
    """``x[key]``: integers, slices (any step), ``None``, ``...``; a boolean mask of x's shape
    or of some of its axes; integer arrays (NumPy's semantics). A mask waits for the count
    of its True elements (the output's size), an integer TileTensor for its values.

    >>> import numtile as nt
    >>> x = nt.arange(10, tile_shape=4)
    >>> x[::-3].to_numpy().tolist(), x[x > 6].to_numpy().tolist()
    ([9, 6, 3, 0], [7, 8, 9])
    >>> x[[0, -1, 0]].to_numpy().tolist()
    [0, 9, 0]
    """
    return apply_key(x, parse_key(x, key))


@dispatched
def take(x: TileTensor, indices, /, *, axis: int | None = None) -> TileTensor:
    """Elements of ``x`` at ``indices`` (1-D integers) along ``axis`` (optional for 1-D x).

    Indices given as a TileTensor are waited for: which tiles each output tile reads
    depends on them.

    >>> import numtile as nt
    >>> nt.take(nt.arange(6).reshape(2, 3), nt.asarray([2, 0]), axis=1).to_numpy().tolist()
    [[2, 0], [5, 3]]
    """
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take needs axis= for a {x.ndim}-d tensor (shape {x.shape})")
        axis = 0
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of bounds for a tensor with {x.ndim} axes")
    axis %= x.ndim
    index = host_index_array(indices)
    if index.ndim != 1 or index.dtype.kind not in "iu":
        raise TypeError(f"take needs 1-D integer indices, got {index.dtype} of shape {index.shape}")
    return take_positions(x, wrap_positions(index, x.shape[axis], axis), axis)
