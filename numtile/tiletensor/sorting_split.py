"""``sort`` and ``argsort`` of a long 1-D tensor on CPUs as a value-split (sample) sort: no
merge pass.

Split points are quantiles of a sample of the data (NumPy's order: NaNs above every number, -0.0
equal to +0.0); each tile is partitioned into buckets of value ranges, stably, as one task per
tile; each bucket, gathered from every tile's part in tile order, is sorted by NumPy's (SIMD)
sort as one task (its zeros and NaNs put back in their original order, as a stable sort leaves
them), or for an argsort (the partition then carries each element's position) in cache-sized
pieces of value ranges by NumPy's (SIMD, unstable) argsort, its runs of equal elements put back
in position order; the sorted buckets are copied in order into the output tiles (in reverse
order, each reversed, when ``descending``). The host waits for the input (to sample it) and for
one count per (tile, bucket). Where the sample shows buckets badly unbalanced (many equal
values), the input is small or the workers few, ``split_sort`` returns None and the caller runs
the merge sort.
"""

from __future__ import annotations

import numpy as np

from numtile.runtime import Access, DataHandle, get_runtime
from numtile.tiletensor.codelets import sorting_split as codelets
from numtile.tiletensor.dtypes import int64
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W

MIN_SIZE = 1 << 21  # smaller inputs: the merge sort (tests lower it)
# fewer CPU workers: the merge sort (argsort). On an AVX-512 CPU (NumPy's SIMD sort sorts the
# buckets, the partition's compares are 512 bits wide) this sort took 0.45-0.94 x the merge
# sort's time (median 0.84, 8 rounds, loaded, with the merge of keys); the merge sort's levels
# grow with the workers, this sort's passes do not
MIN_WORKERS = 2
# fewer CPU workers: the merge sort for values alone (sort, unique's values). With 2 workers
# its groups are two runs of NumPy's SIMD sort and one merge of numbers into the output tiles
# (``ops_cpu.merge_values``, about 2 ns an element a thread), no level of pairs: on an AVX2 CPU
# that costs less than this sort's partition (~6 ns an element), gather and copy out. 16M
# float64 in 16 tiles, 2 workers, medians of interleaved rounds in one process: 212 ms against
# 223 ms quiet (np.sort 369 ms, 21 rounds), 0.41 s against 0.43 s with another job on the
# cores, 0.81 s against 0.97 s with several. Two runs of 8M beat four of 4M (a level of pairs)
# and eight of 2M: 0.213 / 0.232 / 0.240 s quiet. From 4 workers the merge sort's levels of
# pairs leave workers idle; this sort's passes do not (not measured on 4+ cores)
MIN_WORKERS_VALUES = 4
_UNBALANCED = 2.5  # fall back when a bucket holds this many times its share of the sample


def _bucket_count(tiles: int, workers: int) -> int:
    """About one per tile and at least 4 per worker (tasks to balance), at most 64 (each
    costs the partition a pass over a block of keys)."""
    return min(64, max(tiles, 4 * workers))


def _splitters(x: TileTensor, buckets: int) -> np.ndarray | None:
    """``buckets - 1`` split points from a sample of ``x``, or None when unbalanced."""
    runtime = get_runtime()
    runtime.wait_handles(x.handles)
    per_tile = -(-buckets * codelets.PER_BUCKET // len(x.handles))
    rng = np.random.default_rng(0)
    sample = []
    for handle in x.handles:
        tile = handle.host_array().reshape(-1)
        sample.append(tile[rng.integers(0, tile.size, per_tile)])
    sample = np.sort(np.concatenate(sample))
    splitters = codelets.quantile_splitters(sample, buckets)
    shares = np.bincount(np.searchsorted(splitters, sample, "right"), minlength=buckets)
    if shares.max() > _UNBALANCED * sample.size / buckets:
        return None
    return splitters


def split_sort(
    x: TileTensor, descending: bool, values: bool = True, indices: bool = False
) -> tuple[TileTensor | None, TileTensor | None] | None:
    """(values, indices) of ``x`` (1-D, real) sorted by value ranges, tiled like ``x``, the
    unasked one None; None where not worth it."""
    runtime = get_runtime()
    workers = runtime.config.ncpu
    tiles = x.handles
    if (
        x.ndim != 1
        or x.size < MIN_SIZE
        or x.dtype.kind not in "fiu"
        or workers < (MIN_WORKERS if indices else MIN_WORKERS_VALUES)
        or len(tiles) < 2
        or runtime.distributed is not None
    ):
        return None
    buckets = _bucket_count(len(tiles), workers)
    splitters = _splitters(x, buckets)
    if splitters is None:
        return None
    parts, positions, counted = [], [], []
    starts = x.layout.starts[0]
    for k, tile in enumerate(tiles):
        part, counts = DataHandle(tile.shape, x.dtype), DataHandle((buckets,), int64)
        accesses = [(tile, R), (part, W)]
        if indices:
            positions.append(DataHandle(tile.shape, int64))
            accesses.append((positions[-1], W))
        accesses.append((counts, W))
        runtime.submit(codelets.split_tile, accesses, (splitters, starts[k]))
        parts.append(part)
        counted.append(counts)
    runtime.wait_handles(counted)
    counts = np.stack([c.host_array().reshape(-1) for c in counted])  # (tiles, buckets)
    begins = np.cumsum(counts, axis=1) - counts  # of each bucket in each part
    sizes = counts.sum(axis=0)
    order = np.flatnonzero(sizes)[::-1] if descending else np.flatnonzero(sizes)
    firsts = dict(zip(order.tolist(), (np.cumsum(sizes[order]) - sizes[order]).tolist()))
    sorted_buckets = {}  # bucket: (values or None, indices or None, first output position, size)
    for b in sorted(firsts, key=lambda b: -sizes[b]):  # largest first: the last tasks short
        size = int(sizes[b])
        has = np.flatnonzero(counts[:, b])
        bucket = DataHandle((size,), x.dtype) if values else None
        bucket_indices = DataHandle((size,), int64) if indices else None
        accesses = [(parts[i], R) for i in has]
        accesses += [(positions[i], R) for i in has] if indices else []
        accesses += [(h, W) for h in (bucket, bucket_indices) if h is not None]
        codelet = codelets.argsort_bucket if indices else codelets.sort_bucket
        runtime.submit(codelet, accesses, (begins[has, b], counts[has, b], descending))
        sorted_buckets[b] = (bucket, bucket_indices, firsts[b], size)
    sorted_buckets = [sorted_buckets[b] for b in order]  # in output order
    values_out = _placed(x, [(v, p, n) for v, _, p, n in sorted_buckets], x.dtype)
    return values_out, _placed(x, [(i, p, n) for _, i, p, n in sorted_buckets], int64)


def _placed(x: TileTensor, sorted_buckets: list, dtype) -> TileTensor | None:
    """A tensor tiled like ``x`` holding the (handle, first position, size) buckets in turn
    (None where the handles are None: not asked for)."""
    if sorted_buckets and sorted_buckets[0][0] is None:  # not asked for
        return None
    runtime = get_runtime()
    out = TileTensor(x.layout, dtype)
    starts = x.layout.starts[0]
    for k, tile in enumerate(out.handles):
        lo, hi = starts[k], starts[k + 1]
        pieces = [
            (h, max(lo, p) - p, max(lo, p) - lo, min(hi, p + n) - max(lo, p))
            for h, p, n in sorted_buckets
            if p < hi and p + n > lo
        ]
        accesses = [(h, R) for h, *_ in pieces] + [(tile, W)]
        args = tuple(np.array([piece[i] for piece in pieces], np.int64) for i in (1, 2, 3))
        runtime.submit(codelets.place_buckets, accesses, args)
    return out
