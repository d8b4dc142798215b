"""Copy kernels: fill, strided copy (transpose, slicing, retiling, reshape) and dtype cast.

Start-up cost decides their form: ``fill``, ``cast`` and a contiguous copy are NumPy's own C
loops (as fast, nothing to compile); only the strided copy is a Numba loop, compiled on first
need, with NumPy's error model (no per-element exception checks, so it vectorises).
"""

import math

import numba
import numpy as np

from numtile.ops_cpu.helpers import inner_axis, row_offsets, unsigned
from numtile.ops_cpu.per_op import ByNeed, c_contiguous, read_only


def fill(out, value):
    """out[i] = value (converted to out's dtype, as a C cast: truncation toward zero to
    integers) for every element of flat ``out``. NumPy's copy loop: nothing to compile (a
    Numba loop cost 0.1-0.3 s per dtype and layout on first use)."""
    with np.errstate(all="ignore"):
        np.copyto(out, value, casting="unsafe")


def _copy_strided(src, src_offset, src_strides, dst, dst_offset, dst_strides, shape):
    """dst[dst_offset + i.dst_strides] = src[src_offset + i.src_strides] for each index i of
    ``shape`` (int64 arrays: element strides and extents).

    A copy contiguous on both sides is one NumPy slice assignment (a memmove, GIL released;
    nothing to compile); any other runs the strided Numba loop, its index arrays read-only
    whoever made them (one compile per dtype, not one per read-only-ness)."""
    size = math.prod(shape.tolist())
    if size == 0:
        return
    if c_contiguous(src_strides, shape) and c_contiguous(dst_strides, shape):
        dst[dst_offset : dst_offset + size] = src[src_offset : src_offset + size]
        return
    _copy_rows(
        src, src_offset, read_only(src_strides), dst, dst_offset, read_only(dst_strides),
        read_only(shape), size,
    )  # fmt: skip


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _copy_rows(src, src_offset, src_strides, dst, dst_offset, dst_strides, shape, size):
    """The strided copy, row by row along the innermost axis of extent > 1."""
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


copy_strided = ByNeed(_copy_strided, _copy_rows)


def cast(x, out):
    """out[i] = x[i] converted to out's dtype (like ``astype``: truncation toward zero to
    integers, ``x != 0`` to bool). NumPy's own cast loops (SIMD, GIL released, nothing to
    compile: a Numba loop cost 0.1-0.3 s per dtype pair on first use), silent as a kernel is
    on overflow and NaN."""
    with np.errstate(all="ignore"):
        np.copyto(out, x, casting="unsafe")
