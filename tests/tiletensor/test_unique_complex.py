"""unique_* of complex tensors against np.unique(equal_nan=False) (array_api_strict's
reference): NumPy's complex order, each NaN (a NaN in either part) distinct, -0.0 and 0.0 one
value, first occurrences and inverse indices, over tiles that divide nothing."""

from __future__ import annotations

import numpy as np
import pytest

import numtile as nt

NAN = np.nan


def _mixed(n: int, seed: int) -> np.ndarray:
    """Duplicates from a small set, NaNs in either or both parts, zeros of both signs."""
    rng = np.random.default_rng(seed)
    parts = np.array([-1.5, -0.0, 0.0, 2.0, NAN, np.inf])
    out = np.empty(n, np.complex128)
    out.real, out.imag = parts[rng.integers(0, parts.size, (2, n))]
    return out


CASES = {
    "mixed": (_mixed(53, 0), 7),
    "2-d": (_mixed(30, 1).reshape(5, 6), (2, 4)),
    "no-nan": (np.array([3 + 1j, 1 - 1j, 3 + 1j, complex(-0.0, 0), complex(0, -0.0), 1 - 1j]), 3),
    "all-nan": (np.array([complex(NAN, 1), complex(1, NAN), complex(NAN, NAN)] * 2), 4),
    "0-d": (np.array(2 - 1j), ()),
    "empty": (np.zeros(0, np.complex128), 4),
    "empty 2-d": (np.zeros((2, 0), np.complex128), (1, 3)),
}


def _tensor(array: np.ndarray, tiles):
    return nt.from_numpy(array, tile_shape=tiles) if array.ndim else nt.from_numpy(array)


def _equal(ours, theirs: np.ndarray) -> None:
    got = ours.to_numpy()
    assert got.dtype == theirs.dtype and got.shape == theirs.shape
    np.testing.assert_array_equal(got, theirs)  # NaNs in the same places, -0.0 == 0.0


@pytest.mark.parametrize("case", list(CASES))
def test_unique_all(case):
    array, tiles = CASES[case]
    values, first, inverse, counts = np.unique(
        array, return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    result = nt.unique_all(_tensor(array, tiles))
    _equal(result.values, values)
    _equal(result.indices, first.astype(np.int64))
    _equal(result.inverse_indices, inverse.reshape(array.shape).astype(np.int64))
    _equal(result.counts, counts.astype(np.int64))


@pytest.mark.parametrize("case", ["mixed", "2-d", "0-d", "empty"])
def test_unique_values_counts_inverse(case):
    array, tiles = CASES[case]
    x = _tensor(array, tiles)
    values, _, inverse, counts = np.unique(  # with indices: a stable sort, as ours
        array, return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    _equal(nt.unique_values(x), values)
    got = nt.unique_counts(x)
    _equal(got.values, values)
    _equal(got.counts, counts.astype(np.int64))
    got = nt.unique_inverse(x)
    _equal(got.values, values)
    _equal(got.inverse_indices, inverse.reshape(array.shape).astype(np.int64))


def test_complex64_first_occurrence_of_signed_zeros():
    zeros = [complex(0, -0.0), complex(-0.0, 0), complex(-0.0, -0.0)]
    array = np.array([*zeros, 1 + 1j, 0j, complex(NAN, 0)], np.complex64)
    result = nt.unique_all(nt.from_numpy(array, tile_shape=2))
    assert result.values.dtype == np.complex64
    zero = result.values.to_numpy()[0]  # the first occurrence's zero
    assert zero == 0 and not np.signbit(zero.real) and np.signbit(zero.imag)
    assert result.indices.to_numpy().tolist() == [0, 3, 5]
    assert result.counts.to_numpy().tolist() == [4, 1, 1]
    assert result.inverse_indices.to_numpy().tolist() == [0, 0, 0, 1, 0, 2]
