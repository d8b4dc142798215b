"""The array API's logic on TileTensors: isnan/isinf/isfinite/signbit, ``where``, and the
``all``/``any`` reductions."""

from __future__ import annotations

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import fill_tiles
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import bool_, result_type
from numtile.tiletensor.elementwise import not_equal
from numtile.tiletensor.elementwise_core import (
    astype,
    check_operands,
    element_strides,
    is_scalar,
    shape_array,
    source_tile,
)
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.manipulation import reshape, retile
from numtile.tiletensor.reduction import reduce_bools
from numtile.tiletensor.tensor import TileTensor

R, W, RW = Access.R, Access.W, Access.RW


def _predicate(x: TileTensor, name: str, integer_value: bool) -> TileTensor:
    out = TileTensor(x.layout, bool_)
    if x.dtype.kind in "biu":  # integers are never NaN nor infinite, always finite
        return fill_tiles(out, integer_value)
    codelet = codelets.elementwise.predicate[name]
    runtime = get_runtime()
    for src, dst in zip(x.handles, out.handles):
        runtime.submit(codelet, [(src, R), (dst, W)])
    return out


@dispatched
def isnan(x: TileTensor, /) -> TileTensor:
    """True where ``x`` is NaN (a complex number with a NaN part).

    >>> import numtile as nt
    >>> nt.isnan(nt.asarray([1.0, float("nan")])).to_numpy().tolist()
    [False, True]
    """
    return _predicate(x, "isnan", False)


@dispatched
def isinf(x: TileTensor, /) -> TileTensor:
    """True where ``x`` is +-infinity (a complex number with an infinite part).

    >>> import numtile as nt
    >>> nt.isinf(nt.asarray([1.0, -float("inf")])).to_numpy().tolist()
    [False, True]
    """
    return _predicate(x, "isinf", False)


@dispatched
def isfinite(x: TileTensor, /) -> TileTensor:
    """True where ``x`` is neither NaN nor infinite (both parts, for complex).

    >>> import numtile as nt
    >>> nt.isfinite(nt.asarray([1.0, float("nan")])).to_numpy().tolist()
    [True, False]
    """
    return _predicate(x, "isfinite", True)


@dispatched
def signbit(x: TileTensor, /) -> TileTensor:
    """True where the sign bit of a real ``x`` is set (``-0.0`` included).

    >>> import numtile as nt
    >>> nt.signbit(nt.asarray([1.0, -0.0])).to_numpy().tolist()
    [False, True]
    """
    if getattr(x, "dtype", None) is not None and x.dtype.kind == "c":
        raise TypeError(f"signbit needs a real tensor, got {x.dtype.name}")
    if getattr(x, "dtype", None) is not None and x.dtype.kind in "iu":
        return x < 0
    return _predicate(x, "signbit", False)


def _as_tensor(value, like: TileTensor, dtype) -> TileTensor:
    """A scalar operand of ``where`` as a one-element tensor of ``dtype``."""
    if is_scalar(value):
        tensor = TileTensor(Layout((), ()), dtype)
        return fill_tiles(tensor, value)
    return value if value.dtype == dtype else astype(value, dtype)


def _align_all(*tensors: TileTensor) -> tuple[list[TileTensor], Layout]:
    """Broadcast ``tensors`` to one shape: each axis takes the tiling of the first tensor that
    spans it, and the others spanning it are retiled to match."""
    try:
        shape = np.broadcast_shapes(*(t.shape for t in tensors))
    except ValueError:
        shapes = " and ".join(str(t.shape) for t in tensors)
        raise ValueError(f"shapes {shapes} cannot be broadcast together") from None
    ndim = len(shape)
    tensors = [
        t if t.ndim == ndim else reshape(t, (1,) * (ndim - t.ndim) + t.shape) for t in tensors
    ]
    tile_shape = []
    for axis, extent in enumerate(shape):
        spanning = [t.tile_shape[axis] for t in tensors if t.shape[axis] == extent]
        tile_shape.append(spanning[0] if extent != 1 else 1)
    aligned = []
    for t in tensors:
        wanted = tuple(
            tile if t.shape[axis] == shape[axis] else t.tile_shape[axis]
            for axis, tile in enumerate(tile_shape)
        )
        aligned.append(t if wanted == t.tile_shape else retile(t, wanted))
    return aligned, Layout(shape, tuple(tile_shape))


@dispatched
def where(condition: TileTensor, x1, x2, /) -> TileTensor:
    """``x1`` where ``condition`` is true, else ``x2``, the three broadcast together
    (``x1``/``x2`` may be Python scalars; their dtypes promote as in arithmetic).

    >>> import numtile as nt
    >>> x = nt.asarray([1.0, -2.0, 3.0])
    >>> nt.where(x > 0, x, 0.0).to_numpy().tolist()
    [1.0, 0.0, 3.0]
    """
    check_operands(x1, x2, "where")
    if condition.dtype != bool_:
        condition = not_equal(condition, 0)
    dtype = result_type(x1, x2)
    x1 = _as_tensor(x1, condition, dtype)
    x2 = _as_tensor(x2, condition, dtype)
    (condition, x1, x2), layout = _align_all(condition, x1, x2)
    out = TileTensor(layout, dtype)
    runtime = get_runtime()
    for index, dst in zip(layout.indices(), out.handles):
        c, a, b = (source_tile(t, index) for t in (condition, x1, x2))
        shape = dst.shape
        args = tuple(element_strides(t.shape, shape) for t in (c, a, b)) + (shape_array(shape),)
        runtime.submit(codelets.elementwise.where, [(c, R), (a, R), (b, R), (dst, W)], args)
    return out


def assign_where(condition: TileTensor, value, target: TileTensor) -> None:
    """``target = where(condition, value, target)`` as tasks writing target's own tiles:
    ``target[condition] = value`` for a one-element ``value`` (no result tensor, no copy back).
    ``condition`` broadcasts to target's shape."""
    value = _as_tensor(value, condition, target.dtype)
    (target, condition, value), layout = _align_all(target, condition, value)
    assert layout.tile_shape == target.tile_shape  # target spans every axis and comes first
    runtime = get_runtime()
    for index, dst in zip(layout.indices(), target.handles):
        c, a = source_tile(condition, index), source_tile(value, index)
        shape = dst.shape
        args = (element_strides(c.shape, shape), element_strides(a.shape, shape))
        handles = [(c, R), (a, R), (dst, RW)]
        runtime.submit(codelets.indexing.assign_where, handles, (*args, shape_array(shape)))


@dispatched
def any(x: TileTensor, /, *, axis=None, keepdims: bool = False) -> TileTensor:  # noqa: A001
    """Whether any element along ``axis`` is true (nonzero); False over an empty axis.

    >>> import numtile as nt
    >>> nt.any(nt.asarray([[0, 1], [0, 0]]), axis=1).to_numpy().tolist()
    [True, False]
    """
    hits = not_equal(x, 0) if x.dtype != bool_ else x
    return reduce_bools(hits, "max", axis, keepdims)


@dispatched
def all(x: TileTensor, /, *, axis=None, keepdims: bool = False) -> TileTensor:  # noqa: A001
    """Whether every element along ``axis`` is true (nonzero); True over an empty axis.

    >>> import numtile as nt
    >>> nt.all(nt.asarray([[1, 1], [0, 1]]), axis=1).to_numpy().tolist()
    [True, False]
    """
    hits = not_equal(x, 0) if x.dtype != bool_ else x
    return reduce_bools(hits, "min", axis, keepdims)
