"""Creating tensors: from NumPy, constants, ranges, and the ``*_like`` variants."""

from __future__ import annotations

import math

import numpy as np

from numtile.runtime import Access, DataHandle, get_runtime
from numtile.runtime.distributed.distribution import ALL, as_distribution
from numtile.runtime.distributed.front import place
from numtile.tiletensor import codelets, placement
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import check_dtype, float64, int64
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor


def from_numpy(x, tile_shape=None, dtype=None, distribution=None) -> TileTensor:
    """Copy a NumPy array (or anything ``np.asarray`` takes) into a new TileTensor.

    Under MPI, ``distribution`` (``nt.distribution.block_cyclic(grid)``, ``by_axis(axis)``,
    ``replicated``, or a function ``tile index -> rank``) names each tile's owner rank, which
    keeps the tile (the others drop their copy of ``x``'s part); without one, every rank
    keeps every tile, until a task on one rank writes it (inside an op on distributed
    tensors, it takes the op's distribution: ``tiletensor/placement.py``). A rank that does
    not exist is a ``ValueError``.

    >>> import numtile as nt, numpy as np
    >>> nt.from_numpy(np.ones((3, 5), np.float32), tile_shape=(2, 2)).grid
    (2, 3)
    """
    if isinstance(x, TileTensor):
        out = x if dtype is None else x.astype(dtype)
        return out if tile_shape is None else out.retile(tile_shape)
    array = np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)
    if not array.dtype.isnative:  # big-endian data (from a file, say): tiles are native
        array = array.astype(array.dtype.newbyteorder("="))
    if array.dtype == np.float16 or array.dtype.kind in "iu" and array.dtype != np.int64:
        check_dtype(array.dtype)  # raise TypeError: no silent widening of user data
    layout = Layout(array.shape, tile_shape)
    dt = check_dtype(array.dtype)
    owners = here = None
    if distribution is not None:
        owners, here = tile_owners(layout, distribution)
    elif placement.inherited() is not None:  # made inside an op on distributed tensors
        try:
            owners, here = tile_owners(layout, placement.inherited())
            distribution = placement.inherited()
        except Exception:  # it cannot place this tensor: held by every rank
            owners = here = None
    handles = []
    try:
        for flat, index in enumerate(layout.indices()):
            shape = layout.tile_shape_at(index)
            if owners is not None and owners[flat] != here and owners[flat] != ALL:
                handles.append(DataHandle(shape, dt))  # owned by another rank
            else:
                region = tuple(slice(a, b) for a, b in layout.tile_bounds(index))
                handles.append(DataHandle(shape, dt, np.array(array[region], order="C")))
            if owners is not None:
                place(handles[-1], owners[flat])
    except BaseException:  # e.g. the spill disk is full: a traceback may keep ``handles``
        for handle in handles:
            handle.drop_replicas()  # alive, their memory and spill files go now
        raise
    out = TileTensor(layout, dt, handles)
    if distribution is not None:
        out.distribution = as_distribution(distribution)
    return out


asarray = from_numpy


def tile_owners(layout: Layout, distribution) -> tuple[list[int], int]:
    """The owner rank of each tile of ``layout`` under ``distribution``, and this rank."""
    front = get_runtime().distributed
    nranks, here = (1, 0) if front is None else (front.nranks, front.rank)
    owners = as_distribution(distribution).owners(list(layout.indices()), nranks)
    if front is not None:
        placement.activate()  # from now on, ops give their results their inputs' distribution
    return owners, here


def empty(shape, dtype=float64, tile_shape=None, *, distribution=None) -> TileTensor:
    """A tensor whose tiles are allocated on first write (contents undefined).

    >>> import numtile as nt
    >>> nt.empty((4, 4), tile_shape=(2, 2)).grid
    (2, 2)
    """
    out = TileTensor(Layout(shape, tile_shape), dtype)
    if distribution is not None:  # under MPI: the owners write the tiles (from_numpy's)
        owners, _ = tile_owners(out.layout, distribution)
        for handle, owner in zip(out.handles, owners):
            place(handle, owner)
        out.distribution = as_distribution(distribution)
    return out


def full(shape, fill_value, dtype=None, tile_shape=None, *, distribution=None) -> TileTensor:
    """A tensor of ``fill_value`` everywhere (dtype inferred from the value if not given).

    >>> import numtile as nt
    >>> nt.full((2, 3), 7, tile_shape=(1, 2)).to_numpy().tolist()
    [[7, 7, 7], [7, 7, 7]]
    """
    if dtype is None:
        dtype = np.result_type(fill_value) if not isinstance(fill_value, bool) else np.bool_
        dtype = int64 if np.dtype(dtype).kind in "iu" else dtype
    out = empty(shape, dtype, tile_shape, distribution=distribution)
    fill_tiles(out, fill_value)
    return out


def fill_tiles(out: TileTensor, value) -> TileTensor:
    """Submit a fill task on every tile of ``out``."""
    runtime = get_runtime()
    value = out.dtype.type(value)
    for handle in out.handles:
        runtime.submit(codelets.copy.fill, [(handle, Access.W)], (value,))
    return out


def zeros(shape, dtype=float64, tile_shape=None, *, distribution=None) -> TileTensor:
    """A tensor of zeros.

    >>> import numtile as nt
    >>> float(nt.zeros((3,)).to_numpy().sum())
    0.0
    """
    return full(shape, 0, dtype, tile_shape, distribution=distribution)


def ones(shape, dtype=float64, tile_shape=None, *, distribution=None) -> TileTensor:
    """A tensor of ones.

    >>> import numtile as nt
    >>> nt.ones((2,), dtype="int64").to_numpy().tolist()
    [1, 1]
    """
    return full(shape, 1, dtype, tile_shape, distribution=distribution)


@dispatched
def empty_like(x: TileTensor, dtype=None, tile_shape=None) -> TileTensor:
    return empty(x.shape, dtype or x.dtype, tile_shape or x.tile_shape)


@dispatched
def zeros_like(x: TileTensor, dtype=None, tile_shape=None) -> TileTensor:
    return zeros(x.shape, dtype or x.dtype, tile_shape or x.tile_shape)


@dispatched
def ones_like(x: TileTensor, dtype=None, tile_shape=None) -> TileTensor:
    return ones(x.shape, dtype or x.dtype, tile_shape or x.tile_shape)


@dispatched
def full_like(x: TileTensor, fill_value, dtype=None, tile_shape=None) -> TileTensor:
    return full(x.shape, fill_value, dtype or x.dtype, tile_shape or x.tile_shape)


def arange(start, stop=None, step=1, *, dtype=None, tile_shape=None) -> TileTensor:
    """Evenly spaced values in [start, stop), like ``numpy.arange``.

    >>> import numtile as nt
    >>> nt.arange(1, 8, 2, tile_shape=2).to_numpy().tolist()
    [1, 3, 5, 7]
    """
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange step must not be zero")
    length = max(0, math.ceil((stop - start) / step))
    if dtype is None:
        dtype = np.result_type(start, stop, step)
        dtype = int64 if np.dtype(dtype).kind in "iu" else float64
    out = empty((length,), dtype, tile_shape)
    runtime = get_runtime()
    typed = out.dtype.type
    for (i,), handle in zip(out.layout.indices(), out.handles):
        first = start + out.layout.starts[0][i] * step
        runtime.submit(
            codelets.elementwise.arange, [(handle, Access.W)], (typed(first), typed(step))
        )
    return out
