"""What the tiled linear algebra ops share: operand checks and casts, square tiles, guards."""

from __future__ import annotations

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor.dtypes import bool_, result_type
from numtile.tiletensor.elementwise import astype
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

R, W, RW, ACC = Access.R, Access.W, Access.RW, Access.ACCUMULATE


def real_kernels_only(name: str, dtype: np.dtype) -> None:
    """Raise ``TypeError`` for a complex ``dtype`` (and float16): for ops whose tile kernels
    are real only."""
    no_float16(name, dtype)
    if dtype.kind == "c":
        raise TypeError(
            f"{name} of {dtype} tensors is not supported: the tiled matrix product and "
            f"factorisation kernels are real (float32, float64)"
        )


def no_float16(name: str, dtype: np.dtype) -> None:
    """Raise ``TypeError`` for float16: the GEMM and LAPACK tile kernels are float32, float64,
    complex64 and complex128 (bfloat16 for matmul)."""
    if dtype == np.float16:
        raise TypeError(
            f"{name} of float16 tensors is not supported: the tiled matrix kernels are float32 "
            f"and float64 (cast with astype(nt.float32))"
        )


def float_operands(name, *tensors, complex_kernels: bool = True):
    """The tensors cast to their result dtype, and that dtype; booleans and float16 raise,
    complex dtypes too unless the op has ``complex_kernels``."""
    for t in tensors:
        if not isinstance(t, TileTensor):
            raise TypeError(f"{name} expects TileTensors, got {type(t).__name__}")
    dtype = result_type(*(t.dtype for t in tensors))
    if dtype == bool_:
        raise TypeError(f"{name} of boolean tensors is not supported")
    (no_float16 if complex_kernels else real_kernels_only)(name, dtype)
    return [t if t.dtype == dtype else astype(t, dtype) for t in tensors], dtype


def float_matrices(name, *tensors, complex_kernels: bool = True):
    """``float_operands``, with integer operands cast to float64 (LAPACK's dtypes)."""
    tensors, dtype = float_operands(name, *tensors, complex_kernels=complex_kernels)
    if dtype.kind not in "fc":
        tensors, dtype = [astype(t, np.float64) for t in tensors], np.dtype(np.float64)
    return tensors, dtype


def broadcast_tiles(shape, tensors, trailing: int = 0) -> tuple[int, ...]:
    """Tiles for the broadcast ``shape`` of ``tensors``' leading axes (all but their last
    ``trailing``): per axis, the tile of the first tensor that spans it (1 where none does)."""
    tiles = []
    for axis in range(-len(shape), 0):
        spanning = [
            t.tile_shape[axis - trailing]
            for t in tensors
            if t.ndim - trailing >= -axis and t.shape[axis - trailing] == shape[axis] != 1
        ]
        tiles.append(spanning[0] if spanning else 1)
    return tuple(tiles)


def square_tiles(a: TileTensor, name: str) -> TileTensor:
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise np.linalg.LinAlgError(f"{name} needs a square 2-d matrix, got shape {a.shape}")
    tile = min(a.tile_shape)
    return a if a.tile_shape == (tile, tile) else retile(a, (tile, tile))


def guard(x: TileTensor, checks) -> None:
    """Submit each ``(codelet, read tiles, args, row)`` check before anything reads tile row
    ``row`` of ``x``: the check writes that row (RW), so a failed check fails ``x``."""
    runtime = get_runtime()
    columns = x.grid[1] if x.ndim == 2 else 1
    for codelet, tiles, args, row in checks:
        guarded = [x.tile((row, c) if x.ndim == 2 else (row,)) for c in range(columns)]
        runtime.submit(codelet, [(t, R) for t in tiles] + [(g, RW) for g in guarded], args)
