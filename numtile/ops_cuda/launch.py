"""How the CUDA kernels are launched: the settings ``configure()`` sets, grid sizes, host-side
launch parameters (shapes, strides) and the device functions that turn a flat element index into
strided offsets.

Every 1-D kernel is a grid-stride loop launched as ``kernel[grid(n), block(), stream]``:
``block()`` threads per block and just enough blocks to cover ``n`` items, capped so huge tiles
reuse threads instead of launching millions of blocks. The tiled GEMM kernel uses square
blocks of ``gemm_tile()`` threads a side. Both settings are what ``configure()`` last set (the
runtime calls it with its ``Config`` when a CUDA node starts); the kernels read no other
configuration.

Shapes and strides are launch parameters, not tile data: they are passed as host values
(NumPy arrays, tuples or lists, as the tiled ops build them) and reach the kernels as tuples
of int64, by value, so a launch never copies anything to the device. Before a launch, the
host drops extent-1 axes and merges axes that are contiguous in every operand, so most
copies run as one flat loop and at most a handful of tuple lengths (kernel specialisations)
occur.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from numtile.cuda_driver import SIMULATOR

# the simulator runs every thread as a Python thread: few blocks keep it fast, and grid-stride
# loops make any count correct
MAX_BLOCKS = 2 if SIMULATOR else 8192
# the largest thread block CUDA launches
MAX_THREADS = 1024

# Kernels that numba-cuda caches to disk (the simulator has no cache) and device functions.
cached_kernel = cuda.jit if SIMULATOR else functools.partial(cuda.jit, cache=True)
device_function = functools.partial(cuda.jit, device=True)


class LaunchSettings(NamedTuple):
    """Threads per block of the 1-D kernels, and the side of the tiled GEMM's square block."""

    block: int
    gemm_tile: int


# Config's defaults (cuda_block, cuda_gemm_tile), until the runtime configures its own
_settings = LaunchSettings(block=256, gemm_tile=16)


def configure(block: int | None = None, gemm_tile: int | None = None) -> LaunchSettings:
    """Set the launch configuration of every later CUDA kernel launch; return the previous one.

    ``block``: threads per block of the 1-D grid-stride kernels (1..1024); ``gemm_tile``: side
    of the square thread block and shared-memory tile of the ``@cuda.jit`` GEMM (1..32, so
    that a block has at most 1024 threads). ``None`` keeps a setting as it is.

    >>> from numtile import ops_cuda
    >>> previous = ops_cuda.configure(block=128, gemm_tile=8)
    >>> ops_cuda.launch_settings()
    LaunchSettings(block=128, gemm_tile=8)
    >>> _ = ops_cuda.configure(*previous)
    """
    global _settings
    block = _settings.block if block is None else block
    gemm_tile = _settings.gemm_tile if gemm_tile is None else gemm_tile
    for name, value, highest in (("block", block, MAX_THREADS), ("gemm_tile", gemm_tile, 32)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {value!r}")
        if not 1 <= value <= highest:
            raise ValueError(f"{name} must be in 1..{highest}, got {value}")
    previous = _settings
    _settings = LaunchSettings(int(block), int(gemm_tile))
    return previous


def launch_settings() -> LaunchSettings:
    """The launch configuration ``configure()`` last set."""
    return _settings


def block() -> int:
    """Threads per block of the 1-D grid-stride kernels."""
    return _settings.block


def gemm_tile() -> int:
    """Side of the tiled GEMM kernel's square thread block and shared-memory tile."""
    return _settings.gemm_tile


def grid(n: int) -> int:
    """Blocks for ``n`` items: at least one, at most ``MAX_BLOCKS``."""
    return max(1, min(MAX_BLOCKS, math.ceil(n / block())))


# A numba device array (DeviceNDArray, or FakeCUDAArray under the simulator).
DeviceArray = Any

_HOST_TYPES = (np.ndarray, np.generic, numbers.Number, list, tuple)


def is_host(value) -> bool:
    """True for host values (NumPy arrays and scalars, Python numbers, lists, tuples)."""
    return isinstance(value, _HOST_TYPES)


def host_ints(value, what: str) -> tuple[int, ...]:
    """``value`` (a host array or sequence of integers) as a tuple of Python ints."""
    if not is_host(value):
        raise TypeError(
            f"{what} must be a host array or sequence of integers (a launch parameter), "
            f"got {type(value).__name__}"
        )
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


def launch(kernel, n: int, stream, *args) -> None:
    """Launch the 1-D grid-stride ``kernel`` over ``n`` items on ``stream`` with ``args``;
    nothing when ``n`` is 0."""
    if n == 0:
        return
    kernel[grid(n), block(), stream](*args)


def is_c_contiguous(strides: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """True when element ``strides`` are the C-contiguous strides of ``shape`` (extent-1 axes
    ignored), as in ``ops_cpu.helpers.is_c_contiguous``."""
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def coalesce(
    shape: tuple[int, ...], *strides: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Shape and strides that address the same elements in the same (C) order with fewest
    axes: extent-1 axes dropped, an axis merged into the next when every stride set steps
    over it contiguously. Never empty: a 0-d or all-ones shape becomes ``(1,)``."""
    merged_shape: list[int] = []
    merged: list[list[int]] = [[] for _ in strides]
    for axis, extent in enumerate(shape):
        if extent == 1:
            continue
        if merged_shape and all(
            kept[-1] == s[axis] * extent for kept, s in zip(merged, strides, strict=True)
        ):
            merged_shape[-1] *= extent
            for kept, s in zip(merged, strides, strict=True):
                kept[-1] = s[axis]
        else:
            merged_shape.append(extent)
            for kept, s in zip(merged, strides, strict=True):
                kept.append(s[axis])
    if not merged_shape:
        return (1,), tuple((0,) for _ in strides)
    return tuple(merged_shape), tuple(tuple(kept) for kept in merged)


@cuda.jit(device=True)
def offsets2(i, shape, first, second):
    """Offsets of the ``i``-th element (C order over ``shape``) under two stride tuples."""
    if len(shape) == 1:
        return i * first[0], i * second[0]
    offset_first = 0
    offset_second = 0
    rest = i
    for axis in range(len(shape) - 1, -1, -1):
        extent = shape[axis]
        index = rest % extent
        rest //= extent
        offset_first += index * first[axis]
        offset_second += index * second[axis]
    return offset_first, offset_second


@cuda.jit(device=True)
def offset1(i, shape, strides):
    """Offset of the ``i``-th element (C order over the tuple ``shape``) under ``strides``."""
    offset, _ = offsets2(i, shape, strides, strides)
    return offset


def check_argument(condition: bool, message: str) -> None:
    """Raise the CPU twin's AssertionError (kept under ``python -O``, unlike ``assert``)."""
    if not condition:
        raise AssertionError(message)
