"""The array API's products and diagonals: ``cross``, ``diagonal``, ``trace``, ``outer``,
``vecdot``, ``tensordot`` and ``matrix_power``, on stacks of matrices and vectors.

Each is built from tiled ops where one fits: ``tensordot`` is one tiled matrix product after
permuting and merging axes, ``matrix_power`` repeated squaring with tiled products (through
``inv`` for negative powers), ``vecdot`` and ``outer`` broadcasting multiplications and sums,
``trace`` the sum of ``diagonal``. ``diagonal`` copies each tile's piece of the diagonal with
one strided copy task, and ``cross`` runs one kernel task per tile.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from numtile.runtime import get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.codelets.linalg import cross as cross_task
from numtile.tiletensor.creation import zeros
from numtile.tiletensor.dispatch import dispatched, require_tensor
from numtile.tiletensor.dtypes import bool_, result_type
from numtile.tiletensor.elementwise import astype, conj, multiply
from numtile.tiletensor.layout import Layout, c_strides
from numtile.tiletensor.linalg.common import (
    ACC,
    RW,
    R,
    W,
    broadcast_tiles,
    no_float16,
)
from numtile.tiletensor.linalg.lu import identity_matrix, inv
from numtile.tiletensor.linalg.matmul import matmul
from numtile.tiletensor.manipulation import broadcast_to, permute_dims, reshape, retile
from numtile.tiletensor.reduction import sum as tensor_sum
from numtile.tiletensor.tensor import TileTensor


def _numeric(name: str, *tensors: TileTensor) -> np.dtype:
    for t in tensors:
        require_tensor(t, name)
    dtype = result_type(*(t.dtype for t in tensors))
    if dtype == bool_:
        raise TypeError(f"{name} needs numeric tensors, got bool")
    return dtype


def _vector_axis(name: str, axis, *tensors: TileTensor) -> int:
    """``axis`` as the standard gives it for vector axes: negative, counted from the end."""
    axis = operator.index(axis)
    lowest = min(t.ndim for t in tensors)
    if not -lowest <= axis <= -1:
        shapes = " and ".join(str(t.shape) for t in tensors)
        raise np.exceptions.AxisError(
            f"{name}: axis {axis} must be in [-{lowest}, -1] for shapes {shapes} "
            f"(the standard counts vector axes from the end)"
        )
    return axis


def _broadcast_batch(name: str, *shapes) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        listed = " and ".join(str(s) for s in shapes)
        raise ValueError(f"{name}: shapes {listed} cannot be broadcast") from None


@dispatched(public="numtile.linalg.cross")
def cross(x1: TileTensor, x2: TileTensor, /, *, axis: int = -1) -> TileTensor:
    """The cross product of 3-element vectors along ``axis``, broadcasting the other axes.

    >>> import numtile as nt, numpy as np
    >>> x = nt.from_numpy(np.array([1.0, 0.0, 0.0]))
    >>> y = nt.from_numpy(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    >>> nt.linalg.cross(x, y).to_numpy().tolist()
    [[0.0, 0.0, 1.0], [0.0, -1.0, 0.0]]
    """
    dtype = _numeric("cross", x1, x2)
    axis = _vector_axis("cross", axis, x1, x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(
            f"cross: shapes {x1.shape} and {x2.shape} must both have 3 elements along axis {axis}"
        )
    shape = _broadcast_batch("cross", x1.shape, x2.shape)
    at = len(shape) + axis
    tiles = list(broadcast_tiles(shape, (x1, x2)))
    tiles[at] = 3  # a tile holds whole vectors
    operands = [broadcast_to(astype(t, dtype, copy=False), shape, tuple(tiles)) for t in (x1, x2)]
    out = TileTensor(Layout(shape, tuple(tiles)), dtype)
    runtime = get_runtime()
    for index, handle in zip(out.layout.indices(), out.handles):
        post = math.prod(out.layout.tile_shape_at(index)[at + 1 :])
        a, b = (t.tile(index) for t in operands)
        runtime.submit(cross_task, [(a, R), (b, R), (handle, W)], (post,))
    return out


def _diagonal_length(rows: int, columns: int, offset: int) -> int:
    return max(0, min(rows, columns - offset) if offset >= 0 else min(rows + offset, columns))


def _diagonal_layout(x: TileTensor, offset: int) -> Layout:
    rows, columns = x.shape[-2:]
    length = _diagonal_length(rows, columns, offset)
    return Layout(x.shape[:-2] + (length,), x.tile_shape[:-2] + (min(x.tile_shape[-2:]),))


def _diagonal_pieces(matrix: Layout, diagonal: Layout, offset: int):
    """Per tile of the diagonal: its index and its pieces, each one strided copy from one
    tile of the matrix, as (matrix tile index, matrix-tile offset, matrix-tile strides,
    diagonal-tile offset, diagonal-tile strides, shape)."""
    row0, column0 = max(0, -offset), max(0, offset)
    for index in diagonal.indices():
        (first, last), extents = diagonal.tile_bounds(index)[-1], diagonal.tile_shape_at(index)
        strides = c_strides(extents)
        pieces, p = [], first
        while p < last:  # runs of the diagonal inside one tile of the matrix
            r, c = row0 + p, column0 + p
            i, j = matrix.tile_of(matrix.ndim - 2, r), matrix.tile_of(matrix.ndim - 1, c)
            local_r, local_c = r - matrix.starts[-2][i], c - matrix.starts[-1][j]
            run = min(last - p, matrix.starts[-2][i + 1] - r, matrix.starts[-1][j + 1] - c)
            tile = index[:-1] + (i, j)
            source = c_strides(matrix.tile_shape_at(tile))
            pieces.append(
                (
                    tile,
                    local_r * source[-2] + local_c * source[-1],
                    np.array(source[:-2] + [source[-2] + source[-1]], np.int64),
                    (p - first) * strides[-1],
                    np.array(strides, np.int64),
                    np.array(list(extents[:-1]) + [run], np.int64),
                )
            )
            p += run
        yield index, pieces


@dispatched(public="numtile.linalg.diagonal")
def diagonal(x: TileTensor, /, *, offset: int = 0) -> TileTensor:
    """The diagonals of a stack of matrices (the last two axes); ``offset`` > 0 above the main
    diagonal, < 0 below it. Each tile's piece is one strided copy task.

    >>> import numtile as nt, numpy as np
    >>> x = nt.from_numpy(np.arange(12.0).reshape(3, 4), tile_shape=(2, 3))
    >>> nt.linalg.diagonal(x).to_numpy().tolist()
    [0.0, 5.0, 10.0]
    >>> nt.linalg.diagonal(x, offset=1).to_numpy().tolist()
    [1.0, 6.0, 11.0]
    """
    if x.ndim < 2:
        raise ValueError(f"diagonal needs at least 2 axes, got shape {x.shape}")
    offset = operator.index(offset)
    out = TileTensor(_diagonal_layout(x, offset), x.dtype)
    runtime = get_runtime()
    for index, pieces in _diagonal_pieces(x.layout, out.layout, offset):
        mode = W if len(pieces) == 1 else ACC
        for tile, *args in pieces:
            runtime.submit(
                codelets.copy.copy_strided, [(x.tile(tile), R), (out.tile(index), mode)], args
            )
    return out


def diagonal_scatter(d: TileTensor, layout: Layout, offset: int) -> TileTensor:
    """The tensor of ``layout`` that is zero but for its diagonal ``offset``, which is ``d``
    (the gradient of ``diagonal``)."""
    out = zeros(layout.shape, d.dtype, tile_shape=layout.tile_shape)
    if tuple(d.tile_shape) != _diagonal_layout(out, offset).tile_shape:
        d = retile(d, _diagonal_layout(out, offset).tile_shape)
    runtime = get_runtime()
    for index, pieces in _diagonal_pieces(layout, d.layout, offset):
        for tile, matrix_offset, matrix_strides, offset_in_d, d_strides, shape in pieces:
            args = (offset_in_d, d_strides, matrix_offset, matrix_strides, shape)
            runtime.submit(
                codelets.copy.copy_strided, [(d.tile(index), R), (out.tile(tile), RW)], args
            )
    return out


@dispatched(public="numtile.linalg.trace")
def trace(x: TileTensor, /, *, offset: int = 0, dtype=None) -> TileTensor:
    """The sum of the diagonal of each matrix of a stack (``dtype`` as ``sum``'s).

    >>> import numtile as nt, numpy as np
    >>> nt.linalg.trace(nt.from_numpy(np.arange(9.0).reshape(3, 3), tile_shape=(2, 2))).item()
    12.0
    """
    return tensor_sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


@dispatched(public="numtile.linalg.outer")
def outer(x1: TileTensor, x2: TileTensor, /) -> TileTensor:
    """The outer product of two vectors: ``out[i, j] = x1[i] * x2[j]``.

    >>> import numtile as nt
    >>> nt.linalg.outer(nt.arange(2.0), nt.arange(3.0)).to_numpy().tolist()
    [[0.0, 0.0, 0.0], [0.0, 1.0, 2.0]]
    """
    _numeric("outer", x1, x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"outer needs two 1-d vectors, got shapes {x1.shape} and {x2.shape}")
    # (n, 1) * (1, m) -> (n, m)
    return multiply(reshape(x1, (x1.shape[0], 1)), reshape(x2, (1, x2.shape[0])))


@dispatched(public="numtile.linalg.vecdot")
def vecdot(x1: TileTensor, x2: TileTensor, /, *, axis: int = -1) -> TileTensor:
    """The dot product of vectors along ``axis`` (``sum(conj(x1) * x2, axis)``), broadcasting
    the other axes.

    >>> import numtile as nt, numpy as np
    >>> x = nt.from_numpy(np.arange(6.0).reshape(2, 3), tile_shape=(1, 2))
    >>> nt.linalg.vecdot(x, nt.ones((3,))).to_numpy().tolist()
    [3.0, 12.0]
    """
    dtype = _numeric("vecdot", x1, x2)
    axis = _vector_axis("vecdot", axis, x1, x2)
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(
            f"vecdot: shapes {x1.shape} and {x2.shape} differ along axis {axis} "
            f"({x1.shape[axis]} != {x2.shape[axis]})"
        )
    _broadcast_batch("vecdot", x1.shape, x2.shape)
    left = conj(x1) if dtype.kind == "c" else x1
    return tensor_sum(multiply(left, x2), axis=axis, dtype=dtype)


def _tensordot_axes(x1: TileTensor, x2: TileTensor, axes) -> tuple[list[int], list[int]]:
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        count = int(axes)
        if not 0 <= count <= min(x1.ndim, x2.ndim):
            raise np.exceptions.AxisError(
                f"tensordot: axes={count} needs 0 <= axes <= min(ndim) for shapes {x1.shape} "
                f"and {x2.shape}"
            )
        return list(range(x1.ndim - count, x1.ndim)), list(range(count))
    try:
        first, second = (list(map(operator.index, a)) for a in axes)
    except (TypeError, ValueError):
        raise TypeError(
            f"tensordot: axes must be an int or a pair of sequences of ints, got {axes!r}"
        ) from None
    if len(first) != len(second):
        raise ValueError(f"tensordot: axes {axes!r} name different numbers of axes")
    pairs = []
    for a, b in zip(first, second):
        if not (-x1.ndim <= a < x1.ndim and -x2.ndim <= b < x2.ndim):
            raise np.exceptions.AxisError(
                f"tensordot: axes {axes!r} are out of range for shapes {x1.shape} and {x2.shape}"
            )
        pairs.append((a % x1.ndim, b % x2.ndim))
    first, second = [a for a, _ in pairs], [b for _, b in pairs]
    if len(set(first)) != len(first) or len(set(second)) != len(second):
        raise ValueError(f"tensordot: axes {axes!r} repeat an axis")
    return first, second


def _as_matrix(x: TileTensor, rows: list[int], columns: list[int]) -> TileTensor:
    """``x`` with axes ``rows`` merged into one axis and ``columns`` into another: permuted,
    retiled so that every merged axis but the first is whole, then reshaped."""
    x = permute_dims(x, rows + columns)  # (rows..., columns...)
    tiles = list(x.tile_shape)
    for group in (range(len(rows)), range(len(rows), x.ndim)):
        for position, axis in enumerate(group):
            if position:
                tiles[axis] = max(1, x.shape[axis])
    if tuple(tiles) != x.tile_shape:
        x = retile(x, tuple(tiles))
    merged = (math.prod(x.shape[: len(rows)]), math.prod(x.shape[len(rows) :]))
    return reshape(x, merged)  # (prod(rows), prod(columns))


@dispatched(public="numtile.linalg.tensordot")
def tensordot(x1: TileTensor, x2: TileTensor, /, *, axes=2) -> TileTensor:
    """Sum products over ``axes`` (an int: the last ``axes`` axes of ``x1`` with the first of
    ``x2``; or two sequences of axes), as one tiled matrix product.

    >>> import numtile as nt, numpy as np
    >>> a = nt.from_numpy(np.arange(24.0).reshape(2, 3, 4), tile_shape=(1, 2, 3))
    >>> b = nt.from_numpy(np.ones((4, 3)), tile_shape=(3, 2))
    >>> nt.linalg.tensordot(a, b, axes=([1, 2], [1, 0])).to_numpy().tolist()
    [66.0, 210.0]
    """
    dtype = _numeric("tensordot", x1, x2)
    no_float16("tensordot", dtype)
    first, second = _tensordot_axes(x1, x2, axes)
    for a, b in zip(first, second):
        if x1.shape[a] != x2.shape[b]:
            raise ValueError(
                f"tensordot: shapes {x1.shape} and {x2.shape} differ on the contracted axes "
                f"{a} and {b} ({x1.shape[a]} != {x2.shape[b]})"
            )
    free1 = [a for a in range(x1.ndim) if a not in first]
    free2 = [b for b in range(x2.ndim) if b not in second]
    shape = tuple(x1.shape[a] for a in free1) + tuple(x2.shape[b] for b in free2)
    if x1.ndim == 0 or x2.ndim == 0:
        return multiply(x1, x2)
    left = _as_matrix(astype(x1, dtype, copy=False), free1, first)  # (M, K)
    right = _as_matrix(astype(x2, dtype, copy=False), second, free2)  # (K, N)
    return reshape(matmul(left, right), shape)


@dispatched(public="numtile.linalg.matrix_power")
def matrix_power(x: TileTensor, n: int, /) -> TileTensor:
    """The ``n``-th power of each square matrix of a stack, by repeated squaring (tiled
    products); a negative ``n`` powers the inverse, 0 gives identities.

    >>> import numtile as nt, numpy as np
    >>> x = nt.from_numpy(np.array([[1.0, 1.0], [0.0, 1.0]]), tile_shape=(1, 1))
    >>> nt.linalg.matrix_power(x, 5).to_numpy().tolist()
    [[1.0, 5.0], [0.0, 1.0]]
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power: n must be an integer, got {n!r}")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise np.linalg.LinAlgError(
            f"matrix_power needs a stack of square matrices, got shape {x.shape}"
        )
    _numeric("matrix_power", x)
    no_float16("matrix_power", x.dtype)
    n = int(n)
    if n == 0:
        identity = identity_matrix(x.shape[-1], min(x.tile_shape[-2:]), x.dtype)
        return broadcast_to(identity, x.shape, x.tile_shape[:-2] + identity.tile_shape)
    base = inv(x) if n < 0 else x
    n = abs(n)
    result = None
    while True:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if not n:
            return result
        base = matmul(base, base)
