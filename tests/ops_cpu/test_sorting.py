"""The value-split sort's partition kernel (``ops_cpu.sorting.split_by_keys``, CPU only) against
NumPy's stable argsort of bucket numbers: splitter counts on both sides of its four-at-a-time
passes, with and without positions, over NaNs of two payloads, signed zeros, ties with the
splitters and sizes that fill no block. The merge of sorted runs of numbers
(``ops_cpu.sorting.merge_values``, CPU only) against NumPy's stable sort, bit for bit: slices
of the merge at every offset kind, runs that end early, NaNs and zeros of both signs."""

import numpy as np
import pytest

from numtile import opcodes
from numtile.ops_cpu import merge_values, split_by_keys

KINDS = {"f": opcodes.SORT_FLOAT, "i": opcodes.SORT_SIGNED, "u": opcodes.SORT_UNSIGNED}


def _bucket_of(x, splitters):
    """How many splitters order before or with each element, in NumPy's order (NaNs last)."""
    return np.searchsorted(splitters, x, "right")  # NaNs above every number, as NumPy orders


@pytest.mark.parametrize("buckets", [2, 5, 8, 9, 64])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.uint8])
@pytest.mark.parametrize("size", [0, 1, 1000, 2500])
def test_split_by_keys_is_a_stable_partition_by_value(dtype, buckets, size):
    rng = np.random.default_rng(buckets)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    x = rng.integers(info.min, info.max, size, dtype) if info else rng.standard_normal(size)
    x = x.astype(dtype)
    if x.dtype.kind == "f" and size:
        x[::7], x[::11], x[::13] = np.nan, -0.0, 0.0
        x[::22] = -np.float64(np.nan)  # another NaN bit pattern
    sample = x if size else np.zeros(1, dtype)
    splitters = np.sort(rng.choice(sample, buckets - 1))  # ties with the data, NaNs maybe
    bits = np.dtype(f"u{x.itemsize}")
    ids = _bucket_of(x, splitters)
    order = np.argsort(ids, kind="stable")
    for with_positions in (False, True):
        out, counts = np.empty_like(x), np.empty(buckets, np.int64)
        positions = np.full(size if with_positions else 0, -1, np.int64)
        split_by_keys(
            x.view(bits), splitters.view(bits), out.view(bits), positions, 40, counts,
            KINDS[x.dtype.kind],
        )  # fmt: skip
        np.testing.assert_array_equal(counts, np.bincount(ids, minlength=buckets))
        np.testing.assert_array_equal(out.view(bits), x[order].view(bits))
        if with_positions:
            np.testing.assert_array_equal(positions, order + 40)


def _stable_merge(a, b, descending):
    """The stable merge of sorted runs ``a`` and ``b`` (NaNs last, first when descending;
    ties: ``a`` first), from NumPy's stable argsort of their concatenation."""
    x = np.concatenate([a, b])
    if not descending:
        return x[np.argsort(x, kind="stable")]
    if x.dtype.kind in "iu":  # ~x: the reverse order, no overflow
        return x[np.lexsort((np.arange(x.size), ~x))]
    nan = np.isnan(x)
    return x[np.lexsort((np.arange(x.size), -np.where(nan, 0, x), ~nan))]


def _sorted_run(rng, size, dtype, descending, kind):
    """A sorted run: few values (ties across the runs), NaNs of two payloads and signed zeros
    (floats), or values spread over the dtype's range."""
    dtype = np.dtype(dtype)
    if kind == "few" and dtype.kind == "f":
        pool = np.array([np.nan, -np.nan, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf], np.float64)
        x = rng.choice(pool.astype(dtype), size)
    elif kind == "few":
        x = rng.integers(0, 5, size).astype(dtype)
    elif dtype.kind == "f":
        x = rng.standard_normal(size).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size, dtype, endpoint=True)
    return _stable_merge(x, x[:0], descending)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.uint64])
@pytest.mark.parametrize("kind", ["few", "spread"])
@pytest.mark.parametrize("sizes", [(0, 0), (0, 9), (9, 0), (1, 1), (700, 3), (600, 650)])
def test_merge_values_is_the_stable_merge_bit_for_bit(sizes, kind, dtype, descending):
    # slices of [0, 256) elements (one chain), of 256 and more (four interleaved chains, some
    # reaching the end of a run), at the start, in the middle and up to the end; two rows
    rng = np.random.default_rng(sum(sizes))
    a, b = (_sorted_run(rng, n, dtype, descending, kind) for n in sizes)
    expected = _stable_merge(a, b, descending)
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    total = sum(sizes)
    slices = {(0, total), (0, min(total, 5)), (total // 3, total - total // 3), (total, 0)}
    slices |= {(max(total - 300, 0), min(total, 300)), (min(total, 7), max(total - 7, 0))}
    rows_a, rows_b = np.stack([a, a]), np.stack([b, b])
    for begin, width in sorted(slices):
        out = np.zeros((2, width), dtype)
        merge_values(
            rows_a, rows_b, rows_a.view(bits), rows_b.view(bits), out.view(bits), begin,
            descending,
        )  # fmt: skip
        want = expected[begin : begin + width].view(bits)
        for row in out:
            np.testing.assert_array_equal(row.view(bits), want)


def test_merge_values_with_one_run_all_before_the_other():
    # every element of a before b's (and the reverse): the chains run a run to its end early
    a = np.arange(1000, dtype=np.float64).reshape(1, -1)
    b = a + 5000
    bits = np.uint64
    for first, second in ((a, b), (b, a)):
        out = np.empty((1, 2000))
        merge_values(first, second, first.view(bits), second.view(bits), out.view(bits), 0, False)
        np.testing.assert_array_equal(out[0], np.sort(np.concatenate([a[0], b[0]])))
