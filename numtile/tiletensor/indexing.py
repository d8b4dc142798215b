"""Indexing: ``x[key]``, ``x[key] = value`` and ``take`` with basic, boolean-mask and
integer-array keys (NumPy's semantics for the keys the array API 2023.12 defines).

Keys whose output depends on data wait for what they need, and only that: an integer-array
key given as a TileTensor waits for its values (the tasks it needs are chosen from them); a
boolean mask of x's whole shape waits for one count per tile (the output's size; one per line
of a tile where the tiles cut an axis after the first: ``masked``), then tasks compact the
selected elements; a mask of x's leading axes waits for the mask itself.
Assignments are tasks that write x's own tiles, ordered after every earlier task on them.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.copying import normalize_axis
from numtile.tiletensor.creation import from_numpy, zeros
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import int64
from numtile.tiletensor.elementwise import astype
from numtile.tiletensor.layout import Layout, current_config
from numtile.tiletensor.manipulation import (
    basic_getitem,
    broadcast_to,
    permute_dims,
    reshape,
    retile,
)
from numtile.tiletensor.masked import last_cut_axis, masked_by_lines
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


def _empty_list(k) -> bool:
    """Whether ``k`` is an empty list (``[]``, ``[[]]``): an integer key, though NumPy reads
    it as float64; an empty float array is no key."""
    return isinstance(k, list) and np.size(k) == 0


def host_index_array(k) -> np.ndarray:
    """An array key as a host array (a TileTensor key is waited for)."""
    array = k.to_numpy() if isinstance(k, TileTensor) else np.asarray(k)
    if array.dtype == np.bool_ or array.dtype.kind in "iu":
        return array
    if _empty_list(k):  # [] is an empty integer key, as in NumPy
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
    """A parsed key: ``kind`` is "basic", "mask" (a mask, the only array in the key, covers
    axes [axis, axis + ndim)) or "arrays" (integer arrays, masks as their ``nonzero``
    positions, boolean scalars, with integers, slices, None and ...: NumPy's advanced
    indexing). For "arrays", ``basic`` is the key with each array replaced by ':' (and
    boolean scalars dropped), ``axes`` the axes of ``x[basic]`` the arrays index,
    ``positions`` the int64 flat positions into those axes (the arrays broadcast to
    ``shape``, C order), and ``place`` the output axis where ``shape`` goes."""

    __slots__ = ("kind", "basic", "mask", "axis", "axes", "positions", "shape", "place")

    def __init__(self, kind, basic=None, mask=None, axis=0, axes=(), positions=None, shape=()):
        self.kind, self.basic, self.mask, self.axis, self.axes = kind, basic, mask, axis, axes
        self.positions, self.shape, self.place = positions, shape, 0


def _scalar_entry(k):
    """A 0-d integer or boolean array key as the Python int or bool it stands for."""
    if isinstance(k, (np.ndarray, TileTensor)) and k.ndim == 0:
        value = host_index_array(k)
        return bool(value) if value.dtype == np.bool_ else int(value)
    return k


def _is_bool(k) -> bool:
    return isinstance(k, (bool, np.bool_))


def parse_key(x: TileTensor, key) -> Key:
    """Classify ``key`` for ``x`` (integer arrays and masks other than a lone mask of x's
    leading axes are waited for)."""
    entries = tuple(_scalar_entry(k) for k in (key if isinstance(key, tuple) else (key,)))
    advanced = [i for i, k in enumerate(entries) if _is_array_key(k) or _is_bool(k)]
    if not advanced:
        return Key("basic", basic=entries if isinstance(key, tuple) else entries[0])
    if len(advanced) == 1 and _is_array_key(entries[advanced[0]]):
        (at,) = advanced
        k = entries[at]
        host = None if _is_device_mask(k) else host_index_array(k)
        rest = entries[:at] + entries[at + 1 :]
        lone = all(isinstance(r, slice) and r == slice(None) or r is Ellipsis for r in rest)
        if lone and (host is None or host.dtype == np.bool_):
            return _mask_key(x, entries, at, host)
    return _arrays_key(x, entries)


def _arrays_key(x: TileTensor, entries) -> Key:
    """NumPy's advanced indexing: masks become their ``nonzero`` arrays, integers next to
    arrays index like 0-d arrays; the broadcast arrays' shape replaces the indexed axes when
    the advanced entries are adjacent in the key, else it goes first."""
    hosts = {i: host_index_array(k) for i, k in enumerate(entries) if _is_array_key(k)}
    consumed = sum(
        hosts[i].ndim if i in hosts and hosts[i].dtype == np.bool_ else 1
        for i, k in enumerate(entries)
        if not (k is None or k is Ellipsis or _is_bool(k))
    )
    if sum(k is Ellipsis for k in entries) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > x.ndim:
        raise IndexError(f"too many indices: {consumed} for a tensor with {x.ndim} axes")
    flagged = [
        i for i, k in enumerate(entries) if i in hosts or _is_bool(k) or hasattr(k, "__index__")
    ]
    adjacent = flagged == list(range(flagged[0], flagged[-1] + 1))
    basic, axes, arrays, factors, dims = [], [], [], [], []
    axis = y_axis = 0
    place = None
    for i, k in enumerate(entries):
        if i == flagged[0]:
            place = y_axis if adjacent else 0
        if k is Ellipsis:
            basic += [slice(None)] * (x.ndim - consumed)
            axis += x.ndim - consumed
            y_axis += x.ndim - consumed
        elif _is_bool(k):
            factors.append(np.zeros(1 if k else 0, np.int64))
        elif i in hosts and hosts[i].dtype == np.bool_:
            mask = hosts[i]
            shape = x.shape[axis : axis + mask.ndim]
            if mask.shape != shape:
                raise IndexError(
                    f"boolean index of shape {mask.shape} does not match the indexed axes "
                    f"{shape} of a tensor of shape {x.shape} (from axis {axis})"
                )
            arrays += [p.astype(np.int64) for p in np.nonzero(mask)]
            axes += range(y_axis, y_axis + mask.ndim)
            dims += shape
            basic += [slice(None)] * mask.ndim
            axis += mask.ndim
            y_axis += mask.ndim
        elif i in hosts:
            arrays.append(wrap_positions(hosts[i], x.shape[axis], axis))
            axes.append(y_axis)
            dims.append(x.shape[axis])
            basic.append(slice(None))
            axis += 1
            y_axis += 1
        else:
            basic.append(k)
            axis += k is not None
            y_axis += not hasattr(k, "__index__")
    try:
        parts = np.broadcast_arrays(*arrays, *factors)
    except ValueError:
        shapes = [np.shape(p) for p in arrays]
        raise IndexError(
            f"shape mismatch: index arrays of shapes {shapes} do not broadcast"
        ) from None
    flat = np.ravel_multi_index(parts[: len(arrays)], dims) if arrays else parts[0]
    parsed = Key("arrays", basic=tuple(basic), axes=tuple(axes), shape=parts[0].shape)
    parsed.positions = np.ascontiguousarray(flat, dtype=np.int64).reshape(-1)
    parsed.place = place
    return parsed


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
    if x.size == 0:  # no tiles: nothing to count lines of
        return TileTensor(Layout((0,)), x.dtype)
    if x.ndim > 1 and last_cut_axis(x.layout) > 0:
        same_tiles = mask.tile_shape == x.tile_shape
        return masked_by_lines(x, mask if same_tiles else retile(mask, x.tile_shape))
    flat, flags = flatten(x), flatten(mask)
    if flags.tile_shape != flat.tile_shape:
        flags = retile(flags, flat.tile_shape)
    return flagged_values(flat, flags, tile_counts(flags))


def flagged_values(source: TileTensor, flags: TileTensor, counts) -> TileTensor:
    """The elements of 1-D ``source`` where 1-D ``flags`` (tiled alike) is nonzero, in order:
    ``counts[i]`` of them in tile i (from ``tile_counts``)."""
    out = TileTensor(Layout((int(np.sum(counts)),)), source.dtype)
    sources = lambda i: ((source.handles[i], R), (flags.handles[i], R))  # noqa: E731
    compact_into(out, counts, sources, codelets.indexing.compact)
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


def flagged_positions(flags: TileTensor, counts) -> TileTensor:
    """The 1-D int64 positions in 1-D ``flags`` of its nonzero elements, ``counts[i]`` of
    them in tile i (from ``tile_counts``)."""
    out = TileTensor(Layout((int(np.sum(counts)),)), int64)
    starts = flags.layout.starts[0]
    compact_into(
        out,
        counts,
        lambda i: ((flags.handles[i], R),),
        codelets.indexing.compact_positions,
        lambda i: (starts[i],),
    )
    return out


def apply_key(x: TileTensor, parsed: Key) -> TileTensor:
    """``x[key]`` for a parsed key."""
    if parsed.kind == "basic":
        return basic_getitem(x, parsed.basic)
    if parsed.kind == "mask":
        if parsed.axis == 0 and parsed.mask.ndim == x.ndim:
            return _masked_whole(x, parsed.mask)
        return apply_key(x, mask_as_arrays(x, parsed))
    merged, axis = merge_advanced(basic_getitem(x, parsed.basic), parsed.axes)
    out = _split_axis(take_positions(merged, parsed.positions, axis), axis, parsed.shape)
    return move_block(out, axis, len(parsed.shape), parsed.place)


def mask_as_arrays(x: TileTensor, parsed: Key) -> Key:
    """A mask key as the integer-array key of its ``nonzero`` positions (waits for the mask)."""
    return _arrays_key(x, (slice(None),) * parsed.axis + (parsed.mask.to_numpy(),))


def merge_advanced(y: TileTensor, axes) -> tuple[TileTensor, int]:
    """``y`` with its ``axes`` merged into one axis (a new one of length 1 when there are
    none), and that axis: the axis itself for one, else 0 (a copy moves them first)."""
    if not axes:
        return reshape(y, (1,) + y.shape), 0
    if len(axes) == 1:
        return y, axes[0]
    order = list(axes) + [a for a in range(y.ndim) if a not in axes]
    moved = permute_dims(y, order) if order != list(range(y.ndim)) else y
    return merge_leading(moved, len(axes)), 0


def move_block(x: TileTensor, start: int, count: int, to: int) -> TileTensor:
    """``x`` with its axes [start, start + count) moved, in order, to start at ``to``."""
    if start == to:
        return x
    rest = [a for a in range(x.ndim) if not start <= a < start + count]
    return permute_dims(x, rest[:to] + list(range(start, start + count)) + rest[to:])


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
    """``x[key]``: integers, slices (any step), ``None``, ``...``, boolean masks, boolean
    scalars and integer arrays in any mix, with NumPy's advanced-indexing rules (the arrays'
    broadcast shape replaces the indexed axes when the array, mask, bool and integer entries
    are adjacent in the key, else it comes first). A lone mask of x's shape waits for the
    count of its True elements (the output's size); other masks and integer TileTensors are
    waited for themselves.

    >>> import numtile as nt
    >>> x = nt.arange(10, tile_shape=4)
    >>> x[::-3].to_numpy().tolist(), x[x > 6].to_numpy().tolist()
    ([9, 6, 3, 0], [7, 8, 9])
    >>> x[[0, -1, 0]].to_numpy().tolist()
    [0, 9, 0]
    >>> y = nt.arange(24).reshape(2, 3, 4)
    >>> y[0, :, [1, 2]].shape, y[:, 0, [1, 2]].shape, y[True].shape
    ((2, 3), (2, 2), (1, 2, 3, 4))
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
    axis = normalize_axis(axis, x.ndim)
    dtype = indices.dtype if isinstance(indices, TileTensor) else np.asarray(indices).dtype
    if dtype.kind not in "iu" and not _empty_list(indices):
        raise TypeError(f"take needs integer indices, got {dtype}")  # NumPy's error type
    index = host_index_array(indices)
    if index.ndim != 1:
        raise ValueError(f"take needs 1-D indices, got shape {index.shape}")
    return take_positions(x, wrap_positions(index, x.shape[axis], axis), axis)
