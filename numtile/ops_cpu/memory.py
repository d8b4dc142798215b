"""Memory kernels: fill, strided copy (transpose, slicing, retiling, reshape) and dtype cast.

Also home of the small dtype and stride helpers that the other CPU kernels share. Every kernel
uses NumPy's error model: no per-element exception checks, so loops vectorise.
"""

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

# Decorator of the scalar op functions and of the generic loops that take them as arguments:
# they are inlined at Numba IR level, because a kernel that passes a function to a non-inlined
# loop cannot be cached.
inlined = numba.njit(nogil=True, error_model="numpy", inline="always")


def as_type_of(value, example):
    """``value`` converted to the scalar type of ``example`` (a scalar or an array's dtype)."""
    raise NotImplementedError("as_type_of is only callable from numba-compiled code")


@overload(as_type_of, inline="always")
def _as_type_of(value, example):
    # Typed constants keep float32 arithmetic in float32 (a bare 0.5 would promote to float64).
    target = example.dtype if isinstance(example, types.Array) else example

    def convert(value, example):
        return target(value)

    return convert


@numba.njit(nogil=True, error_model="numpy")
def unsigned(index):
    """``index`` (known to be >= 0) as uint64: Numba then drops its negative-index wraparound
    check, which otherwise blocks vectorisation of loops over computed offsets."""
    return np.uint64(index)


@numba.njit(nogil=True, error_model="numpy")
def is_c_contiguous(strides, shape):
    """True when element ``strides`` are the C-contiguous strides of ``shape`` (extent-1 axes
    ignored)."""
    expected = 1
    for axis in range(shape.size - 1, -1, -1):
        if shape[axis] != 1 and strides[axis] != expected:
            return False
        expected *= shape[axis]
    return True


@numba.njit(nogil=True, error_model="numpy")
def inner_axis(shape):
    """Last axis of ``shape`` with extent > 1 (0 if none): the axis walked by the tight loop."""
    axis = shape.size - 1
    while axis > 0 and shape[axis] == 1:
        axis -= 1
    return axis


@numba.njit(nogil=True, error_model="numpy")
def row_offsets(row, shape, inner, first_strides, second_strides):
    """Element offsets in two strided arrays of C-ordered row ``row`` over ``shape[:inner]``."""
    first = 0
    second = 0
    for axis in range(inner - 1, -1, -1):
        extent = shape[axis]
        index = row % extent
        row //= extent
        first += index * first_strides[axis]
        second += index * second_strides[axis]
    return first, second


@numba.njit(nogil=True, cache=True, error_model="numpy")
def fill(out, value):
    """out[i] = value (converted to out's dtype) for every element of flat ``out``."""
    for i in range(out.size):
        out[i] = value


@numba.njit(nogil=True, cache=True, error_model="numpy")
def copy_strided(src, src_offset, src_strides, dst, dst_offset, dst_strides, shape):
    """dst[dst_offset + i.dst_strides] = src[src_offset + i.src_strides] for each index i of
    ``shape``."""
    size = 1
    for axis in range(shape.size):
        size *= shape[axis]
    if size == 0:
        return
    if is_c_contiguous(src_strides, shape) and is_c_contiguous(dst_strides, shape):
        for i in range(size):
            dst[unsigned(dst_offset + i)] = src[unsigned(src_offset + i)]
        return
    inner = inner_axis(shape)
    extent = shape[inner]
    src_step = src_strides[inner]
    dst_step = dst_strides[inner]
    for row in range(size // extent):
        src_start, dst_start = row_offsets(row, shape, inner, src_strides, dst_strides)
        src_start += src_offset
        dst_start += dst_offset
        for j in range(extent):
            dst[unsigned(dst_start + j * dst_step)] = src[unsigned(src_start + j * src_step)]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def cast(x, out):
    """out[i] = x[i] converted to out's dtype (like ``astype``: truncation toward zero to
    integers, ``x != 0`` to bool)."""
    for i in range(out.size):
        out[i] = x[i]
