"""Sorting kernels on tiles read as rows: a stable sort of each row, the stable merge of two
sorted runs (of keys, or of numbers compared as themselves), binary searches into a sorted run,
the value-split sort's partition, counts of the values of a small integer range
(argmax/argmin partials: ``searching``).

The sort, merge and search kernels take tiles as unsigned integers of their width (a codelet
views float64 as uint64, int8 as uint8...) with a ``kind`` (``opcodes.SORT_KEYS``), so four
compiled kernels serve every dtype. Each value maps to an order-preserving unsigned key: NaNs
above +inf and all equal, -0.0 equal to +0.0; ``descending`` complements the key, so NaNs come
first and equal values keep their order (the array API's stable descending sort).
``merge_values`` (values alone, 32- and 64-bit numbers, CPU only) compares the values
themselves, with the same order: each run's NaNs, found by a binary search, are placed as a
block, and -0.0 ties with +0.0 as a float compare has it.
"""

import numba
import numpy as np

from numtile.opcodes import SORT_BFLOAT16, SORT_FLOAT, SORT_SIGNED
from numtile.ops_cpu.helpers import called, inlined, unsigned, wide_vectors

_DIGIT = 8  # bits per radix pass (256 buckets: their write streams stay in cache)
_RADIX = 1 << _DIGIT
_SMALL = 32  # rows up to this length are sorted by insertion
_BLOCK = 1024  # elements whose bucket ``split_by_keys`` finds together


@inlined
def _infinity(kind, width):
    """The bits of +inf in a float of ``width`` bits (16: float16, or bfloat16 by ``kind``)."""
    if width == 64:
        return np.uint64(0x7FF0000000000000)
    if width == 32:
        return np.uint64(0x7F800000)
    return np.uint64(0x7F80) if kind == SORT_BFLOAT16 else np.uint64(0x7C00)


@inlined
def sort_key(bits, kind, width, descending):
    """The order-preserving uint64 key of the ``width``-bit pattern ``bits``."""
    b = np.uint64(bits)
    top = np.uint64(1) << np.uint64(width - 1)
    mask = (top - np.uint64(1)) | top
    if kind == SORT_SIGNED:
        b = b ^ top
    elif kind == SORT_FLOAT or kind == SORT_BFLOAT16:
        infinity = _infinity(kind, width)
        magnitude = b & (mask ^ top)
        # negative: every bit flipped, else the sign bit set (selects, not jumps: the sign
        # of random data is unpredictable)
        flip = ((np.uint64(0) - (b >> np.uint64(width - 1))) | top) & mask
        b = b ^ flip
        b = top if magnitude == np.uint64(0) else b  # -0.0 ties with +0.0
        b = mask if magnitude > infinity else b  # NaN, whatever its sign and payload: last
    if descending:
        b = ~b & mask
    return b


@inlined
def co_rank(a, b, p, kind, width, descending):
    """How many of the first ``p`` elements of the stable merge of sorted rows ``a`` and ``b``
    come from ``a`` (ties: ``a`` first)."""
    lo = max(0, p - b.size)
    hi = min(p, a.size)
    while lo < hi:
        i = (lo + hi) // 2
        if sort_key(a[i], kind, width, descending) <= sort_key(
            b[p - i - 1], kind, width, descending
        ):
            lo = i + 1
        else:
            hi = i
    return lo


@inlined
def _insertion_sort(keys, order, n):
    for i in range(1, n):
        key, origin = keys[i], order[i]
        j = i - 1
        while j >= 0 and keys[j] > key:
            keys[j + 1] = keys[j]
            order[j + 1] = order[j]
            j -= 1
        keys[j + 1] = key
        order[j + 1] = origin


@inlined
def _radix_sort(keys, order, keys_tmp, order_tmp, counts, n, width):
    """Stable LSD radix sort of (keys, order) pairs; returns the order array holding the
    result (``order`` or ``order_tmp``)."""
    passes = (width + _DIGIT - 1) // _DIGIT
    digit_mask = np.uint64(_RADIX - 1)
    counts[:passes, :] = 0
    for i in range(n):
        key = keys[i]
        for p in range(passes):
            counts[p, (key >> np.uint64(p * _DIGIT)) & digit_mask] += 1
    src_keys, src_order, dst_keys, dst_order = keys, order, keys_tmp, order_tmp
    for p in range(passes):
        shift = np.uint64(p * _DIGIT)
        histogram = counts[p]
        if histogram.max() == n:  # every element has this digit: nothing moves
            continue
        total = 0
        for d in range(_RADIX):
            count = histogram[d]
            histogram[d] = total
            total += count
        for i in range(n):
            key = src_keys[i]
            d = (key >> shift) & digit_mask
            at = histogram[d]
            histogram[d] = at + 1
            dst_keys[at] = key
            dst_order[at] = src_order[i]
        src_keys, dst_keys = dst_keys, src_keys
        src_order, dst_order = dst_order, src_order
    return src_order


@numba.njit(nogil=True, cache=True, error_model="numpy")
def sort_rows(x, values, indices, index_offset, kind, descending):
    """Each row of 2-D ``values`` is the row of ``x`` stably sorted; each row of ``indices``
    (unless it has no columns) the positions, plus ``index_offset``, its elements came from."""
    rows, n = x.shape
    if n == 0:
        return
    width = x.itemsize * 8
    with_indices = indices.shape[1] == n
    keys, keys_tmp = np.empty(n, np.uint64), np.empty(n, np.uint64)
    order, order_tmp = np.empty(n, np.int64), np.empty(n, np.int64)
    counts = np.empty(((width + _DIGIT - 1) // _DIGIT, _RADIX), np.int64)
    for r in range(rows):
        row = x[r]
        for i in range(n):
            keys[i] = sort_key(row[i], kind, width, descending)
            order[i] = i
        if n <= _SMALL:
            _insertion_sort(keys, order, n)
            result = order
        else:
            result = _radix_sort(keys, order, keys_tmp, order_tmp, counts, n, width)
        for i in range(n):
            values[r, i] = row[result[i]]
        if with_indices:
            for i in range(n):
                indices[r, i] = result[i] + index_offset


@numba.njit(nogil=True, cache=True, error_model="numpy")
def merge_runs(a, a_indices, b, b_indices, out, out_indices, begin, kind, descending):
    """Row by row, positions [begin, begin + out columns) of the stable merge of the sorted
    rows of ``a`` and ``b`` (ties: ``a`` first) into ``out``, and their indices into
    ``out_indices`` unless it has no columns."""
    rows, m = out.shape
    width = a.itemsize * 8
    with_indices = out_indices.shape[1] == m
    na, nb = a.shape[1], b.shape[1]
    for r in range(rows):
        ra, rb = a[r], b[r]
        i = co_rank(ra, rb, begin, kind, width, descending)
        j = begin - i
        q = 0
        # while both runs have elements: branch-free steps (a select, not a jump, per element)
        while q < m and i < na and j < nb:
            take_b = sort_key(rb[j], kind, width, descending) < sort_key(
                ra[i], kind, width, descending
            )
            out[r, q] = rb[j] if take_b else ra[i]
            if with_indices:
                out_indices[r, q] = b_indices[r, j] if take_b else a_indices[r, i]
            j += np.int64(take_b)
            i += np.int64(not take_b)
            q += 1
        while q < m and i < na:
            out[r, q] = ra[i]
            if with_indices:
                out_indices[r, q] = a_indices[r, i]
            i += 1
            q += 1
        while q < m:
            out[r, q] = rb[j]
            if with_indices:
                out_indices[r, q] = b_indices[r, j]
            j += 1
            q += 1


@inlined
def _before(y, x, descending):
    """Whether ``y`` goes strictly before ``x`` in an ascending (or ``descending``) order of
    numbers (no NaNs): a tie keeps the order the runs give."""
    return x < y if descending else y < x


@called
def _nan_bounds(row, descending):
    """(start, end) of the numbers of a sorted row: its NaNs come after them (before them
    when ``descending``); a binary search (integers: no NaNs, the whole row)."""
    lo, hi = 0, row.size
    while lo < hi:
        mid = (lo + hi) // 2
        if (row[mid] == row[mid]) != descending:  # ascending: a number; descending: a NaN
            lo = mid + 1
        else:
            hi = mid
    return (lo, row.size) if descending else (0, lo)


@called
def _co_rank_values(a, b, p, descending):
    """How many of the first ``p`` elements of the stable merge of sorted ``a`` and ``b`` (no
    NaNs) come from ``a`` (ties: ``a`` first)."""
    lo = max(0, p - b.size)
    hi = min(p, a.size)
    while lo < hi:
        i = (lo + hi) // 2
        if _before(b[p - i - 1], a[i], descending):
            hi = i
        else:
            lo = i + 1
    return lo


@inlined
def _merge_step(a, b, a_bits, b_bits, out_bits, i, j, q, descending):
    """One output element of a merge, without a jump: ``b[j]`` if it goes before ``a[i]``,
    else ``a[i]`` (moved as bits: a select of the values is compiled to a branch, which the
    data's order makes unpredictable); returns the next (i, j)."""
    take_b = np.uint64(_before(b[unsigned(j)], a[unsigned(i)], descending))
    x, y = a_bits[unsigned(i)], b_bits[unsigned(j)]
    out_bits[unsigned(q)] = x ^ ((x ^ y) & (np.uint64(0) - take_b))
    return i + np.int64(np.uint64(1) - take_b), j + np.int64(take_b)


@called
def _merge_tail(a, b, a_bits, b_bits, out_bits, i, j, q, end, descending):
    """Output positions [q, end) of a merge from (i, j), checking for the end of a run."""
    while q < end and i < a.size and j < b.size:
        i, j = _merge_step(a, b, a_bits, b_bits, out_bits, i, j, q, descending)
        q += 1
    while q < end and i < a.size:
        out_bits[unsigned(q)] = a_bits[unsigned(i)]
        i += 1
        q += 1
    while q < end:
        out_bits[unsigned(q)] = b_bits[unsigned(j)]
        j += 1
        q += 1


# the fewest steps the four interleaved merges take between checks of their ends; shorter
# slices (under four times this) are merged as one
_CHAIN = 64


@called
def _merge_numbers(a, b, a_bits, b_bits, out_bits, begin, descending):
    """Positions [begin, begin + out size) of the stable merge of sorted ``a`` and ``b`` (no
    NaNs) into ``out_bits``. Four merges of a quarter each run interleaved: each element of
    one merge waits on the compare before it (a load, a compare, an add), four independent
    chains keep the core busy meanwhile."""
    m = out_bits.size
    if m < 4 * _CHAIN:
        i = _co_rank_values(a, b, begin, descending)
        _merge_tail(a, b, a_bits, b_bits, out_bits, i, begin - i, 0, m, descending)
        return
    e0, e1, e2 = m // 4, m // 2, 3 * m // 4
    i0 = _co_rank_values(a, b, begin, descending)
    i1 = _co_rank_values(a, b, begin + e0, descending)
    i2 = _co_rank_values(a, b, begin + e1, descending)
    i3 = _co_rank_values(a, b, begin + e2, descending)
    j0, j1, j2, j3 = begin - i0, begin + e0 - i1, begin + e1 - i2, begin + e2 - i3
    q0, q1, q2, q3 = 0, e0, e1, e2
    na, nb = a.size, b.size
    while True:
        # steps no chain can run out of its slice or of a run in: no checks inside
        steps = min(e0 - q0, e1 - q1, e2 - q2, m - q3)
        steps = min(steps, na - i0, na - i1, na - i2, na - i3)
        steps = min(steps, nb - j0, nb - j1, nb - j2, nb - j3)
        if steps < _CHAIN:
            break
        for _ in range(steps):
            i0, j0 = _merge_step(a, b, a_bits, b_bits, out_bits, i0, j0, q0, descending)
            i1, j1 = _merge_step(a, b, a_bits, b_bits, out_bits, i1, j1, q1, descending)
            i2, j2 = _merge_step(a, b, a_bits, b_bits, out_bits, i2, j2, q2, descending)
            i3, j3 = _merge_step(a, b, a_bits, b_bits, out_bits, i3, j3, q3, descending)
            q0 += 1
            q1 += 1
            q2 += 1
            q3 += 1
    _merge_tail(a, b, a_bits, b_bits, out_bits, i0, j0, q0, e0, descending)
    _merge_tail(a, b, a_bits, b_bits, out_bits, i1, j1, q1, e1, descending)
    _merge_tail(a, b, a_bits, b_bits, out_bits, i2, j2, q2, e2, descending)
    _merge_tail(a, b, a_bits, b_bits, out_bits, i3, j3, q3, m, descending)


@called
def _copy_bits(source, first, out_bits, q, count):
    for k in range(count):
        out_bits[unsigned(q + k)] = source[unsigned(first + k)]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def merge_values(a, b, a_bits, b_bits, out_bits, begin, descending):
    """Row by row, positions [begin, begin + out columns) of the stable merge of the sorted
    rows of ``a`` and ``b`` (ties: ``a`` first; NaNs last, first when ``descending``, ``a``'s
    before ``b``'s) into ``out_bits``: the values of a real dtype of at least 32 bits, with
    ``*_bits`` the same rows as unsigned integers of their width (the values compare as
    numbers, the bits move). The values-only twin of ``merge_runs``, four times faster."""
    rows, m = out_bits.shape
    for r in range(rows):
        ra, rb, ra_bits, rb_bits = a[r], b[r], a_bits[r], b_bits[r]
        a_first, a_end = _nan_bounds(ra, descending)
        b_first, b_end = _nan_bounds(rb, descending)
        a_nans, b_nans = ra.size - (a_end - a_first), rb.size - (b_end - b_first)
        numbers = (a_end - a_first) + (b_end - b_first)
        # in order: the numbers merged, then a's NaNs, then b's; descending: the NaNs first
        a_nans_at = numbers if not descending else 0
        numbers_at = 0 if not descending else a_nans + b_nans
        b_nans_at = a_nans_at + a_nans
        lo, hi = begin, begin + m
        s, e = max(lo, a_nans_at), min(hi, b_nans_at)
        if s < e:  # a's NaNs: in its row after its numbers (before them when descending)
            first = (0 if descending else a_end) + s - a_nans_at
            _copy_bits(ra_bits, first, out_bits[r], s - lo, e - s)
        s, e = max(lo, b_nans_at), min(hi, b_nans_at + b_nans)
        if s < e:
            first = (0 if descending else b_end) + s - b_nans_at
            _copy_bits(rb_bits, first, out_bits[r], s - lo, e - s)
        s, e = max(lo, numbers_at), min(hi, numbers_at + numbers)
        if s < e:
            _merge_numbers(
                ra[a_first:a_end],
                rb[b_first:b_end],
                ra_bits[a_first:a_end],
                rb_bits[b_first:b_end],
                out_bits[r, s - lo : e - lo],
                s - numbers_at,
                descending,
            )


@numba.njit(nogil=True, cache=True, error_model="numpy")
def count_before(run, needles, counts, kind, right):
    """counts[k] += how many elements of the sorted ``run`` order before ``needles[k]`` (or
    before or with it when ``right``): ``searchsorted`` in one tile."""
    width = run.itemsize * 8
    n = run.size
    for k in range(needles.size):
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


@numba.njit(nogil=True, cache=True, error_model="numpy")
def split_by_keys(x, splitters, out, out_indices, index_offset, counts, kind):
    """Stable partition of flat ``x`` (the unsigned bits of its dtype) by the sorted
    ``splitters`` (bits too) into ``counts.size`` buckets (at most 256; each splitter costs a
    pass over a block of keys): an
    element goes to the bucket of how many splitters order before or with it. ``out`` gets
    bucket 0's elements, then bucket 1's..., each in the order of ``x``; ``counts[b]`` their
    number; ``out_indices`` (unless empty) their positions in ``x`` plus ``index_offset``."""
    wide_vectors()
    n = x.size
    width = x.itemsize * 8
    buckets = counts.size
    with_indices = out_indices.size == n
    keys = np.empty(buckets - 1, np.uint64)
    for k in range(buckets - 1):
        keys[k] = sort_key(splitters[k], kind, width, False)
    ids = np.empty(n, np.uint8)
    block, below = np.empty(_BLOCK, np.uint64), np.empty(_BLOCK, np.uint64)
    fours = (buckets - 1) // 4 * 4
    for start in range(0, n, _BLOCK):
        # a block's keys, then a pass per four splitters adding how many order before or with
        # each key: loops without jumps, vectorised across the block
        m = min(_BLOCK, n - start)
        for i in range(m):
            block[i] = sort_key(x[unsigned(start + i)], kind, width, False)
            below[i] = 0
        for k in range(0, fours, 4):
            s0, s1, s2, s3 = keys[k], keys[k + 1], keys[k + 2], keys[k + 3]
            for i in range(m):
                key = block[i]
                low = np.uint64(s0 <= key) + np.uint64(s1 <= key)
                below[i] += low + (np.uint64(s2 <= key) + np.uint64(s3 <= key))
        for k in range(fours, buckets - 1):
            split = keys[k]
            for i in range(m):
                below[i] += np.uint64(split <= block[i])
        for i in range(m):
            ids[unsigned(start + i)] = below[i]
    counts[:] = 0
    for i in range(n):
        counts[ids[i]] += 1
    offsets = np.empty(buckets, np.int64)
    total = 0
    for b in range(buckets):
        offsets[b] = total
        total += counts[b]
    for i in range(n):
        b = ids[i]
        at = offsets[b]
        out[at] = x[i]
        if with_indices:
            out_indices[at] = index_offset + i
        offsets[b] = at + 1


@numba.njit(nogil=True, cache=True, error_model="numpy")
def count_values(x, counts, low):
    """counts[v] += how many elements of flat ``x`` (the unsigned bits of an integer dtype)
    equal ``low + v`` (``low``: bits too; sums modulo the width, every element lies in
    [low, low + counts.size))."""
    mask = np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - x.itemsize * 8)
    for i in range(x.size):
        counts[(np.uint64(x[i]) - np.uint64(low)) & mask] += 1
