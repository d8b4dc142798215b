"""The one-pass kernel of ``var``/``std``: count, mean and sum of squared deviations (M2) of
every (p, q) column of a flat array viewed as (pre, n, post), merged into running totals.

The data is read once, and everything is float64 whatever the input precision. A reduced axis
that is not innermost (``var(x, axis=0)``) goes in blocks of ``_COLUMNS`` columns: the block's
first ``_HEAD`` rows in two passes while they are cached (their mean, shifted by the column's
running mean or else its first value, then their squared deviations from it), then every other
row in ONE pass of four long row streams (as the column reductions read), as sums of d and d^2
with d = x minus the running mean, which the head has just made close to these rows' mean, so
the sum of squares loses nothing to cancellation (M2 = sum d^2 - (sum d)^2 / count). Chan, Golub
and LeVeque's update merges each part into the running (count, mean, M2): two merges a block
of a tile. A contiguous reduced axis goes in cached chunks of ``_RUN`` elements, two passes
each.

Measured (8192 x 8192 float64, tiles 2048^2, ``var(x, axis=0)``, 2 cores, load 4.4): 183-236
ms with the earlier kernel (a two-pass merge every 64 rows of 512 columns) -> 73-86 ms. M2's
largest relative error over 2048 columns of 8192 rows (against long double): 4.6e-15 (N(0, 1);
NumPy's ``var`` 9.3e-15), 2.4e-13 one tile / 5.7e-12 four tiles for data 1e6 from zero (the
earlier kernel 1.7e-11, NumPy's two passes 7.6e-15: a float64 running mean of 1e6 rounds at
1e-10, and each merge's update carries it), 7.3e-14 with a first row 1e6 times the others.
"""

import numba
import numpy as np

from numtile.ops_cpu.helpers import inlined, widen

# A block of _COLUMNS columns: its head of _HEAD rows (256 KiB of float64 at most) is read
# twice, from cache; three float64 rows of partials (24 KiB) stay in L1. A contiguous reduced
# axis goes in chunks of _RUN elements.
_HEAD = 32
_COLUMNS = 1024
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
    head = min(n, _HEAD)
    for p in range(pre):
        for first in range(0, post, _COLUMNS):
            width = min(_COLUMNS, post - first)
            at = p * post + first  # the running totals of these columns
            start = p * n * post + first
            # the head rows in two passes while they are cached: a mean to shift the rest by
            for q in range(width):
                references[q] = _reference(count, mean, at + q, x[start + q])
            _head_moments(x, references, sums, squares, start, head, post, width)
            for q in range(width):
                _merge(count, mean, m2, at + q, head, references[q], sums[q], squares[q])
            rest = n - head
            if rest == 0:
                continue
            # the other rows in one pass, shifted by the running mean (close to their mean:
            # their sum of squares loses nothing to cancellation)
            for q in range(width):
                references[q] = mean[at + q]
            _shifted_sums(x, references, sums, squares, start + head * post, rest, post, width)
            for q in range(width):
                shifted_mean = sums[q] / rest
                chunk_m2 = squares[q] - sums[q] * shifted_mean
                _merge(count, mean, m2, at + q, rest, references[q], shifted_mean, chunk_m2)


@inlined
def _head_moments(x, references, sums, squares, start, rows, post, width):
    """sums = the mean of d = x - reference and squares = the sum of its squared deviations
    over ``rows`` rows of ``width`` columns from ``start``, in two passes."""
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


@inlined
def _shifted_sums(x, references, sums, squares, start, rows, post, width):
    """sums = sum of d and squares = sum of d^2, d = x - reference, over ``rows`` rows of
    ``width`` columns from ``start``: a row of each quarter a step (four long streams, as the
    column reductions read), then the last rows."""
    sums[:width] = 0.0
    squares[:width] = 0.0
    band = rows // 4
    step = band * post
    for j in range(band):
        row = start + j * post
        r0 = x[row : row + width]
        r1 = x[row + step : row + step + width]
        r2 = x[row + 2 * step : row + 2 * step + width]
        r3 = x[row + 3 * step : row + 3 * step + width]
        for q in range(width):
            d0 = widen(r0[q]) - references[q]
            d1 = widen(r1[q]) - references[q]
            d2 = widen(r2[q]) - references[q]
            d3 = widen(r3[q]) - references[q]
            sums[q] += (d0 + d1) + (d2 + d3)
            squares[q] += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3)
    for j in range(4 * band, rows):
        values = x[start + j * post : start + j * post + width]
        for q in range(width):
            d = widen(values[q]) - references[q]
            sums[q] += d
            squares[q] += d * d


@numba.njit(nogil=True, cache=True, error_model="numpy")
def moments_merge(count, mean, m2, other_count, other_mean, other_m2):
    """Merge the float64 ``other_count``, ``other_mean`` and ``other_m2`` of every column (the
    moments of other rows of it) into the running ``count``, ``mean`` and ``m2``."""
    for k in range(count.size):
        if other_count[k] > 0:
            _merge(count, mean, m2, k, other_count[k], other_mean[k], 0.0, other_m2[k])
