"""bfloat16 tiles in codelets: a float32 kernel runs on them through float32 scratch tiles.

Numba has no bfloat16 type, so kernels never see a bfloat16 array. A codelet of an
element-wise op or a reduction widens each bfloat16 tile it reads to a float32 scratch tile
(``ops.bf16_widen`` on the uint16 bits: exact), runs the float32 kernel, and rounds the
tiles it writes back to bfloat16 (``ops.bf16_narrow``: nearest, ties to even). One pair of
conversion kernels per backend thus serves every op, and no op compiles a bfloat16 signature
of its own; the result is the float32 op's, rounded once, as PyTorch computes bfloat16 ops.
Copies move the 16-bit patterns as they are (``bits``). The float32 copies are the task's
scratch (``scratch_bytes``: twice each bfloat16 tile's bytes), which the wrapper declares,
so a memory manager makes room for them before the task starts.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from numtile.runtime import DataHandle

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_FLOAT32 = np.dtype(np.float32)


def is_narrow(value) -> bool:
    """Whether ``value`` is a bfloat16 tile (or array)."""
    return getattr(value, "dtype", None) == _BFLOAT16


def bits(tile):
    """A bfloat16 tile as its uint16 bit patterns (other tiles as they are): for copies."""
    return tile.view(np.uint16) if is_narrow(tile) else tile


def scalar_bits(value):
    """A scalar as a kernel stores it in a tile of ``value``'s dtype (bfloat16: its bits)."""
    if is_narrow(value):
        return np.uint16(np.asarray(value, _BFLOAT16).view(np.uint16))
    return value


def widen(ops, tile):
    """A float32 scratch copy of the bfloat16 ``tile`` (exact)."""
    out = ops.empty(tuple(tile.shape), _FLOAT32)
    ops.bf16_widen(tile.reshape(-1).view(np.uint16), out.reshape(-1).view(np.uint32))
    return out


def narrow_into(ops, values, tile) -> None:
    """Round the float32 ``values`` to bfloat16, nearest-even, into the bfloat16 ``tile``."""
    ops.bf16_narrow(values.reshape(-1).view(np.uint32), tile.reshape(-1).view(np.uint16))


def cast(ops, x, out) -> None:
    """out = x converted to out's dtype, through float32 where either one is bfloat16 (as
    ``ml_dtypes`` converts: float64 and integers round to float32 first)."""
    if not (is_narrow(x) or is_narrow(out)):
        ops.cast(x, out)
    elif is_narrow(x):
        if out.dtype == _FLOAT32:
            ops.bf16_widen(x.view(np.uint16), out.view(np.uint32))
        else:
            ops.cast(widen(ops, x), out)
    elif x.dtype == _FLOAT32:
        narrow_into(ops, x, out)
    else:
        wide = ops.empty(tuple(x.shape), _FLOAT32)
        ops.cast(x, wide)
        narrow_into(ops, wide, out)


def scratch_bytes(*tiles_then_args) -> int:
    """The bytes of the float32 copies ``through_float32`` makes of a task's bfloat16 tiles
    (``Codelet.scratch``)."""
    return sum(
        2 * tile.nbytes
        for tile in tiles_then_args
        if isinstance(tile, DataHandle) and tile.dtype == _BFLOAT16
    )


def through_float32(outputs=(), updates=()):
    """A decorator: ``kernel(ops, *arguments)`` runs on float32 copies of its bfloat16 tiles;
    ``outputs`` (positions in ``arguments``) are written only, ``updates`` read and written,
    and both are rounded back to bfloat16 after the kernel. Without bfloat16 tiles, the
    kernel runs as it is."""
    return functools.partial(_through_float32, outputs=outputs, updates=updates)


def _through_float32(kernel, outputs, updates):
    @functools.wraps(kernel)
    def wrapped(ops, *arguments):
        if not any(is_narrow(argument) for argument in arguments):
            return kernel(ops, *arguments)
        wide = list(arguments)
        for position, argument in enumerate(arguments):
            if is_narrow(argument):
                if position in outputs:
                    wide[position] = ops.empty(tuple(argument.shape), _FLOAT32)
                else:
                    wide[position] = widen(ops, argument)
        kernel(ops, *wide)
        for position in (*outputs, *updates):
            if is_narrow(arguments[position]):
                narrow_into(ops, wide[position], arguments[position])
        return None

    wrapped.scratch = scratch_bytes
    return wrapped
