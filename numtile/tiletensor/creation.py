"""Creating tensors: from NumPy, constants, ranges, and the ``*_like`` variants."""

from __future__ import annotations

import math

import numpy as np

from numtile.runtime import Access, DataHandle, get_runtime
from numtile.runtime.distributed.distribution import ALL, as_distribution
from numtile.runtime.distributed.front import place
from numtile.tiletensor import codelets, placement
from numtile.tiletensor.copying import check_copy
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dlpack_bf16 import from_dlpack_array
from numtile.tiletensor.dtypes import as_dtype, check_dtype, float64, int64
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor


def check_device(device) -> None:
    """Refuse a device other than numtile's one (``"cpu"``: the runtime places the tiles)."""
    if device is not None and str(device) != "cpu":
        raise ValueError(f"unknown device {device!r}; numtile has one device, 'cpu'")


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
    array = np.asarray(x) if dtype is None else np.asarray(x, dtype=as_dtype(dtype))
    return _from_array(_native(array), tile_shape, distribution)


def _native(array: np.ndarray) -> np.ndarray:
    """``array`` in native byte order, of a dtype numtile has (no silent widening)."""
    if not array.dtype.isnative:  # big-endian data (from a file, say): tiles are native
        array = array.astype(array.dtype.newbyteorder("="))
    check_dtype(array.dtype)  # raise TypeError: float16, strings, objects...
    return array


def _from_array(array: np.ndarray, tile_shape, distribution) -> TileTensor:
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


def _shared(array: np.ndarray, tile_shape) -> TileTensor:
    """A one-tile TileTensor on ``array``'s own memory (``copy=False``), or ValueError."""
    whole = tuple(max(1, s) for s in array.shape)
    if tile_shape is not None and Layout(array.shape, tile_shape).ntiles != 1:
        raise ValueError(
            f"copy=False needs one tile (the array's own buffer), got tile_shape {tile_shape} "
            f"for shape {array.shape}"
        )
    if not array.flags.c_contiguous or not array.dtype.isnative:
        raise ValueError(
            "copy=False: a tile is a C-contiguous native-order buffer; this array is not one, "
            "so it must be copied (use copy=None)"
        )
    check_dtype(array.dtype)
    layout = Layout(array.shape, whole)
    return TileTensor(layout, array.dtype, [DataHandle(array.shape, array.dtype, array)])


def asarray(
    obj,
    /,
    *,
    dtype=None,
    device=None,
    copy: bool | None = None,
    tile_shape=None,
    distribution=None,
) -> TileTensor:
    """A TileTensor from ``obj`` (array API ``asarray``): a TileTensor, a NumPy array, a
    nested sequence or a Python scalar, a buffer (``memoryview``, ``bytearray``), or any
    array of another library that exports DLPack (PyTorch, CuPy on the host, JAX...).

    ``copy=None`` copies only where needed; ``copy=True`` always copies; ``copy=False``
    never does, so it raises ``ValueError`` unless the result can be ``obj`` itself (a
    TileTensor of that dtype and tiling) or one tile on ``obj``'s own C-contiguous memory
    (writes through either then show in both, until the runtime moves the tile). Python
    scalars and sequences take the default dtypes: bool, int64, float64, complex128.

    >>> import numtile as nt, numpy as np
    >>> nt.asarray([[1, 2], [3, 4]], tile_shape=(1, 2)).dtype
    dtype('int64')
    >>> a = np.zeros(3); t = nt.asarray(a, copy=False); a[0] = 5; float(t[0])
    5.0
    """
    check_device(device)
    check_copy(copy)
    dtype = None if dtype is None else as_dtype(dtype)  # "bfloat16" names ml_dtypes' type
    if isinstance(obj, TileTensor):
        return _from_tensor(obj, dtype, copy, tile_shape)
    if copy is False and distribution is not None:
        raise ValueError("copy=False with a distribution: each rank's tiles are copies")
    if not isinstance(obj, np.ndarray) and hasattr(obj, "__dlpack__"):
        # torch, JAX, array_api_strict...: a view of the producer's memory (tiles copy it)
        obj = from_dlpack_array(obj, copy=False if copy is False else None)
    if copy is False:
        try:
            array = np.asarray(obj, dtype=dtype, copy=False)
        except ValueError:
            raise ValueError(
                f"copy=False: a {type(obj).__name__} cannot become a TileTensor without a copy"
                + (f" to {np.dtype(dtype).name}" if dtype is not None else "")
            ) from None
        return _shared(array, tile_shape)
    array = np.asarray(obj, dtype=dtype)
    if array.dtype == object:
        raise TypeError(f"cannot make a tensor of {type(obj).__name__} {obj!r:.60}")
    return _from_array(_native(array), tile_shape, distribution)


def _from_tensor(x: TileTensor, dtype, copy, tile_shape) -> TileTensor:
    """``asarray`` of a TileTensor: ``x`` itself, cast, retiled or copied as asked."""
    same_dtype = dtype is None or check_dtype(dtype) == x.dtype
    same_tiles = tile_shape is None or Layout(x.shape, tile_shape) == x.layout
    if copy is False and not (same_dtype and same_tiles):
        change = "a cast" if not same_dtype else "a retile"
        raise ValueError(f"copy=False, but {change} of the TileTensor needs a copy")
    out = x if same_dtype else x.astype(dtype)
    if not same_tiles:
        out = out.retile(tile_shape)
    if copy and out is x:
        out = x.astype(x.dtype, copy=True)
    return out


def tile_owners(layout: Layout, distribution) -> tuple[list[int], int]:
    """The owner rank of each tile of ``layout`` under ``distribution``, and this rank."""
    front = get_runtime().distributed
    nranks, here = (1, 0) if front is None else (front.nranks, front.rank)
    owners = as_distribution(distribution).owners(list(layout.indices()), nranks)
    if front is not None:
        placement.activate()  # from now on, ops give their results their inputs' distribution
    return owners, here


def empty(shape, dtype=None, tile_shape=None, *, device=None, distribution=None) -> TileTensor:
    """A tensor whose tiles are allocated on first write (contents undefined; float64 by
    default).

    >>> import numtile as nt
    >>> nt.empty((4, 4), tile_shape=(2, 2)).grid
    (2, 2)
    """
    check_device(device)
    out = TileTensor(Layout(shape, tile_shape), float64 if dtype is None else dtype)
    if distribution is not None:  # under MPI: the owners write the tiles (from_numpy's)
        owners, _ = tile_owners(out.layout, distribution)
        for handle, owner in zip(out.handles, owners):
            place(handle, owner)
        out.distribution = as_distribution(distribution)
    return out


def _default_dtype(value) -> np.dtype:
    """The array API's default dtype of a Python scalar: bool, int64, float64, complex128."""
    if isinstance(value, (bool, np.bool_)):
        return np.dtype(np.bool_)
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise OverflowError(f"Python integer {value} out of bounds for int64")
    dtype = np.result_type(value)
    return int64 if dtype.kind in "iu" else dtype


def full(
    shape, fill_value, dtype=None, tile_shape=None, *, device=None, distribution=None
) -> TileTensor:
    """A tensor of ``fill_value`` everywhere (dtype inferred from the value if not given).

    >>> import numtile as nt
    >>> nt.full((2, 3), 7, tile_shape=(1, 2)).to_numpy().tolist()
    [[7, 7, 7], [7, 7, 7]]
    """
    if isinstance(fill_value, TileTensor):
        fill_value = fill_value.item()
    if not isinstance(fill_value, (bool, int, float, complex, np.generic)):
        raise TypeError(
            f"full: fill_value must be a bool, int, float or complex scalar, got "
            f"{type(fill_value).__name__} {fill_value!r}"
        )
    dtype = _default_dtype(fill_value) if dtype is None else dtype
    out = empty(shape, dtype, tile_shape, device=device, distribution=distribution)
    fill_tiles(out, fill_value)
    return out


def fill_tiles(out: TileTensor, value) -> TileTensor:
    """Submit a fill task on every tile of ``out``."""
    runtime = get_runtime()
    value = out.dtype.type(value)
    for handle in out.handles:
        runtime.submit(codelets.copy.fill, [(handle, Access.W)], (value,))
    return out


def zeros(shape, dtype=None, tile_shape=None, *, device=None, distribution=None) -> TileTensor:
    """A tensor of zeros (float64 by default).

    >>> import numtile as nt
    >>> float(nt.zeros((3,)).to_numpy().sum())
    0.0
    """
    dtype = float64 if dtype is None else dtype
    return full(shape, 0, dtype, tile_shape, device=device, distribution=distribution)


def ones(shape, dtype=None, tile_shape=None, *, device=None, distribution=None) -> TileTensor:
    """A tensor of ones (float64 by default).

    >>> import numtile as nt
    >>> nt.ones((2,), dtype="int64").to_numpy().tolist()
    [1, 1]
    """
    dtype = float64 if dtype is None else dtype
    return full(shape, 1, dtype, tile_shape, device=device, distribution=distribution)


def _like(x: TileTensor, name: str):
    if not isinstance(x, TileTensor):
        raise TypeError(f"{name} needs a TileTensor, got {type(x).__name__}")
    return x.shape, x.tile_shape


def _or(tile_shape, like_tiles):
    """The tile shape asked for, or the model tensor's (a tile shape of 0 is asked for)."""
    return like_tiles if tile_shape is None else tile_shape


@dispatched
def empty_like(x: TileTensor, /, dtype=None, tile_shape=None, *, device=None) -> TileTensor:
    shape, tiles = _like(x, "empty_like")
    return empty(shape, dtype or x.dtype, _or(tile_shape, tiles), device=device)


@dispatched
def zeros_like(x: TileTensor, /, dtype=None, tile_shape=None, *, device=None) -> TileTensor:
    shape, tiles = _like(x, "zeros_like")
    return zeros(shape, dtype or x.dtype, _or(tile_shape, tiles), device=device)


@dispatched
def ones_like(x: TileTensor, /, dtype=None, tile_shape=None, *, device=None) -> TileTensor:
    shape, tiles = _like(x, "ones_like")
    return ones(shape, dtype or x.dtype, _or(tile_shape, tiles), device=device)


@dispatched
def full_like(
    x: TileTensor, /, fill_value, dtype=None, tile_shape=None, *, device=None
) -> TileTensor:
    shape, tiles = _like(x, "full_like")
    return full(shape, fill_value, dtype or x.dtype, _or(tile_shape, tiles), device=device)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None, tile_shape=None) -> TileTensor:
    """Evenly spaced values in [start, stop), like ``numpy.arange`` (int64 when every
    bound is an integer, float64 otherwise, unless ``dtype`` says).

    >>> import numtile as nt
    >>> nt.arange(1, 8, 2, tile_shape=2).to_numpy().tolist()
    [1, 3, 5, 7]
    """
    check_device(device)
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange step must not be zero")
    bounds = f"start={start!r}, stop={stop!r}, step={step!r}"
    try:
        finite = all(math.isfinite(v) for v in (start, stop, step) if not isinstance(v, int))
    except TypeError:
        raise TypeError(f"arange needs real numbers, got {bounds}") from None
    if not finite:
        raise ValueError(f"arange needs finite bounds, got {bounds}")
    if dtype is not None and check_dtype(dtype) == np.bool_:
        raise TypeError("arange needs a numeric dtype, got bool (NumPy refuses it too)")
    length = max(0, math.ceil((stop - start) / step))
    if dtype is None:
        dtype = np.result_type(start, stop, step)
        dtype = int64 if np.dtype(dtype).kind in "iu" else float64
    out = empty((length,), dtype, tile_shape)
    runtime = get_runtime()
    typed = out.dtype.type
    for (i,), handle in zip(out.layout.indices(), out.handles):
        offset = out.layout.starts[0][i]
        first = start + offset * step if offset else start  # -0.0 + 0 * step is +0.0
        runtime.submit(
            codelets.elementwise.arange, [(handle, Access.W)], (typed(first), typed(step))
        )
    return out


def from_dlpack(x, /, *, device=None, copy: bool | None = None) -> TileTensor:
    """A TileTensor of the data of ``x``, an array of any library that exports DLPack
    (NumPy, PyTorch CPU tensors, ...; a TileTensor is returned as it is, or copied with
    ``copy=True``). The data is copied into tiles (the default tiling) unless
    ``copy=False``, which keeps ``x``'s memory as the one tile (see ``asarray``).

    >>> import numtile as nt, numpy as np
    >>> nt.from_dlpack(np.arange(3.0)).to_numpy().tolist()
    [0.0, 1.0, 2.0]
    """
    check_device(device)
    if isinstance(x, TileTensor):
        return _from_tensor(x, None, copy, None)
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack needs an object with __dlpack__, got {type(x).__name__}")
    array = from_dlpack_array(x, copy=copy)  # bfloat16 (kDLBfloat) producers too
    return _shared(array, None) if copy is False else _from_array(_native(array), None, None)
