"""Searching kernels: the argmax/argmin partials of tiles, folded into running (value, index)
pairs.

A tile's first best element is found with loops LLVM vectorises (the extremum of each block of
a row, or a select per column), and its global index is computed once per output element.
"""

import numba
import numpy as np

from numtile.ops_cpu.helpers import called, inlined
from numtile.ops_cpu.scalar_math import _maximum, _minimum

_ARG_BLOCK = 256  # elements of a row (or columns) taken at once: they stay in L1 cache


@inlined
def _better(value, best, find_max):
    """Whether ``value`` beats ``best`` for argmax (``find_max``) or argmin: NaN beats all (a
    select, no jumps, so a loop of it vectorises)."""
    beaten = value > best if find_max else value < best
    return best == best and (value != value or beaten)


@inlined
def _extremum(a, b, find_max):
    """max(a, b) for argmax (``find_max``), else min(a, b); NaN propagates."""
    return _maximum(a, b) if find_max else _minimum(a, b)


@called
def _first_equal(row, best, start):
    """The first k >= ``start`` where row[k] is ``best`` (NaN: the first NaN)."""
    k = start
    if best != best:
        while row[k] == row[k]:
            k += 1
    else:
        while row[k] != best:
            k += 1
    return k


@inlined
def _first_bests(a, b, find_max):
    """The k of the first maximum (or minimum; NaN first of all) of each of the non-empty rows
    ``a`` and ``b`` (of one length): the extremum of each block (NaN propagates; no jumps, so
    LLVM vectorises it), the first block whose extremum beats those before it, then the first
    element of that block equal to it. The two rows are read side by side: two streams from
    memory and two independent chains of extremums."""
    n = a.size
    best_a, start_a, best_b, start_b = a[0], 0, b[0], 0
    for first in range(0, n, _ARG_BLOCK):
        end = min(first + _ARG_BLOCK, n)
        extremum_a, extremum_b = a[first], b[first]
        for i in range(first + 1, end):
            extremum_a = _extremum(extremum_a, a[i], find_max)
            extremum_b = _extremum(extremum_b, b[i], find_max)
        if _better(extremum_a, best_a, find_max):
            best_a, start_a = extremum_a, first
        if _better(extremum_b, best_b, find_max):
            best_b, start_b = extremum_b, first
    return _first_equal(a, best_a, start_a), _first_equal(b, best_b, start_b)


@called
def _position(k, shape, starts, strides):
    """The global index of element ``k`` (C order) of ``shape``: sum((starts[d] + k_d) *
    strides[d])."""
    rest, position = k, 0
    for d in range(shape.size - 1, -1, -1):
        position += (starts[d] + rest % shape[d]) * strides[d]
        rest //= shape[d]
    return position


@called
def _merge_best(values, indices, o, value, position, find_max):
    """Fold (value, position) into the running pair o: the better value, or on a tie (NaN ties
    with NaN) the smaller position."""
    best, best_index = values[o], indices[o]
    tied = value == best or (value != value and best != best)
    if best_index < 0 or _better(value, best, find_max) or (tied and position < best_index):
        values[o], indices[o] = value, position


@numba.njit(nogil=True, cache=True, error_model="numpy")
def arg_reduce(x, values, indices, pre, n, post, shape, starts, strides, find_max):
    """Fold the middle axis of flat ``x`` (pre, n, post) into the running (value, index)
    pairs of ``values`` and ``indices`` (pre * post; index -1: empty): the first maximum (or
    minimum; NaN first of all). Middle position k is element ``k`` of ``shape`` (C order),
    whose global index is sum((starts[d] + k_d) * strides[d]); these grow with k (``strides``
    are the C strides of a shape that holds the tile's), so the first best of a tile is the
    one with the smallest index."""
    if n == 0:
        return
    if post == 1:
        # row p beside row p + half (an odd row out beside itself)
        half = (pre + 1) // 2
        for p in range(half):
            q = p + half if p + half < pre else p
            a, b = x[p * n : (p + 1) * n], x[q * n : (q + 1) * n]
            k_a, k_b = _first_bests(a, b, find_max)
            position = _position(k_a, shape, starts, strides)
            _merge_best(values, indices, p, a[k_a], position, find_max)
            if q != p:
                position = _position(k_b, shape, starts, strides)
                _merge_best(values, indices, q, b[k_b], position, find_max)
        return
    # the best of each column so far and its k, column blocks at a time: a loop of selects
    # over contiguous memory that LLVM vectorises
    width = min(post, _ARG_BLOCK)
    best, best_k = np.empty(width, x.dtype), np.empty(width, np.int64)
    for p in range(pre):
        for first in range(0, post, _ARG_BLOCK):
            m = min(_ARG_BLOCK, post - first)
            start = p * n * post + first
            best[:m] = x[start : start + m]
            best_k[:m] = 0
            for k in range(1, n):
                row = x[start + k * post : start + k * post + m]
                for q in range(m):
                    taken = _better(row[q], best[q], find_max)
                    best[q] = row[q] if taken else best[q]
                    best_k[q] = k if taken else best_k[q]
            for q in range(m):
                position = _position(best_k[q], shape, starts, strides)
                _merge_best(values, indices, p * post + first + q, best[q], position, find_max)
