"""The value-split sort's partition kernel (``ops_cpu.sorting.split_by_keys``, CPU only) against
NumPy's stable argsort of bucket numbers: splitter counts on both sides of its four-at-a-time
passes, with and without positions, over NaNs of two payloads, signed zeros, ties with the
splitters and sizes that fill no block."""

import numpy as np
import pytest

from numtile import opcodes
from numtile.ops_cpu import split_by_keys

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
