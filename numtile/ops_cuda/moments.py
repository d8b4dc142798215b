"""CUDA twin of ``ops_cpu.moments``: one thread per (p, q) column of a flat array viewed as
(pre, n, post) computes the column's mean and M2 in two passes over it (shifted by the
column's running mean, or its first value), then merges them into the running float64
count, mean (minus a shift: the first value the state took) and M2 (Chan, Golub and LeVeque's
update)."""

from __future__ import annotations

import numba
from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, launch

__all__ = ["moments_accumulate", "moments_merge"]

_float64 = numba.float64  # float32 values widen before they meet the float64 totals


@cuda.jit(device=True)
def _reference(count, shift, mean, m2, k, value):
    """What a chunk of column k is shifted by: its running mean (shift + mean, rounded); an
    empty state first takes ``value`` as its shift (``ops_cpu.moments._reference``)."""
    if count[k] == 0:
        shift[k], mean[k], m2[k] = value, 0.0, 0.0
    return shift[k] + mean[k]


@cuda.jit(device=True)
def _merge(count, shift, mean, m2, k, size, reference, shifted_mean, chunk_m2):
    """Merge a chunk of ``size`` values (their mean minus ``reference``, their M2) into the
    running totals at k (their mean minus ``shift``; ``ops_cpu.moments._merge``)."""
    before = count[k]
    merged = before + size
    delta = ((reference - shift[k]) - mean[k]) + shifted_mean  # chunk mean - running mean
    mean[k] += delta * (size / merged)
    m2[k] += chunk_m2 + delta * delta * (before * size / merged)
    count[k] = merged


@cuda.jit
def _moments_kernel(x, count, shift, mean, m2, pre, n, post):
    for k in range(cuda.grid(1), pre * post, cuda.gridsize(1)):
        p, q = k // post, k % post
        base = p * n * post + q
        reference = _reference(count, shift, mean, m2, k, _float64(x[base]))
        total = 0.0
        for j in range(n):
            total += _float64(x[base + j * post]) - reference
        shifted_mean = total / n
        squares = 0.0
        for j in range(n):
            deviation = (_float64(x[base + j * post]) - reference) - shifted_mean
            squares += deviation * deviation
        _merge(count, shift, mean, m2, k, 1.0 * n, reference, shifted_mean, squares)


def moments_accumulate(
    x: DeviceArray,
    count: DeviceArray,
    shift: DeviceArray,
    mean: DeviceArray,
    m2: DeviceArray,
    pre,
    n,
    post,
    *,
    stream=0,
) -> None:
    """Merge the count, mean and M2 along the middle axis of x (pre, n, post) into the
    running float64 ``count``, ``mean`` (minus ``shift``) and ``m2``."""
    pre, n, post = int(pre), int(n), int(post)
    if n == 0:
        return
    launch(_moments_kernel, pre * post, stream, x, count, shift, mean, m2, pre, n, post)


@cuda.jit
def _merge_kernel(count, shift, mean, m2, other_count, other_shift, other_mean, other_m2):
    for k in range(cuda.grid(1), count.size, cuda.gridsize(1)):
        if other_count[k] > 0:
            _reference(count, shift, mean, m2, k, other_shift[k])  # an empty state takes it
            size, reference, shifted_mean = other_count[k], other_shift[k], other_mean[k]
            _merge(count, shift, mean, m2, k, size, reference, shifted_mean, other_m2[k])


def moments_merge(
    count: DeviceArray,
    shift: DeviceArray,
    mean: DeviceArray,
    m2: DeviceArray,
    other_count: DeviceArray,
    other_shift: DeviceArray,
    other_mean: DeviceArray,
    other_m2: DeviceArray,
    *,
    stream=0,
) -> None:
    """Merge the float64 ``other_count``, ``other_shift``, ``other_mean`` and ``other_m2`` of
    every column into the running ``count``, ``shift``, ``mean`` and ``m2`` (Chan, Golub and
    LeVeque's update)."""
    arrays = (count, shift, mean, m2, other_count, other_shift, other_mean, other_m2)
    launch(_merge_kernel, count.size, stream, *arrays)
