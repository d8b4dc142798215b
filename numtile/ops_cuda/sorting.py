"""CUDA twins of ``ops_cpu.sorting``: stable row sorts, merges of sorted runs, binary
searches and argmax/argmin partials.

Simple and parallel rather than clever: a row sort is a bottom-up merge sort whose every pass
is one launch with one thread per element, each finding its place in the merged pair of runs
by a binary search (the "merge path"); a merge of two runs works the same way for each output
element. Keys and their order are those of the CPU kernels (NaNs last, -0.0 tied with +0.0,
``descending`` complements the key; ties keep the first run's elements first).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, uint64

from numtile.opcodes import SORT_BFLOAT16, SORT_FLOAT, SORT_SIGNED
from numtile.ops_cuda.launch import DeviceArray, host_ints, launch

__all__ = ["arg_reduce", "count_before", "count_values", "merge_runs", "sort_rows"]


@cuda.jit(device=True)
def _infinity(kind, width):
    """The bits of +inf in a float of ``width`` bits (16: float16, or bfloat16 by ``kind``)."""
    if width == 64:
        return uint64(0x7FF0000000000000)
    if width == 32:
        return uint64(0x7F800000)
    return uint64(0x7F80) if kind == SORT_BFLOAT16 else uint64(0x7C00)


@cuda.jit(device=True)
def sort_key(bits, kind, width, descending):
    """The order-preserving uint64 key of the ``width``-bit pattern ``bits``."""
    b = uint64(bits)
    top = uint64(1) << uint64(width - 1)
    mask = (top - uint64(1)) | top
    if kind == SORT_SIGNED:
        b = b ^ top
    elif kind == SORT_FLOAT or kind == SORT_BFLOAT16:
        infinity = _infinity(kind, width)
        magnitude = b & (mask ^ top)
        if magnitude > infinity:
            b = mask
        elif magnitude == uint64(0):
            b = top
        elif b & top:
            b = ~b & mask
        else:
            b = b | top
    if descending:
        b = ~b & mask
    return b


@cuda.jit(device=True)
def _smaller(a, b):
    """min(a, b) (the builtin does not compile for a real GPU in this numba-cuda)."""
    return a if a < b else b


@cuda.jit(device=True)
def _co_rank(a, a0, na, b, b0, nb, p, kind, width, descending):
    """How many of the first ``p`` merged elements come from a[a0 : a0 + na] (ties: a first)
    when merging it with b[b0 : b0 + nb]."""
    lo = p - nb if p > nb else 0
    hi = _smaller(p, na)
    while lo < hi:
        i = (lo + hi) // 2
        if sort_key(a[a0 + i], kind, width, descending) <= sort_key(
            b[b0 + p - i - 1], kind, width, descending
        ):
            lo = i + 1
        else:
            hi = i
    return lo


@cuda.jit
def _start_kernel(x, values, indices, index_offset):
    rows, n = x.shape
    for t in range(cuda.grid(1), rows * n, cuda.gridsize(1)):
        r, i = t // n, t % n
        values[r, i] = x[r, i]
        indices[r, i] = i + index_offset


@cuda.jit
def _merge_pass_kernel(values, indices, out, out_indices, run, kind, width, descending):
    rows, n = values.shape
    for t in range(cuda.grid(1), rows * n, cuda.gridsize(1)):
        r, p = t // n, t % n
        start = p - p % (2 * run)
        na = _smaller(run, n - start)
        nb = _smaller(run, n - start - na)
        row, row_indices = values[r], indices[r]
        q = p - start
        i = _co_rank(row, start, na, row, start + na, nb, q, kind, width, descending)
        j = q - i
        if i < na and (
            j >= nb
            or sort_key(row[start + i], kind, width, descending)
            <= sort_key(row[start + na + j], kind, width, descending)
        ):
            out[r, p] = row[start + i]
            out_indices[r, p] = row_indices[start + i]
        else:
            out[r, p] = row[start + na + j]
            out_indices[r, p] = row_indices[start + na + j]


@cuda.jit
def _copy_rows_kernel(values, indices, out, out_indices, with_indices):
    rows, n = values.shape
    for t in range(cuda.grid(1), rows * n, cuda.gridsize(1)):
        r, i = t // n, t % n
        out[r, i] = values[r, i]
        if with_indices:
            out_indices[r, i] = indices[r, i]


def sort_rows(x: DeviceArray, values, indices, index_offset, kind, descending, *, stream=0):
    """Each row of 2-D ``values`` is the row of ``x`` stably sorted; each row of ``indices``
    (unless it has no columns) the positions, plus ``index_offset``, its elements came from."""
    rows, n = x.shape
    if n == 0 or rows == 0:
        return
    width = x.dtype.itemsize * 8
    with_indices = indices.shape[1] == n
    scratch_values = cuda.device_array((rows, n), x.dtype, stream=stream)
    scratch_indices = cuda.device_array((rows, n), np.int64, stream=stream)
    positions = indices if with_indices else cuda.device_array((rows, n), np.int64, stream=stream)
    launch(_start_kernel, rows * n, stream, x, values, positions, int(index_offset))
    source, target = (values, positions), (scratch_values, scratch_indices)
    run = 1
    while run < n:
        launch(_merge_pass_kernel, rows * n, stream, *source, *target, run, kind, width, descending)
        source, target = target, source
        run *= 2
    if source[0] is not values:
        launch(_copy_rows_kernel, rows * n, stream, *source, values, indices, with_indices)


@cuda.jit
def _merge_kernel(a, a_indices, b, b_indices, out, out_indices, begin, kind, width, descending):
    rows, m = out.shape
    na, nb = a.shape[1], b.shape[1]
    with_indices = out_indices.shape[1] == m
    for t in range(cuda.grid(1), rows * m, cuda.gridsize(1)):
        r, q = t // m, t % m
        i = _co_rank(a[r], 0, na, b[r], 0, nb, begin + q, kind, width, descending)
        j = begin + q - i
        if i < na and (
            j >= nb
            or sort_key(a[r, i], kind, width, descending)
            <= sort_key(b[r, j], kind, width, descending)
        ):
            out[r, q] = a[r, i]
            if with_indices:
                out_indices[r, q] = a_indices[r, i]
        else:
            out[r, q] = b[r, j]
            if with_indices:
                out_indices[r, q] = b_indices[r, j]


def merge_runs(
    a: DeviceArray, a_indices, b, b_indices, out, out_indices, begin, kind, descending, *, stream=0
):
    """Row by row, positions [begin, begin + out columns) of the stable merge of the sorted
    rows of ``a`` and ``b`` into ``out`` (and their indices, unless ``out_indices`` has no
    columns)."""
    rows, m = out.shape
    width = a.dtype.itemsize * 8
    launch(
        _merge_kernel,
        rows * m,
        stream,
        a,
        a_indices,
        b,
        b_indices,
        out,
        out_indices,
        int(begin),
        kind,
        width,
        descending,
    )


@cuda.jit
def _count_before_kernel(run, needles, counts, kind, width, right):
    n = run.size
    for k in range(cuda.grid(1), needles.size, cuda.gridsize(1)):
        key = sort_key(needles[k], kind, width, False)
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            other = sort_key(run[mid], kind, width, False)
            if other < key or (right and other == key):
                lo = mid + 1
            else:
                hi = mid
        counts[k] += lo


def count_before(run: DeviceArray, needles, counts, kind, right, *, stream=0):
    """counts[k] += how many elements of the sorted ``run`` order before ``needles[k]`` (or
    before or with it when ``right``)."""
    width = run.dtype.itemsize * 8
    launch(_count_before_kernel, needles.size, stream, run, needles, counts, kind, width, right)


@cuda.jit
def _count_values_kernel(x, counts, low, mask):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        value = uint64(x[i])
        # the difference modulo the width, with no step that wraps (the simulator would warn)
        offset = value - low if value >= low else value + ((mask - low) + uint64(1))
        cuda.atomic.add(counts, offset, 1)


def count_values(x: DeviceArray, counts, low, *, stream=0):
    """counts[v] += how many elements of flat ``x`` (the unsigned bits of an integer dtype)
    equal ``low + v`` (``low``: bits too; sums modulo the width)."""
    mask = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - x.dtype.itemsize * 8)
    launch(_count_values_kernel, x.size, stream, x, counts, np.uint64(low), mask)


@cuda.jit(device=True)
def _better(value, best, find_max):
    if best != best:
        return False
    if value != value:
        return True
    return value > best if find_max else value < best


@cuda.jit
def _arg_reduce_kernel(x, values, indices, pre, n, post, shape, starts, strides, find_max):
    for o in range(cuda.grid(1), pre * post, cuda.gridsize(1)):
        p, q = o // post, o % post
        best, best_index = values[o], indices[o]
        for k in range(n):
            value = x[(p * n + k) * post + q]
            rest, position = k, 0
            for d in range(len(shape) - 1, -1, -1):
                position += (starts[d] + rest % shape[d]) * strides[d]
                rest //= shape[d]
            tied = value == best or (value != value and best != best)
            if best_index < 0 or _better(value, best, find_max) or (tied and position < best_index):
                best, best_index = value, position
        values[o], indices[o] = best, best_index


def arg_reduce(
    x: DeviceArray, values, indices, pre, n, post, shape, starts, strides, find_max, *, stream=0
):
    """Fold the middle axis of flat ``x`` (pre, n, post) into the running (value, index)
    pairs (index -1: empty): the first maximum or minimum, NaN first of all."""
    shape = host_ints(shape, "shape")
    starts = host_ints(starts, "starts")
    strides = host_ints(strides, "strides")
    launch(
        _arg_reduce_kernel,
        int(pre) * int(post),
        stream,
        x,
        values,
        indices,
        int(pre),
        int(n),
        int(post),
        shape,
        starts,
        strides,
        find_max,
    )
