"""unique_all/counts/inverse/values and nonzero against array_api_strict (each NaN is a
distinct value) over dtype x shape x tile shape."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import numtile as nt
from tests.tiletensor.test_array_api_hypothesis import (
    SETTINGS,
    SHAPES,
    assert_same,
    retiled,
    strict,
    xps,
)

xs = pytest.importorskip("array_api_strict")


def _draw(data):
    dtype = data.draw(xps.real_dtypes(), label="dtype")
    elements = st.sampled_from([-1.5, 0.0, -0.0, 2.0, np.nan]) if dtype.kind == "f" else None
    if dtype.kind in "iu":
        elements = st.integers(0, 3)
    return data.draw(retiled(data.draw(xps.arrays(dtype, SHAPES, elements=elements))), label="x")


@SETTINGS
@given(data=st.data())
def test_unique_all_matches_array_api_strict(data):
    x = _draw(data)
    ours = nt.unique_all(x)
    theirs = xs.unique_all(strict(x))
    assert_same(ours.values, xs.sort(theirs.values), exact=True, signed_zeros=False)
    order = np.argsort(np.asarray(theirs.values), kind="stable")
    assert_same(ours.counts, xs.asarray(np.asarray(theirs.counts)[order]))
    # first occurrences of each value, and the inverse maps every element to its value
    values = ours.values.to_numpy()
    flat = x.to_numpy().reshape(-1)
    indices = ours.indices.to_numpy()
    np.testing.assert_array_equal(flat[indices], values)
    for value, first in zip(values, indices):
        if value == value:
            assert first == np.flatnonzero(flat == value)[0]
    inverse = ours.inverse_indices.to_numpy()
    assert inverse.shape == x.shape
    np.testing.assert_array_equal(values[inverse].reshape(-1), flat)


@SETTINGS
@given(data=st.data())
def test_unique_counts_inverse_values(data):
    x = _draw(data)
    reference = np.asarray(xs.unique_values(strict(x)))
    reference = np.sort(reference, kind="stable")
    assert_same(nt.unique_values(x), xs.asarray(reference), exact=True, signed_zeros=False)
    counts = nt.unique_counts(x)
    assert int(nt.sum(counts.counts).item()) == x.size
    assert counts.values.shape == reference.shape
    inverse = nt.unique_inverse(x)
    values = inverse.values.to_numpy()
    np.testing.assert_array_equal(
        values[inverse.inverse_indices.to_numpy()], x.to_numpy(), strict=False
    )


def test_every_nan_is_distinct():
    x = nt.from_numpy(np.array([np.nan, 1.0, np.nan, 1.0, np.nan]), tile_shape=2)
    result = nt.unique_all(x)
    np.testing.assert_array_equal(result.values.to_numpy(), [1.0, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(result.counts.to_numpy(), [2, 1, 1, 1])
    np.testing.assert_array_equal(result.indices.to_numpy(), [1, 0, 2, 4])
    np.testing.assert_array_equal(result.inverse_indices.to_numpy(), [1, 0, 2, 0, 3])


@SETTINGS
@given(data=st.data())
def test_nonzero_matches_array_api_strict(data):
    shapes = xps.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5)
    x = data.draw(retiled(data.draw(xps.arrays(xps.scalar_dtypes(), shapes))), label="x")
    ours = nt.nonzero(x)
    theirs = xs.nonzero(strict(x))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert_same(a, b)


def test_nonzero_of_0d_raises():
    with pytest.raises(ValueError, match="at least one axis"):
        nt.nonzero(nt.asarray(1))


@pytest.mark.parametrize(
    "data",
    [
        np.arange(1000) % 7,  # few integers of a small span: counted per tile
        np.arange(1000) % 7 * 10**6,  # few values, a wide span: each tile's groups combined
        np.array([np.nan, 1.0, np.nan, -0.0, 0.0, 1.0, 2.5] * 40),  # NaNs distinct, 0 == -0
        np.random.default_rng(0).standard_normal(400),  # all distinct: the sort of everything
    ],
    ids=["few", "few-wide", "nans", "distinct"],
)
def test_unique_counts_and_values_from_each_tile_match_numpy(data):
    x = nt.from_numpy(data, tile_shape=(37,))
    values, counts = nt.unique_counts(x)
    expected_values, expected_counts = np.unique(data, return_counts=True, equal_nan=False)
    np.testing.assert_array_equal(values.to_numpy(), expected_values)
    np.testing.assert_array_equal(counts.to_numpy(), expected_counts)
    np.testing.assert_array_equal(nt.unique_values(x).to_numpy(), expected_values)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int64, np.uint64])
@pytest.mark.parametrize("where", ["lowest", "zero", "highest"])
def test_unique_counts_of_a_small_span_counts_each_value(dtype, where):
    # integers spanning at most a quarter of a tile (300, which divides nothing of 1000) are
    # counted per tile, at the dtype's extremes too (offsets taken modulo the width)
    from numtile.tiletensor import sets

    info = np.iinfo(dtype)
    low = {"lowest": int(info.min), "zero": 0, "highest": int(info.max) - 60}[where]
    offsets = np.random.default_rng(1).integers(0, 61, 1000)
    offsets[offsets == 30] = 31  # a value of the span missing
    data = (offsets.astype(object) + low).astype(dtype)
    x = nt.from_numpy(data, tile_shape=300)
    assert sets._unique_by_histogram(x) is not None
    values, counts = nt.unique_counts(x)
    expected_values, expected_counts = np.unique(data, return_counts=True)
    np.testing.assert_array_equal(values.to_numpy(), expected_values)
    assert values.dtype == dtype
    np.testing.assert_array_equal(counts.to_numpy(), expected_counts)
    np.testing.assert_array_equal(nt.unique_values(x).to_numpy(), expected_values)
    wide = nt.from_numpy(data, tile_shape=200)  # a span over a quarter of a tile: not counted
    assert sets._unique_by_histogram(wide) is None
