"""The one-pass kernel of ``var``/``std``: count, mean and sum of squared deviations (M2) of
every (p, q) column of a flat array viewed as (pre, n, post), merged into running totals.

The data is read once, and everything is float64 whatever the input precision. A running state
holds its mean minus a shift, the first value it took (an empty state, count 0, takes it from
its first chunk, with mean and M2 zero: only the count need be set). A float64 running mean of
data 1e6 from zero rounds at 1e-10, and each merge carried that error into M2 (the delta of the
means times it, times n_a n_b / n); the shifted mean rounds relative to the data's spread, and
merges subtract the shifts first (exact for nearby values), so M2 keeps NumPy's digits however
far the data sits from zero. A reduced axis that is not innermost (``var(x, axis=0)``) goes in
blocks of ``_COLUMNS`` columns: the block's first ``_HEAD`` rows in two passes while they are
cached (their mean, shifted by the column's running mean or else its first value, then their
squared deviations from it), then every other row in ONE pass of four long row streams (as the
column reductions read), as sums of d and d^2 with d = x minus the running mean, which the head
has just made close to these rows' mean, so the sum of squares loses nothing to cancellation
(M2 = sum d^2 - (sum d)^2 / count). Chan, Golub and LeVeque's update merges each part into the
running (count, mean, M2): two merges a block of a tile. A contiguous reduced axis goes in
cached chunks of ``_RUN`` elements, two passes each.

Measured (8192 x 8192 float64, tiles 2048^2, ``var(x, axis=0)``, 2 cores, load 4.4): 183-236 ms
with the earlier kernel (a two-pass merge every 64 rows of 512 columns) -> 73-86 ms. The shift
costs no time that shows: one thread on 2048^2 tiles 0.98-1.01x the kernel before it (medians,
load 3.3); ``nt.var`` median of 10 processes 50.5 ms against 49.1 (each 39-56 ms, load
1.9-2.6). M2's largest relative error over 2048 columns of 8192 rows against long double
(``bench/var_precision.py``; NumPy's ``var`` in brackets): N(0, 1) 4.6e-15 (9.3e-15); N(1e6, 1)
4.3e-15 over one tile, 1.1e-15 over four, 9.7e-16 in partial chains (7.6e-15; the unshifted
mean 2.4e-13, 5.7e-12, 4.0e-12); N(-1e8, 1e-2) 2.2e-15 (9.5e-9, its mean summed in order;
unshifted 3.0e-9 - 9.2e-8); N(1e6, 1) with a first row 1e3 off 2.9e-14 over one tile (the
head's mean, 31 off the other rows, shifts them: their sum of squares cancels), 3.8e-15 over
four (9.3e-15; unshifted 1.3e-13 - 3.3e-13).
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
def _reference(count, shift, mean, m2, k, value):
    """What a chunk of column k is shifted by: its running mean (shift + mean, rounded). An
    empty state first takes ``value`` as its shift, mean and M2 zero (selects: with a branch
    here, or in ``_merge``, the loops over columns ran 1.9-2.6x slower on 32 rows)."""
    empty = count[k] == 0
    shift[k] = widen(value) if empty else shift[k]
    mean[k] = 0.0 if empty else mean[k]
    m2[k] = 0.0 if empty else m2[k]
    return shift[k] + mean[k]


@numba.njit(nogil=True, error_model="numpy")
def _merge(count, shift, mean, m2, k, size, reference, shifted_mean, chunk_m2):
    """Merge a chunk of ``size`` values (their mean minus ``reference``, their M2) into the
    running totals at k (their mean minus ``shift``)."""
    before = count[k]
    total = before + size
    # the chunk's mean minus the running one from numbers the size of the data's spread, not
    # of its offset (reference - shift is exact for nearby values, and for the running mean
    # while |mean| <= |shift|, as in Fast2Sum)
    delta = ((reference - shift[k]) - mean[k]) + shifted_mean
    mean[k] += delta * (size / total)
    m2[k] += chunk_m2 + delta * delta * (before * size / total)
    count[k] = total


# reassoc lets LLVM split the chunk sums of a contiguous axis over SIMD lanes
@numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def moments_accumulate(x, count, shift, mean, m2, pre, n, post):
    """Merge the count, mean and M2 along the middle axis of x (pre, n, post) into the
    running float64 ``count``, ``mean`` (minus ``shift``) and ``m2`` of its (p, q) columns."""
    if n == 0:
        return
    if post == 1:
        for p in range(pre):
            for first in range(0, n, _RUN):
                values = x[p * n + first : p * n + min(n, first + _RUN)]
                reference = _reference(count, shift, mean, m2, p, values[0])
                total = 0.0
                for v in values:
                    total += widen(v) - reference
                shifted_mean = total / values.size
                squares = 0.0
                for v in values:
                    deviation = (widen(v) - reference) - shifted_mean
                    squares += deviation * deviation
                _merge(count, shift, mean, m2, p, values.size, reference, shifted_mean, squares)
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
                references[q] = _reference(count, shift, mean, m2, at + q, x[start + q])
            _head_moments(x, references, sums, squares, start, head, post, width)
            for q in range(width):
                _merge(count, shift, mean, m2, at + q, head, references[q], sums[q], squares[q])
            rest = n - head
            if rest == 0:
                continue
            # the other rows in one pass, shifted by the running mean (close to their mean:
            # their sum of squares loses nothing to cancellation)
            for q in range(width):
                references[q] = shift[at + q] + mean[at + q]
            _shifted_sums(x, references, sums, squares, start + head * post, rest, post, width)
            for q in range(width):
                shifted_mean = sums[q] / rest
                chunk_m2 = squares[q] - sums[q] * shifted_mean
                _merge(count, shift, mean, m2, at + q, rest, references[q], shifted_mean, chunk_m2)


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
def moments_merge(count, shift, mean, m2, other_count, other_shift, other_mean, other_m2):
    """Merge the float64 ``other_count``, ``other_shift``, ``other_mean`` and ``other_m2`` of
    every column (the moments of other rows of it) into the running ``count``, ``shift``,
    ``mean`` and ``m2``."""
    for k in range(count.size):
        if other_count[k] > 0:
            _reference(count, shift, mean, m2, k, other_shift[k])  # an empty state takes it
            size, reference, shifted_mean = other_count[k], other_shift[k], other_mean[k]
            _merge(count, shift, mean, m2, k, size, reference, shifted_mean, other_m2[k])
