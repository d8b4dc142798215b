"""CUDA twins of ``ops_cpu.indexing``: copies between listed positions (scatter-add with
atomics), counting and compacting flagged elements, runs copied, group starts and running counts.

Compaction and running counts keep the CPU kernels' order by running as one thread (simple
and correct; they are a small part of a mask or ``unique``); the rest is one thread per element.
Listed positions are host arrays (launch parameters), copied to the device on the stream.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, launch

__all__ = [
    "compact",
    "compact_positions",
    "copy_runs",
    "count_nonzero",
    "group_starts",
    "running_count",
    "take_positions",
]


@cuda.jit
def _take_kernel(src, dst, pre, src_n, post, dst_n, src_positions, dst_positions, accumulate):
    count = src_positions.size
    for t in range(cuda.grid(1), pre * count * post, cuda.gridsize(1)):
        q = t % post
        k = (t // post) % count
        p = t // (post * count)
        s = (p * src_n + src_positions[k]) * post + q
        d = (p * dst_n + dst_positions[k]) * post + q
        if accumulate:
            cuda.atomic.add(dst, d, src[s])
        else:
            dst[d] = src[s]


def take_positions(
    src: DeviceArray,
    dst,
    pre,
    src_n,
    post,
    dst_n,
    src_positions,
    dst_positions,
    accumulate,
    *,
    stream=0,
):
    """dst[p, dst_positions[k], q] = (or += when ``accumulate``) src[p, src_positions[k], q]
    for flat ``src`` (pre, src_n, post) and ``dst`` (pre, dst_n, post); positions: host."""
    count = len(src_positions)
    if count == 0:
        return
    sources = cuda.to_device(np.ascontiguousarray(src_positions, np.int64), stream=stream)
    targets = cuda.to_device(np.ascontiguousarray(dst_positions, np.int64), stream=stream)
    size = int(pre) * count * int(post)
    arguments = (int(pre), int(src_n), int(post), int(dst_n), sources, targets, accumulate)
    launch(_take_kernel, size, stream, src, dst, *arguments)


@cuda.jit
def _count_nonzero_kernel(x, out):
    count = 0
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        if x[i] != 0:
            count += 1
    cuda.atomic.add(out, 0, count)


def count_nonzero(x: DeviceArray, out, *, stream=0):
    """out[0] += the number of nonzero elements of flat ``x``."""
    launch(_count_nonzero_kernel, x.size, stream, x, out)


@cuda.jit
def _compact_kernel(x, flags, out, skip, dst_begin, count):
    if cuda.grid(1) != 0:
        return
    seen = 0
    written = 0
    for i in range(flags.size):
        if written == count:
            return
        if flags[i] != 0:
            if seen >= skip:
                out[dst_begin + written] = x[i]
                written += 1
            seen += 1


@cuda.jit
def _compact_positions_kernel(flags, out, skip, dst_begin, count, first):
    if cuda.grid(1) != 0:
        return
    seen = 0
    written = 0
    for i in range(flags.size):
        if written == count:
            return
        if flags[i] != 0:
            if seen >= skip:
                out[dst_begin + written] = first + i
                written += 1
            seen += 1


def compact(x: DeviceArray, flags, out, skip, dst_begin, count, *, stream=0):
    """out[dst_begin + c] = the (skip + c)-th flagged element of flat ``x``, c < ``count``."""
    _compact_kernel[1, 1, stream](x, flags, out, int(skip), int(dst_begin), int(count))


def compact_positions(flags: DeviceArray, out, skip, dst_begin, count, first, *, stream=0):
    """out[dst_begin + c] = first + the position of the (skip + c)-th nonzero flag."""
    args = (flags, out, int(skip), int(dst_begin), int(count), int(first))
    _compact_positions_kernel[1, 1, stream](*args)


@cuda.jit
def _copy_runs_kernel(src, out, src_starts, dst_starts, lengths):
    for r in range(cuda.grid(1), lengths.size, cuda.gridsize(1)):
        s, d = src_starts[r], dst_starts[r]
        for c in range(lengths[r]):
            out[d + c] = src[s + c]


def copy_runs(src: DeviceArray, out, src_starts, dst_starts, lengths, *, stream=0):
    """out[dst_starts[r] + c] = src[src_starts[r] + c] for c < lengths[r] (runs: host arrays;
    a thread per run)."""
    runs = [
        cuda.to_device(np.ascontiguousarray(a, np.int64), stream=stream)
        for a in (src_starts, dst_starts, lengths)
    ]
    launch(_copy_runs_kernel, len(lengths), stream, src, out, *runs)


@cuda.jit
def _group_starts_kernel(values, previous, flags, first_tile):
    for i in range(cuda.grid(1), values.size, cuda.gridsize(1)):
        if i:
            flags[i] = values[i] != values[i - 1]
        else:
            flags[0] = first_tile or values[0] != previous[previous.size - 1]


def group_starts(values: DeviceArray, previous, flags, first_tile, *, stream=0):
    """flags[i] = values[i] != values[i - 1] (element 0 against the last of ``previous``
    unless ``first_tile``)."""
    launch(_group_starts_kernel, values.size, stream, values, previous, flags, first_tile)


@cuda.jit
def _running_count_kernel(flags, out, offset):
    if cuda.grid(1) != 0:
        return
    total = offset - 1
    for i in range(flags.size):
        if flags[i] != 0:
            total += 1
        out[i] = total


def running_count(flags: DeviceArray, out, offset, *, stream=0):
    """out[i] = offset + (number of nonzero flags in flags[: i + 1]) - 1."""
    _running_count_kernel[1, 1, stream](flags, out, int(offset))
