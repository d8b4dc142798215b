"""Moving data between tiles: retile, transpose, reshape and indexing with ``[]``."""

from __future__ import annotations

import itertools
import math
import operator

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.copying import check_copy, normalize_axis
from numtile.tiletensor.copying import copy_regions as _copy_regions
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.layout import Layout, c_strides, current_config
from numtile.tiletensor.tensor import TileTensor

R, W, ACC = Access.R, Access.W, Access.ACCUMULATE


@dispatched
def retile(x: TileTensor, tile_shape) -> TileTensor:
    """The same values cut into tiles of ``tile_shape`` (an explicit copy).

    >>> import numtile as nt
    >>> nt.ones((5, 5), tile_shape=(2, 2)).retile((5, 3)).grid
    (1, 2)
    """
    layout = Layout(x.shape, tile_shape)
    if layout == x.layout:
        return x
    out = TileTensor(layout, x.dtype)
    return _copy_regions(x, out, [(axis, 0, 1) for axis in range(x.ndim)])


@dispatched
def broadcast_to(x: TileTensor, shape, tile_shape=None) -> TileTensor:
    """``x`` repeated along its length-1 axes (and new leading axes) to ``shape``.

    >>> import numtile as nt
    >>> nt.broadcast_to(nt.arange(3, tile_shape=2), (2, 3)).to_numpy().tolist()
    [[0, 1, 2], [0, 1, 2]]
    """
    shape = tuple(shape)
    try:
        if np.broadcast_shapes(x.shape, shape) != shape:
            raise ValueError
    except ValueError:
        raise ValueError(f"cannot broadcast a tensor of shape {x.shape} to {shape}") from None
    if x.ndim < len(shape):
        x = reshape(x, (1,) * (len(shape) - x.ndim) + x.shape)
    if tile_shape is None:
        edge = current_config().tile
        tile_shape = tuple(
            t if s == n else max(1, min(n, edge)) for s, n, t in zip(x.shape, shape, x.tile_shape)
        )
    layout = Layout(shape, tile_shape)
    if shape == x.shape and layout.tile_shape == x.tile_shape:
        return x
    out = TileTensor(layout, x.dtype)
    axis_map = [
        (k, 0, 0 if s == 1 and n != 1 else 1) for k, (s, n) in enumerate(zip(x.shape, shape))
    ]
    return _copy_regions(x, out, axis_map)


@dispatched
def permute_dims(x: TileTensor, axes) -> TileTensor:
    """Permute the axes (array API ``permute_dims``); the tiling is permuted the same way.

    >>> import numtile as nt
    >>> nt.zeros((2, 3, 4), tile_shape=(1, 2, 3)).permute_dims((2, 0, 1)).tile_shape
    (3, 1, 2)
    """
    given = tuple(operator.index(a) for a in axes)
    axes = tuple(a % x.ndim if -x.ndim <= a < x.ndim else a for a in given)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"axes {given} is not a permutation of the {x.ndim} axes of {x.shape}")
    layout = Layout(tuple(x.shape[a] for a in axes), tuple(x.tile_shape[a] for a in axes))
    out = TileTensor(layout, x.dtype)
    axis_map = [None] * x.ndim
    for k, a in enumerate(axes):
        axis_map[a] = (k, 0, 1)
    return _copy_regions(x, out, axis_map)


@dispatched
def transpose(x: TileTensor, axes=None) -> TileTensor:
    """Reverse the axes (or permute them as ``axes`` says), like ``numpy.transpose``."""
    return permute_dims(x, tuple(range(x.ndim))[::-1] if axes is None else axes)


@dispatched(public="numtile.linalg.matrix_transpose")
def matrix_transpose(x: TileTensor) -> TileTensor:
    """Swap the last two axes (array API ``matrix_transpose``, the ``.mT`` attribute)."""
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose needs at least 2 axes, got shape {x.shape}")
    axes = list(range(x.ndim))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return permute_dims(x, axes)


def _axis_groups(old, new):
    """Pair runs of old axes with runs of new axes of equal size (size-1 axes on their own)."""
    i = j = 0
    groups = []
    while i < len(old) or j < len(new):
        if i < len(old) and old[i] == 1 and (j >= len(new) or new[j] != 1):
            groups.append(([i], []))
            i += 1
        elif j < len(new) and new[j] == 1 and (i >= len(old) or old[i] != 1):
            groups.append(([], [j]))
            j += 1
        elif i < len(old) and j < len(new) and old[i] == 1 and new[j] == 1:
            groups.append(([i], [j]))
            i, j = i + 1, j + 1
        else:
            gi, gj, po, pn = [i], [j], old[i], new[j]
            i, j = i + 1, j + 1
            while po != pn:
                if po < pn:
                    gi.append(i)
                    po *= old[i]
                    i += 1
                else:
                    gj.append(j)
                    pn *= new[j]
                    j += 1
            groups.append((gi, gj))
    return groups


def _chunk_starts(dims, tiles) -> list[int] | None:
    """Flat starts of the tiles of a group of axes, or None if some tile is not contiguous."""
    # contiguous iff: axes after the last cut axis are whole, axes before it have tiles of 1
    split = max((a for a in range(len(dims)) if tiles[a] < dims[a]), default=None)
    if split is not None and any(tiles[a] != 1 and dims[a] != 1 for a in range(split)):
        return None
    starts = []
    strides = c_strides(dims)
    grids = [range(0, d, t) for d, t in zip(dims, tiles)]
    for corner in itertools.product(*grids):
        starts.append(sum(c * s for c, s in zip(corner, strides)))
    return starts


def _tiles_for(dims, starts) -> tuple[int, ...] | None:
    """A tiling of ``dims`` whose tiles start at the flat offsets ``starts``, if one exists."""
    total = math.prod(dims)
    first = (starts[1] if len(starts) > 1 else total) - starts[0]
    for split in range(len(dims)):
        post = math.prod(dims[split + 1 :])
        if first % post:
            continue
        tile = first // post
        if not 1 <= tile <= dims[split]:
            continue
        tiles = tuple([1] * split + [tile] + list(dims[split + 1 :]))
        if _chunk_starts(dims, tiles) == starts:
            return tiles
    return None


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _chunk_tilings(dims) -> dict[int, tuple[int, ...]]:
    """Tilings of a group of axes whose tiles are equal contiguous runs, by run length."""
    tilings = {}
    for split in range(len(dims)):
        post = math.prod(dims[split + 1 :])
        for c in _divisors(dims[split]):
            tilings.setdefault(c * post, (1,) * split + (c,) + tuple(dims[split + 1 :]))
    return tilings


def _viewable_tiling(old_dims, new_dims, old_tiles) -> tuple[int, ...]:
    """A tiling of ``old_dims`` that reshapes into ``new_dims`` tile by tile, with tiles as
    near in size to ``old_tiles``' as the two shapes allow (one tile always works)."""
    old, new = _chunk_tilings(old_dims), _chunk_tilings(new_dims)
    target = math.prod(old_tiles)
    run = min(set(old) & set(new), key=lambda c: (abs(math.log(c / target)), -c))
    return old[run]


def _view_tiles(x: TileTensor, shape) -> tuple[tuple[int, ...] | None, list]:
    """(the tiles of ``shape`` that hold ``x``'s tiles unchanged, or None; the groups of
    axes whose tiles do not map, as (old axes, new axes))."""
    new_tiles = [1] * len(shape)
    failed = []
    for old_axes, new_axes in _axis_groups(x.shape, shape):
        if not new_axes or not old_axes:
            continue
        dims_old = [x.shape[a] for a in old_axes]
        starts = _chunk_starts(dims_old, [x.tile_shape[a] for a in old_axes])
        dims_new = [shape[a] for a in new_axes]
        tiles = _tiles_for(dims_new, starts) if starts is not None else None
        if tiles is None:
            failed.append((old_axes, new_axes))
            continue
        for a, t in zip(new_axes, tiles):
            new_tiles[a] = t
    return (None if failed else tuple(new_tiles)), failed


@dispatched
def reshape(x: TileTensor, shape, *, copy: bool | None = None) -> TileTensor:
    """Give ``x`` a new shape (array API ``reshape``).

    Where the tiling allows, each tile keeps its elements (a tile maps to a tile of the new
    shape when it is a contiguous run of the flattened axes it spans): one tile-local copy
    task per tile, no data crosses tiles. Where it does not, ``x`` is first retiled so that
    it does (the nearest tile sizes that work); ``copy=False`` refuses that retile with a
    ``ValueError`` naming it. numtile's tiles are never shared with the result, so
    ``copy=True`` and ``None`` behave the same.

    >>> import numtile as nt
    >>> nt.arange(12, tile_shape=4).reshape((3, 4)).tile_shape
    (1, 4)
    >>> nt.arange(12, tile_shape=4).reshape((4, 3)).to_numpy()[1].tolist()  # retiled first
    [3, 4, 5]
    """
    check_copy(copy)
    if isinstance(shape, int) or hasattr(shape, "__index__"):
        shape = (shape,)
    shape = [operator.index(s) for s in shape]
    if shape.count(-1) > 1:
        raise ValueError(f"only one -1 is allowed in shape {tuple(shape)}")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or x.size % known:
            raise ValueError(f"cannot reshape a tensor of shape {x.shape} into {tuple(shape)}")
        shape[shape.index(-1)] = x.size // known
    shape = tuple(shape)
    if any(s < 0 for s in shape) or math.prod(shape) != x.size:
        raise ValueError(f"cannot reshape a tensor of shape {x.shape} into {shape}")
    if shape == x.shape and not copy:
        return x
    if x.size == 0:
        return TileTensor(Layout(shape), x.dtype)
    new_tiles, failed = _view_tiles(x, shape)
    if new_tiles is None:
        if copy is False:
            old_axes, new_axes = failed[0]
            raise ValueError(
                f"cannot reshape {x.shape} with tile_shape {x.tile_shape} into {shape} "
                f"without a copy (copy=False): the tiles of axes {old_axes} do not map onto "
                f"tiles of axes {new_axes}; retile first so that only the first of those axes "
                f"is cut into tiles"
            )
        tiles = list(x.tile_shape)
        for old_axes, new_axes in failed:
            group = _viewable_tiling(
                [x.shape[a] for a in old_axes],
                [shape[a] for a in new_axes],
                [x.tile_shape[a] for a in old_axes],
            )
            for a, t in zip(old_axes, group):
                tiles[a] = t
        x = retile(x, tuple(tiles))
        new_tiles, failed = _view_tiles(x, shape)
        assert new_tiles is not None, (x.layout, shape, failed)
    out = TileTensor(Layout(shape, new_tiles), x.dtype)
    runtime = get_runtime()
    for src, dst in zip(x.handles, out.handles):
        assert math.prod(src.shape) == math.prod(dst.shape)
        flat = np.array([math.prod(src.shape)], np.int64)
        one = np.ones(1, np.int64)
        runtime.submit(codelets.copy.copy_strided, [(src, R), (dst, W)], (0, one, 0, one, flat))
    return out


def _normalize_key(key, ndim):
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        if isinstance(k, (list, np.ndarray, TileTensor)) or isinstance(k, (bool, np.bool_)):
            raise TypeError(
                "numtile supports basic indexing only (integers, slices, None, ...); "
                f"got {type(k).__name__}"
            )
        if not (k is None or k is Ellipsis or isinstance(k, slice) or hasattr(k, "__index__")):
            raise IndexError(  # NumPy's error (and array_api_strict's) for such a key
                f"invalid index {k!r}: only integers, slices, ellipsis (...), None and integer "
                "or boolean arrays are valid indices"
            )
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices: {used} for a tensor with {ndim} axes")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (ndim - used) + key[at + 1 :]
    else:
        key = key + (slice(None),) * (ndim - used)
    return key


def basic_getitem(x: TileTensor, key) -> TileTensor:
    """Basic indexing (the ``getitem`` op of ``indexing.py`` for keys of integers, slices,
    None and ...): tile-aligned slices share tiles, any other slice copies.

    >>> import numtile as nt
    >>> x = nt.arange(10, tile_shape=4)
    >>> basic_getitem(x, slice(4, None)).to_numpy().tolist()
    [4, 5, 6, 7, 8, 9]
    """
    key = _normalize_key(key, x.ndim)
    axis_map, out_shape, out_tiles = [], [], []
    src_axis = 0
    aligned = True
    for k in key:
        if k is None:
            out_shape.append(1)
            out_tiles.append(1)
            aligned = False
            continue
        dim, tile = x.shape[src_axis], x.tile_shape[src_axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(dim)
            length = len(range(start, stop, step))
            axis_map.append((len(out_shape), start, step))
            out_shape.append(length)
            out_tiles.append(max(1, min(tile, length)))
            if step != 1 or start % tile or (stop % tile and stop != dim and length):
                aligned = False
        else:
            position = operator.index(k)
            if not -dim <= position < dim:
                raise IndexError(
                    f"index {position} is out of bounds for axis {src_axis} with size {dim}"
                )
            axis_map.append(position % dim)
            aligned = False
        src_axis += 1
    layout = Layout(tuple(out_shape), tuple(out_tiles))
    if aligned:
        ranges = [
            range(start // x.tile_shape[a], start // x.tile_shape[a] + layout.grid[a])
            for a, (_, start, _) in enumerate(axis_map)
        ]
        handles = [x.tile(index) for index in itertools.product(*ranges)]
        return TileTensor(layout, x.dtype, handles)
    out = TileTensor(layout, x.dtype)
    return _copy_regions(x, out, axis_map)


@dispatched
def expand_dims(x: TileTensor, axis: int = 0) -> TileTensor:
    """Insert an axis of length 1 at ``axis``."""
    axis = normalize_axis(axis, x.ndim + 1)  # an axis of the result
    return reshape(x, x.shape[:axis] + (1,) + x.shape[axis:])


@dispatched
def squeeze(x: TileTensor, axis) -> TileTensor:
    """Remove the length-1 axes named by ``axis``."""
    if not isinstance(axis, (tuple, list)):
        axis = (axis,)
    axes = tuple(normalize_axis(a, x.ndim) for a in axis)
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis in {axis}")
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"cannot squeeze axis {a} of shape {x.shape}: its length is not 1")
    return reshape(x, tuple(s for a, s in enumerate(x.shape) if a not in axes))
