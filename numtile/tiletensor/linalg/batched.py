"""Stacks of matrices (``(..., M, M)``) for the factorisation-based functions: Cholesky, the
general solve, the inverse and the determinants, and the spectral ones (eigh, svd and their
values).

Matrices that fit one tile (the tile spans the last two axes) run one task per tile: a
batched LAPACK call on a CPU (``numpy.linalg`` on the tile's stack), a loop over the stack's
matrices with the tile kernels on a GPU. Larger matrices run the tiled 2-d algorithm once
per matrix of the stack, all of them submitted at once so they overlap. A failing member
(singular, not positive definite, non-finite) fails the result; where the matrices fit one
tile the error names the member's index, otherwise the 2-d algorithm's error names the
matrix's shape only.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from numtile.runtime import get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.codelets.linalg import (
    cholesky_stack,
    slogdet_stack,
    solve_stack,
    spectral_stack,
)
from numtile.tiletensor.creation import full
from numtile.tiletensor.elementwise import astype
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.linalg.common import RW, R, W, broadcast_tiles
from numtile.tiletensor.manipulation import basic_getitem, broadcast_to, retile
from numtile.tiletensor.tensor import TileTensor


def fits_one_tile(x: TileTensor) -> bool:
    """Whether each tile of ``x`` holds whole matrices (its last two axes); an empty stack
    (nothing to run) takes that path too."""
    whole = x.tile_shape[-2] >= x.shape[-2] and x.tile_shape[-1] >= x.shape[-1]
    return whole or 0 in x.shape[:-2]


def _first(layout: Layout, index) -> tuple[int, ...]:
    """The batch index of the first matrix in tile ``index``."""
    return tuple(layout.starts[axis][i] for axis, i in enumerate(index[:-2]))


def _whole_matrices(x: TileTensor) -> TileTensor:
    """A copy of ``x`` whose tiles hold whole matrices (the tasks overwrite it)."""
    tiles = x.tile_shape[:-2] + tuple(max(1, s) for s in x.shape[-2:])
    if x.tile_shape != tiles:
        return retile(x, tiles)
    return astype(x, x.dtype, copy=True)


def matrices(x: TileTensor) -> list[TileTensor]:
    """The 2-d matrices of a stack, in C order of the batch axes."""
    return [basic_getitem(x, index) for index in np.ndindex(*x.shape[:-2])]


def stack(parts: list[TileTensor], batch: tuple[int, ...]) -> TileTensor:
    """The stack of shape ``batch + parts[0].shape`` of equally tiled 2-d tensors (one copy
    task per tile; batch tiles of 1)."""
    first = parts[0]
    out = TileTensor(Layout(batch + first.shape, (1,) * len(batch) + first.tile_shape), first.dtype)
    runtime = get_runtime()
    one = np.ones(1, np.int64)
    for position, part in zip(np.ndindex(*batch), parts):
        for index, handle in zip(part.layout.indices(), part.handles):
            size = np.array([math.prod(handle.shape)], np.int64)
            target = out.tile(position + index)
            runtime.submit(
                codelets.copy.copy_strided, [(handle, R), (target, W)], (0, one, 0, one, size)
            )
    return out


def per_matrix(function: Callable, *stacks: TileTensor) -> TileTensor:
    """``function`` (of 2-d tensors, returning one) over the matrices of equally shaped
    stacks, stacked again."""
    batch = stacks[0].shape[:-2]
    results = [function(*parts) for parts in zip(*(matrices(s) for s in stacks))]
    return stack(results, batch)


def cholesky(x: TileTensor, factor_2d: Callable) -> TileTensor:
    """Lower Cholesky factors of a stack of square matrices."""
    if not fits_one_tile(x):
        return per_matrix(factor_2d, x)
    out = _whole_matrices(x)
    runtime = get_runtime()
    for index, handle in zip(out.layout.indices(), out.handles):
        runtime.submit(cholesky_stack, [(handle, RW)], (_first(out.layout, index), x.shape))
    return out


def broadcast_pair(a: TileTensor, b: TileTensor, name: str):
    """``a`` (..., M, M) and ``b`` (..., M, K) with their batch axes broadcast together."""
    try:
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        raise ValueError(
            f"{name}: the batch shapes of a {a.shape} and b {b.shape} cannot be broadcast"
        ) from None
    tiles = broadcast_tiles(batch, (a, b), trailing=2)
    a = broadcast_to(a, batch + a.shape[-2:], tiles + a.tile_shape[-2:])
    b = broadcast_to(b, batch + b.shape[-2:], tiles + b.tile_shape[-2:])
    return a, b


def solve(a: TileTensor, b: TileTensor, solve_2d: Callable) -> TileTensor:
    """x with a @ x = b for a stack ``a`` (..., M, M) and a stack ``b`` (..., M, K) whose batch
    axes broadcast with a's."""
    a, b = broadcast_pair(a, b, "solve")
    if not fits_one_tile(a):
        return per_matrix(solve_2d, a, b)
    a, x = _whole_matrices(a), _whole_matrices(b)
    runtime = get_runtime()
    for index, matrix, rhs in zip(a.layout.indices(), a.handles, x.handles):
        args = (_first(a.layout, index), a.shape, False)
        runtime.submit(solve_stack, [(matrix, RW), (rhs, RW)], args)
    return x


def inv(x: TileTensor, inv_2d: Callable) -> TileTensor:
    """The inverses of a stack of square matrices."""
    if not fits_one_tile(x):
        return per_matrix(inv_2d, x)
    scratch = _whole_matrices(x)
    out = TileTensor(scratch.layout, scratch.dtype)
    runtime = get_runtime()
    for index, matrix, inverse in zip(scratch.layout.indices(), scratch.handles, out.handles):
        args = (_first(scratch.layout, index), x.shape, True)
        runtime.submit(solve_stack, [(matrix, RW), (inverse, W)], args)
    return out


def slogdet(x: TileTensor, slogdet_2d: Callable) -> tuple[TileTensor, TileTensor]:
    """(sign, log|det|) of each matrix of a stack, each of the stack's batch shape."""
    batch = x.shape[:-2]
    if not fits_one_tile(x):
        signs, logs = zip(*(slogdet_2d(m) for m in matrices(x)))
        return stack(list(signs), batch), stack(list(logs), batch)
    real = real_dtype(x.dtype)  # log|det| is real (the sign is complex for complex x)
    if x.shape[-1] == 0:  # a 0 x 0 matrix has determinant 1, as an empty product
        return full(batch, 1, x.dtype), full(batch, 0, real)
    scratch = _whole_matrices(x)
    layout = Layout(batch, scratch.tile_shape[:-2])
    sign, logabs = TileTensor(layout, x.dtype), TileTensor(layout, real)
    runtime = get_runtime()
    for index, matrix in zip(scratch.layout.indices(), scratch.handles):
        outputs = [(sign.tile(index[:-2]), W), (logabs.tile(index[:-2]), W)]
        args = (_first(scratch.layout, index), x.shape)
        runtime.submit(slogdet_stack, [(matrix, RW)] + outputs, args)
    return sign, logabs


def real_dtype(dtype) -> np.dtype:
    """The real dtype of ``dtype``'s components (itself when real): the dtype of
    eigenvalues, singular values and log-determinants."""
    return np.empty(0, dtype).real.dtype


def _spectral_shapes(shape, operation) -> list[tuple[int, ...]]:
    """The matrix shapes (batch axes left out) of ``operation``'s outputs for (M, N) inputs."""
    m, n = shape
    k = min(m, n)
    return {
        "eigh": [(n,), (n, n)],
        "eigvalsh": [(n,)],
        "svdvals": [(k,)],
        "svd": [(m, m), (k,), (n, n)],
        "svd_reduced": [(m, k), (k,), (k, n)],
    }[operation]


def spectral(x: TileTensor, operation: str, spectral_2d: Callable) -> list[TileTensor]:
    """The outputs of ``operation`` ("eigh", "eigvalsh", "svd", "svd_reduced", "svdvals") on
    each matrix of a stack: one batched ``numpy.linalg`` task per tile when a tile holds whole
    matrices, else ``spectral_2d`` (a list of 2-d tensors) per matrix, stacked again."""
    batch = x.shape[:-2]
    if not fits_one_tile(x):
        results = [spectral_2d(matrix) for matrix in matrices(x)]
        return [stack(list(parts), batch) for parts in zip(*results)]
    tiles = x.tile_shape[:-2]
    shapes = _spectral_shapes(x.shape[-2:], operation)
    # vectors (eigenvalues, singular values) are real, matrices x's dtype
    outputs = [
        TileTensor(
            Layout(batch + s, tiles + tuple(max(1, e) for e in s)),
            real_dtype(x.dtype) if len(s) == 1 else x.dtype,
        )
        for s in shapes
    ]
    runtime = get_runtime()
    for index in x.layout.indices():
        accesses = [(x.tile(index), R)] + [
            (out.tile(index[:-2] + (0,) * (out.ndim - len(batch))), W) for out in outputs
        ]
        args = (operation, _first(x.layout, index), x.shape)
        runtime.submit(spectral_stack, accesses, args)
    return outputs
