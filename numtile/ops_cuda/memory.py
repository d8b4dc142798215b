"""CUDA memory kernels: fill, strided copy and dtype cast (twins of ``ops_cpu.memory``).

Also home of what the other CUDA kernel modules share: host-side handling of the small
integer arguments (shapes, strides), the launch of a 1-D grid-stride kernel and the device
functions that turn a flat element index into strided offsets.

Shapes and strides are launch parameters, not tile data: they are passed as host values
(NumPy arrays, tuples or lists, as the tiled ops build them) and reach the kernels as tuples
of int64, by value, so a launch never copies anything to the device. Before a launch, the
host drops extent-1 axes and merges axes that are contiguous in every operand, so most
copies run as one flat loop and at most a handful of tuple lengths (kernel specialisations)
occur.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from numba import cuda

from numtile.ops_cuda._launch import block, grid

__all__ = ["cast", "copy_strided", "fill"]

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
    ignored), as in ``ops_cpu.memory.is_c_contiguous``."""
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
