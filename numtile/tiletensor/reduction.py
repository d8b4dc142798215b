"""Reductions over any axes: sum, mean, max, min, prod and vector norms."""

from __future__ import annotations

import math
import operator

import numpy as np

from numtile import opcodes
from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import fill_tiles
from numtile.tiletensor.dtypes import bool_, float64, int64
from numtile.tiletensor.elementwise import astype, sqrt
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

R, W, ACC = Access.R, Access.W, Access.ACCUMULATE


def _normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    out = []
    for a in axes:
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of bounds for a tensor with {ndim} axes")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis}")
    return tuple(sorted(out))


def _identity(op: str, dtype: np.dtype):
    if op in ("sum", "sumsq", "sumabs"):
        return 0
    if op == "prod":
        return 1
    if op == "maxabs":
        return 0
    if dtype.kind == "f":
        return -np.inf if op == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if op == "max" else info.max


def _tile_plan(tile_shape, axes):
    """Kernel arguments (move_axes, pre, n, post) reducing ``axes`` of a tile."""
    contiguous = all(b == a + 1 for a, b in zip(axes, axes[1:]))
    if contiguous and axes:
        first, last = axes[0], axes[-1]
        return (
            None,
            math.prod(tile_shape[:first]),
            math.prod(tile_shape[first : last + 1]),
            math.prod(tile_shape[last + 1 :]),
        )
    kept = [s for a, s in enumerate(tile_shape) if a not in axes]
    reduced = math.prod(tile_shape[a] for a in axes)
    return (tuple(axes) if axes else None), math.prod(kept), reduced, 1


def _reduce(x: TileTensor, op: str, axis, keepdims: bool, dtype) -> TileTensor:
    axes = _normalize_axes(axis, x.ndim)
    if x.dtype != dtype:
        x = astype(x, dtype)
    if any(x.shape[a] == 0 for a in axes) and op in ("max", "min", "maxabs"):
        raise ValueError(f"{op} of an empty axis has no identity (shape {x.shape}, axis {axis})")
    kept = [a for a in range(x.ndim) if a not in axes]
    out_shape = tuple(x.shape[a] for a in kept)
    out_tiles = tuple(x.tile_shape[a] for a in kept)
    out = TileTensor(Layout(out_shape, out_tiles), dtype)
    fill_tiles(out, _identity(op, dtype))
    code = opcodes.REDUCE_OPS[op]
    runtime = get_runtime()
    for index, handle in zip(x.layout.indices(), x.handles):
        dst = out.tile(tuple(index[a] for a in kept))
        move, pre, n, post = _tile_plan(handle.shape, axes)
        runtime.submit(codelets.reduce, [(handle, R), (dst, ACC)], (code, move, pre, n, post))
    if keepdims:
        from numtile.tiletensor.manipulation import reshape

        out = reshape(out, tuple(1 if a in axes else s for a, s in enumerate(x.shape)))
    return out


def _sum_dtype(x: TileTensor, dtype):
    if dtype is not None:
        return np.dtype(dtype)
    return int64 if x.dtype in (bool_, int64) else x.dtype


def sum(x: TileTensor, /, *, axis=None, dtype=None, keepdims: bool = False) -> TileTensor:  # noqa: A001
    """Sum over ``axis`` (an int, a tuple, or None for all axes).

    >>> import numtile as nt
    >>> nt.sum(nt.ones((4, 6), tile_shape=(3, 4)), axis=0).to_numpy().tolist()
    [4.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    """
    return _reduce(x, "sum", axis, keepdims, _sum_dtype(x, dtype))


def prod(x: TileTensor, /, *, axis=None, dtype=None, keepdims: bool = False) -> TileTensor:
    """Product over ``axis``."""
    return _reduce(x, "prod", axis, keepdims, _sum_dtype(x, dtype))


def max(x: TileTensor, /, *, axis=None, keepdims: bool = False) -> TileTensor:  # noqa: A001
    """Maximum over ``axis``."""
    return _reduce(x, "max", axis, keepdims, int64 if x.dtype == bool_ else x.dtype)


def min(x: TileTensor, /, *, axis=None, keepdims: bool = False) -> TileTensor:  # noqa: A001
    """Minimum over ``axis``."""
    return _reduce(x, "min", axis, keepdims, int64 if x.dtype == bool_ else x.dtype)


def mean(x: TileTensor, /, *, axis=None, keepdims: bool = False) -> TileTensor:
    """Arithmetic mean over ``axis`` (integers average in float64).

    >>> import numtile as nt
    >>> nt.mean(nt.arange(5)).item()
    2.0
    """
    dtype = x.dtype if x.dtype.kind == "f" else float64
    total = _reduce(x, "sum", axis, keepdims, dtype)
    count = math.prod(x.shape[a] for a in _normalize_axes(axis, x.ndim))
    return total * (1.0 / count if count else np.nan)


def vector_norm(x: TileTensor, /, *, axis=None, keepdims: bool = False, ord=2) -> TileTensor:
    """Vector p-norm over ``axis`` (array API ``linalg.vector_norm``): 2, 1, inf, -inf, p.

    >>> import numtile as nt
    >>> nt.linalg.vector_norm(nt.full((4,), 3.0)).item()
    6.0
    """
    dtype = x.dtype if x.dtype.kind == "f" else float64
    if ord == 2:
        return sqrt(_reduce(x, "sumsq", axis, keepdims, dtype))
    if ord == 1:
        return _reduce(x, "sumabs", axis, keepdims, dtype)
    if ord == np.inf:
        return _reduce(x, "maxabs", axis, keepdims, dtype)
    from numtile.tiletensor.elementwise import abs as absolute

    if ord == -np.inf:
        return _reduce(absolute(astype(x, dtype)), "min", axis, keepdims, dtype)
    if ord == 0:
        return _reduce(astype(x != 0, dtype), "sum", axis, keepdims, dtype)
    powered = _reduce(absolute(astype(x, dtype)) ** ord, "sum", axis, keepdims, dtype)
    return powered ** (1.0 / ord)
