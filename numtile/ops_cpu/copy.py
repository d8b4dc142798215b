"""Copy kernels: fill, strided copy (transpose, slicing, retiling, reshape) and dtype cast.

Every kernel uses NumPy's error model: no per-element exception checks, so loops vectorise.
"""

import numba

from numtile.ops_cpu.helpers import inner_axis, is_c_contiguous, row_offsets, unsigned


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
