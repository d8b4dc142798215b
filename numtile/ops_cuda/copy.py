"""CUDA copy kernels: fill, strided copy and dtype cast (twins of ``ops_cpu.copy``).

Strides and shapes are host launch parameters (see ``numtile.ops_cuda.launch``): the host
coalesces them before a launch, so most copies run as one flat loop.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, block, coalesce, grid, host_ints, launch, offsets2

__all__ = ["cast", "copy_strided", "fill"]


# --- kernels -------------------------------------------------------------------------------------


@cuda.jit
def _fill_kernel(out, value):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = value


@cuda.jit
def _copy_kernel(src, src_offset, src_strides, dst, dst_offset, dst_strides, shape, size):
    for i in range(cuda.grid(1), size, cuda.gridsize(1)):
        src_at, dst_at = offsets2(i, shape, src_strides, dst_strides)
        dst[dst_offset + dst_at] = src[src_offset + src_at]


@cuda.jit
def _cast_kernel(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = x[i]


# --- launchers -----------------------------------------------------------------------------------


def fill(out: DeviceArray, value, *, stream=0) -> None:
    """out[i] = value (converted to out's dtype) for every element of flat ``out``."""
    launch(_fill_kernel, out.size, stream, out, value)


def copy_strided(
    src: DeviceArray,
    src_offset,
    src_strides,
    dst: DeviceArray,
    dst_offset,
    dst_strides,
    shape,
    *,
    stream=0,
) -> None:
    """dst[dst_offset + i.dst_strides] = src[src_offset + i.src_strides] for each index i of
    ``shape`` (strides and shape: host integer arrays)."""
    shape = host_ints(shape, "shape")
    src_strides = host_ints(src_strides, "src_strides")
    dst_strides = host_ints(dst_strides, "dst_strides")
    size = int(np.prod(shape, dtype=np.int64))
    if size == 0:
        return
    shape, (src_strides, dst_strides) = coalesce(shape, src_strides, dst_strides)
    _copy_kernel[grid(size), block(), stream](
        src, int(src_offset), src_strides, dst, int(dst_offset), dst_strides, shape, size
    )


def cast(x: DeviceArray, out: DeviceArray, *, stream=0) -> None:
    """out[i] = x[i] converted to out's dtype (truncation toward zero to integers, ``x != 0``
    to bool)."""
    launch(_cast_kernel, out.size, stream, x, out)
