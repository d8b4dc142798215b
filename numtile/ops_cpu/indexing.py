"""Indexing kernels: copies between listed positions of an axis (gather, scatter,
scatter-add), counting and compacting flagged elements (boolean masks, ``nonzero``), copies
of runs, and the run boundaries and running counts behind ``unique``.

Flat tiles are viewed as (pre, n, post) where an axis is involved, as the reductions do.
"""

import numba


@numba.njit(nogil=True, cache=True, error_model="numpy")
def take_positions(src, dst, pre, src_n, post, dst_n, src_positions, dst_positions, accumulate):
    """dst[p, dst_positions[k], q] = (or += when ``accumulate``) src[p, src_positions[k], q]
    for flat ``src`` (pre, src_n, post) and ``dst`` (pre, dst_n, post)."""
    for p in range(pre):
        for k in range(src_positions.size):
            s = (p * src_n + src_positions[k]) * post
            d = (p * dst_n + dst_positions[k]) * post
            if accumulate:
                for q in range(post):
                    dst[d + q] += src[s + q]
            else:
                for q in range(post):
                    dst[d + q] = src[s + q]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def count_nonzero(x, out):
    """out[0] += the number of nonzero elements of flat ``x``."""
    count = 0
    for i in range(x.size):
        if x[i] != 0:
            count += 1
    out[0] += count


@numba.njit(nogil=True, cache=True, error_model="numpy")
def compact(x, flags, out, skip, dst_begin, count):
    """out[dst_begin + c] = the (skip + c)-th element of flat ``x`` whose flag is nonzero, for
    c < ``count``."""
    if count == 0:
        return
    i = 0
    seen = 0
    while seen < skip:
        seen += flags[i] != 0
        i += 1
    # every element is stored, and the next one overwrites it unless it was flagged: no jump
    # on the flags, which a mask's random bits would mispredict; eight at a time while eight
    # more stores fit (at least eight flagged elements remain, so no test per element)
    target = out[dst_begin : dst_begin + count]
    written = 0
    while written + 8 <= count:
        for j in range(8):
            target[written] = x[i + j]
            written += flags[i + j] != 0
        i += 8
    while written < count:
        target[written] = x[i]
        written += flags[i] != 0
        i += 1


@numba.njit(nogil=True, cache=True, error_model="numpy")
def copy_runs(src, out, src_starts, dst_starts, lengths):
    """out[dst_starts[r] + c] = src[src_starts[r] + c] for c < lengths[r], for every run r."""
    for r in range(lengths.size):
        s, d = src_starts[r], dst_starts[r]
        for c in range(lengths[r]):
            out[d + c] = src[s + c]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def compact_positions(flags, out, skip, dst_begin, count, first):
    """out[dst_begin + c] = first + the position of the (skip + c)-th nonzero flag, for
    c < ``count``."""
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


@numba.njit(nogil=True, cache=True, error_model="numpy")
def group_starts(values, previous, flags, first_tile):
    """flags[i] = values[i] != values[i - 1] over flat sorted ``values`` (NaNs differ from
    everything); element 0 compares with the last of ``previous`` unless ``first_tile``."""
    n = values.size
    for i in range(1, n):
        flags[i] = values[i] != values[i - 1]
    if n:
        flags[0] = first_tile or values[0] != previous[previous.size - 1]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def running_count(flags, out, offset):
    """out[i] = offset + (number of nonzero flags in flags[: i + 1]) - 1: the group of each
    element of sorted values whose group starts are flagged."""
    total = offset - 1
    for i in range(flags.size):
        if flags[i] != 0:
            total += 1
        out[i] = total
