"""The one-pass kernel of ``var``/``std``: count, mean and sum of squared deviations (M2) of
every (p, q) column of a flat array viewed as (pre, n, post), merged into running totals.

The data is read once, in chunks that stay in cache. Each chunk is shifted by a reference
close to its mean (the column's running mean, or the chunk's first value when the column has
none yet), so its sums never cancel: the mean of the shifted values, then their squared
deviations from it (two passes over the cached chunk), and Chan, Golub and LeVeque's update
merges the chunk into the running (count, mean, M2), its mean difference being the shifted
mean itself. Everything is float64 whatever the input precision.
"""

import numba
import numpy as np

from numtile.ops_cpu.helpers import widen

# A chunk of _ROWS rows x _COLUMNS columns (256 KiB of float64) stays in L2 cache between its
# two passes; a contiguous reduced axis goes in chunks of _RUN elements.
_ROWS = 64
_COLUMNS = 512
_RUN = 4096


@numba.njit(nogil=True, error_model="numpy")
def _reference(count, mean, k, first_value):
    """What a chunk of column k is shifted by: its running mean, or else its first value."""
    return mean[k] if count[k] > 0 else widen(first_value)


@numba.njit(nogil=True, error_model="numpy")
def _merge(count, mean, m2, k, size, reference, shifted_mean, chunk_m2):
    """Merge a chunk of ``size`` values (their mean minus ``reference``, their M2) into the
    running totals at k."""
    before = count[k]
    total = before + size
    delta = shifted_mean + (reference - mean[k])  # the chunk's mean minus the running one
    mean[k] += delta * (size / total)
    m2[k] += chunk_m2 + delta * delta * (before * size / total)
    count[k] = total


# reassoc lets LLVM split the chunk sums of a contiguous axis over SIMD lanes
@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def moments_accumulate(x, count, mean, m2, pre, n, post):
    """Merge the count, mean and M2 along the middle axis of x (pre, n, post) into the
    running float64 ``count``, ``mean`` and ``m2`` of its (p, q) columns."""
    if n == 0:
        return
    if post == 1:
        for p in range(pre):
            for first in range(0, n, _RUN):
                values = x[p * n + first : p * n + min(n, first + _RUN)]
                reference = _reference(count, mean, p, values[0])
                total = 0.0
                for v in values:
                    total += widen(v) - reference
                shifted_mean = total / values.size
                squares = 0.0
                for v in values:
                    deviation = (widen(v) - reference) - shifted_mean
                    squares += deviation * deviation
                _merge(count, mean, m2, p, values.size, reference, shifted_mean, squares)
        return
    width = min(post, _COLUMNS)
    references = np.empty(width, np.float64)
    sums = np.empty(width, np.float64)
    squares = np.empty(width, np.float64)
    for p in range(pre):
        for first in range(0, post, _COLUMNS):
            width = min(_COLUMNS, post - first)
            at = p * post + first  # the running totals of these columns
            for row in range(0, n, _ROWS):
                rows = min(_ROWS, n - row)
                start = (p * n + row) * post + first
                for q in range(width):
                    references[q] = _reference(count, mean, at + q, x[start + q])
                sums[:width] = 0.0
                for j in range(rows):
                    values = x[start + j * post : start + j * post + width]
                    for q in range(width):
                        sums[q] += widen(values[q]) - references[q]
                for q in range(width):
                    sums[q] /= rows
                squares[:width] = 0.0
                for j in range(rows):
                    values = x[start + j * post : start + j * post + width]
                    for q in range(width):
                        deviation = (widen(values[q]) - references[q]) - sums[q]
                        squares[q] += deviation * deviation
                for q in range(width):
                    _merge(count, mean, m2, at + q, rows, references[q], sums[q], squares[q])


@numba.njit(nogil=True, cache=True, error_model="numpy")
def moments_merge(count, mean, m2, other_count, other_mean, other_m2):
    """Merge the float64 ``other_count``, ``other_mean`` and ``other_m2`` of every column (the
    moments of other rows of it) into the running ``count``, ``mean`` and ``m2``."""
    for k in range(count.size):
        if other_count[k] > 0:
            _merge(count, mean, m2, k, other_count[k], other_mean[k], 0.0, other_m2[k])
