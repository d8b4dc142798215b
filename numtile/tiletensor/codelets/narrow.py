"""bfloat16 and float16 tiles in codelets: a float32 kernel runs on them through float32
scratch tiles.

Numba has no bfloat16 type, so kernels never see a bfloat16 array. A codelet of an
element-wise op or a reduction widens each bfloat16 tile it reads to a float32 scratch tile
(``ops.bf16_widen`` on the uint16 bits: exact), runs the float32 kernel, and rounds the
tiles it writes back to bfloat16 (``ops.bf16_narrow``: nearest, ties to even). One pair of
conversion kernels per backend thus serves every op, and no op compiles a bfloat16 signature
of its own; the result is the float32 op's, rounded once, as PyTorch computes bfloat16 ops.
Copies move the 16-bit patterns as they are (``bits``). The float32 copies are the task's
scratch (``scratch_bytes``: twice each bfloat16 tile's bytes), which the wrapper declares,
so a memory manager makes room for them before the task starts. float16 tiles go the same
way (``ops.f16_widen`` / ``ops.f16_narrow``: exact, and nearest-even as NumPy's astype).

Where an op has kernels of its own on 16-bit float bits (``ops.bf16_unary``, ``ops.f16_unary``...
of ``ops_cpu.bf16_kernels`` and their CUDA twins: widened in registers, rounded once on write),
``through_float32(direct=...)`` runs those on bfloat16 or float16 tiles instead, with no scratch
tile and the same bits; the float32 scratch path remains for tasks that mix the two formats and
for the codelets that have no such kernels (see ``codelets.bf16``).
"""

from __future__ import annotations

import functools

import numpy as np

from numtile.runtime import DataHandle
from numtile.tiletensor.dtypes import is_bfloat16, is_narrow_floating

_FLOAT16 = np.dtype(np.float16)
_FLOAT32 = np.dtype(np.float32)


def is_narrow(value) -> bool:
    """Whether ``value`` is a bfloat16 or float16 tile (or array)."""
    return is_narrow_floating(getattr(value, "dtype", None))


def bits(tile):
    """A 16-bit float tile as its uint16 bit patterns (other tiles as they are): for copies."""
    return tile.view(np.uint16) if is_narrow(tile) else tile


def goes_direct(values, formats=("bf16", "f16")) -> bool:
    """Whether a task on ``values`` (tiles, handles and arguments) runs a codelet's kernels of
    16-bit float bits: its 16-bit float tiles are all bfloat16 or all float16 (a task mixing
    the two takes the float32 scratch path), of one of the ``formats`` the kernels read."""
    narrow = {value.dtype for value in values if is_narrow(value)}
    return len(narrow) == 1 and format_of(*values) in formats


def format_of(*tiles) -> str:
    """The 16-bit float format of ``tiles`` (of a task that ``goes_direct``): the prefix of its
    kernels, ``"bf16"`` or ``"f16"``."""
    return "f16" if any(getattr(tile, "dtype", None) == _FLOAT16 for tile in tiles) else "bf16"


def scalar_bits(value):
    """A scalar as a kernel stores it in a tile of ``value``'s dtype (16-bit floats: bits)."""
    if is_narrow(value):
        return np.uint16(np.asarray(value, value.dtype).view(np.uint16))
    return value


def _widen_into(ops, tile, out) -> None:
    widen_kernel = ops.bf16_widen if is_bfloat16(tile.dtype) else ops.f16_widen
    widen_kernel(tile.reshape(-1).view(np.uint16), out.reshape(-1).view(np.uint32))


def widen(ops, tile):
    """A float32 scratch copy of the 16-bit float ``tile`` (exact)."""
    out = ops.empty(tuple(tile.shape), _FLOAT32)
    _widen_into(ops, tile, out)
    return out


def narrow_into(ops, values, tile) -> None:
    """Round the float32 ``values`` to the 16-bit float dtype of ``tile``, nearest-even."""
    narrow_kernel = ops.bf16_narrow if is_bfloat16(tile.dtype) else ops.f16_narrow
    narrow_kernel(values.reshape(-1).view(np.uint32), tile.reshape(-1).view(np.uint16))


def cast(ops, x, out) -> None:
    """out = x converted to out's dtype: bfloat16 from float32, float64, integers and bools
    with one rounding to nearest even (as ``ml_dtypes`` converts), from bfloat16 exactly
    through float32; float16 as NumPy converts (float64 to float16 directly: one
    rounding)."""
    if not (is_narrow(x) or is_narrow(out)):
        ops.cast(x, out)
    elif is_narrow(x):
        if out.dtype == _FLOAT32:
            _widen_into(ops, x, out)
        elif is_narrow(out):  # float16 <-> bfloat16: exact into float32, rounded once
            narrow_into(ops, widen(ops, x), out)
        else:
            ops.cast(widen(ops, x), out)
    elif out.dtype == _FLOAT16 and x.dtype != _FLOAT32:
        ops.f16_from(x, out.view(np.uint16))
    elif x.dtype == _FLOAT32:
        narrow_into(ops, x, out)
    else:  # bfloat16 from float64, integers or bools
        ops.bf16_from(x.reshape(-1), out.reshape(-1).view(np.uint16))


def scratch_bytes(*tiles_then_args, direct: bool = False, formats=("bf16", "f16")) -> int:
    """The bytes of the float32 copies ``through_float32`` makes of a task's 16-bit float
    tiles (``Codelet.scratch``); none when the codelet has ``direct`` kernels of 16-bit bits
    (of ``formats``) and the task ``goes_direct``."""
    if direct and goes_direct(tiles_then_args, formats):
        return 0
    return sum(
        2 * tile.nbytes
        for tile in tiles_then_args
        if isinstance(tile, DataHandle) and is_narrow(tile)
    )


def through_float32(outputs=(), updates=(), direct=None, formats=("bf16", "f16")):
    """A decorator: ``kernel(ops, *arguments)`` runs on float32 copies of its bfloat16 and
    float16 tiles; ``outputs`` (positions in ``arguments``) are written only, ``updates`` read
    and written, and both are rounded back to their dtype after the kernel. Without such
    tiles, the kernel runs as it is. ``direct(ops, *arguments)``, where given, runs instead
    when the tiles ``goes_direct`` (all bfloat16 or all float16, of the ``formats`` its
    kernels read): it reads and writes the 16-bit float tiles themselves, through kernels of
    their bits."""
    return functools.partial(
        _through_float32, outputs=outputs, updates=updates, direct=direct, formats=formats
    )


def _through_float32(kernel, outputs, updates, direct, formats):
    @functools.wraps(kernel)
    def wrapped(ops, *arguments):
        if not any(is_narrow(argument) for argument in arguments):
            return kernel(ops, *arguments)
        if direct is not None and goes_direct(arguments, formats):
            return direct(ops, *arguments)
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

    wrapped.scratch = functools.partial(scratch_bytes, direct=direct is not None, formats=formats)
    return wrapped
