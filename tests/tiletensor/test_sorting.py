"""sort, argsort, argmax, argmin, searchsorted against NumPy and array_api_strict, with inputs
drawn by hypothesis's array API strategies over dtype x shape x tile shape (tiles that divide
nothing, one-element tiles, empty arrays, NaNs and signed zeros)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import numtile as nt
from tests.tiletensor.test_array_api_hypothesis import SETTINGS, assert_same, retiled, strict, xps

xs = pytest.importorskip("array_api_strict")
SHAPES = xps.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=6)


@pytest.mark.parametrize("name", ["sort", "argsort"])
@SETTINGS
@given(data=st.data())
def test_sort_matches_array_api_strict(name, data):
    x = data.draw(retiled(data.draw(xps.arrays(xps.real_dtypes(), SHAPES))), label="x")
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    descending = data.draw(st.booleans(), label="descending")
    expected = getattr(xs, name)(strict(x), axis=axis, descending=descending)
    assert_same(getattr(nt, name)(x, axis=axis, descending=descending), expected, exact=True)


@pytest.mark.parametrize("workers", [1, 2, 5])
@pytest.mark.parametrize("shape", [(3, 1000), (1500,)])
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8])
def test_sort_of_many_tiles_is_numpy_stable_sort(dtype, shape, workers):
    # one group of tiles per worker: one run (cut into tiles), two (the last merge), five
    # (merges of pairs of runs first)
    nt.init(ncpu=workers)
    rng = np.random.default_rng(0)
    data = (rng.standard_normal(shape) * 50).astype(dtype)
    if dtype == np.float64:
        data[..., ::13] = np.nan
        data[..., ::17] = -0.0
    x = nt.from_numpy(data, tile_shape=(2, 37)[-len(shape) :])  # 28 or 41 tiles a row
    np.testing.assert_array_equal(nt.argsort(x).to_numpy(), np.argsort(data, kind="stable"))
    values = nt.sort(x).to_numpy()
    np.testing.assert_array_equal(values, np.sort(data, kind="stable"))
    np.testing.assert_array_equal(np.signbit(values), np.signbit(np.sort(data, kind="stable")))
    descending = nt.sort(x, descending=True).to_numpy()
    np.testing.assert_array_equal(
        descending, np.flip(np.sort(np.flip(data, -1), kind="stable"), -1)
    )
    nt.init()


def _stable_sort(data, axis, descending):
    """NumPy's stable sort along ``axis``, descending with equal elements in their order."""
    if not descending:
        return np.sort(data, axis, kind="stable")
    return np.flip(np.sort(np.flip(data, axis), axis, kind="stable"), axis)


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_merge_sort_of_numbers_is_numpy_stable_sort(dtype, workers):
    # values alone on 2 workers (two runs, the last merge into each output tile) or 3 (a merge
    # of a pair first), merged as numbers (``ops_cpu.merge_values``): output tiles of 700 that
    # do not divide 5000 (four chains each), of one element, one tile, none; 2-D along each
    # axis; NaNs of two payloads and zeros of both signs where they were, bit for bit (NumPy's
    # SIMD sort turns some -0.0 into +0.0 in small arrays, as in the groups of one-element
    # tiles here: the zeros are put back)
    nt.init(ncpu=workers)
    rng = np.random.default_rng(6)
    data = (rng.standard_normal(5000) * 1000).astype(dtype)
    if data.dtype.kind == "f":
        data[::29] = np.nan
        data[::58] = -np.float64(np.nan)  # another NaN bit pattern
        data[::17], data[::23] = -0.0, 0.0
    bits = f"u{data.itemsize}"
    cases = [(data, 700), (data[:50], 1), (data, 5000), (data[:0], 4)]
    cases += [(data[:4200].reshape(14, 300), (5, 130)), (data[:4200].reshape(300, 14), (130, 5))]
    for array, tile in cases:
        x = nt.from_numpy(array, tile_shape=tile)
        for axis in range(array.ndim):
            for descending in (False, True):
                got = nt.sort(x, axis=axis, descending=descending).to_numpy()
                expected = _stable_sort(array, axis, descending)
                np.testing.assert_array_equal(got.view(bits), expected.view(bits))
    nt.init()


def test_sort_refuses_complex_and_0d():
    with pytest.raises(TypeError, match="real dtypes"):
        nt.sort(nt.ones(3, dtype="complex64"))
    with pytest.raises(ValueError, match="at least one axis"):
        nt.argsort(nt.asarray(1.0))
    with pytest.raises(ValueError, match="out of bounds"):
        nt.sort(nt.ones(3), axis=1)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@SETTINGS
@given(data=st.data())
def test_argmax_argmin_match_array_api_strict(name, data):
    shapes = xps.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=5)
    x = data.draw(retiled(data.draw(xps.arrays(xps.real_dtypes(), shapes))), label="x")
    axis = data.draw(st.none() | st.integers(-max(x.ndim, 1), max(x.ndim, 1) - 1), label="axis")
    if x.ndim == 0 and axis is not None:
        axis = None
    keepdims = data.draw(st.booleans(), label="keepdims")
    expected = getattr(xs, name)(strict(x), axis=axis, keepdims=keepdims)
    assert_same(getattr(nt, name)(x, axis=axis, keepdims=keepdims), expected)


def test_argmax_takes_the_first_nan_and_the_first_tie():
    data = np.array([[1.0, 7.0, 7.0, np.nan, 2.0, np.nan], [3.0, 3.0, 1.0, 1.0, 3.0, 0.0]])
    x = nt.from_numpy(data, tile_shape=(1, 2))
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(nt.argmax(x, axis=axis).to_numpy(), np.argmax(data, axis))
        np.testing.assert_array_equal(nt.argmin(x, axis=axis).to_numpy(), np.argmin(data, axis))
    with pytest.raises(ValueError, match="empty axis"):
        nt.argmax(nt.ones((0, 3)), axis=0)


@pytest.mark.parametrize("dtype", [np.float64, np.int16])
def test_argmax_argmin_of_long_rows_in_tiles_that_divide_nothing(dtype):
    # the extremes tie within tiles, across tiles and across the kernel's row blocks (rows
    # longer than 256); NaNs in two tiles of one row
    data = np.random.default_rng(3).integers(-2, 3, (5, 700)).astype(dtype)
    if dtype == np.float64:
        data[1, [650, 290]] = np.nan
    x = nt.from_numpy(data, tile_shape=(2, 300))
    cube = nt.from_numpy(data.reshape(5, 7, 100), tile_shape=(2, 3, 60))
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(nt.argmax(x, axis=axis).to_numpy(), np.argmax(data, axis))
        np.testing.assert_array_equal(nt.argmin(x, axis=axis).to_numpy(), np.argmin(data, axis))
    np.testing.assert_array_equal(nt.argmax(cube).to_numpy(), np.argmax(data))
    np.testing.assert_array_equal(
        nt.argmin(cube, axis=1).to_numpy(), np.argmin(data.reshape(5, 7, 100), 1)
    )


@SETTINGS
@given(data=st.data())
def test_searchsorted_matches_numpy(data):
    dtype = data.draw(xps.real_dtypes(), label="dtype")
    x1 = np.sort(data.draw(xps.arrays(dtype, st.integers(0, 9))).to_numpy(), kind="stable")
    x2 = data.draw(retiled(data.draw(xps.arrays(dtype, SHAPES))), label="x2")
    side = data.draw(st.sampled_from(["left", "right"]), label="side")
    tile = data.draw(st.integers(1, 10), label="tile")
    ours = nt.searchsorted(nt.from_numpy(x1, tile_shape=tile), x2, side=side)
    np.testing.assert_array_equal(ours.to_numpy(), np.searchsorted(x1, x2.to_numpy(), side))
    assert ours.dtype == np.int64


def test_searchsorted_with_a_sorter():
    data = np.array([5.0, 1.0, 3.0, np.nan, 2.0])
    sorter = np.argsort(data)
    x2 = np.array([0.0, 2.5, 5.0, np.nan])
    ours = nt.searchsorted(
        nt.from_numpy(data, tile_shape=2), nt.from_numpy(x2), sorter=nt.from_numpy(sorter)
    )
    np.testing.assert_array_equal(ours.to_numpy(), np.searchsorted(data, x2, sorter=sorter))


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_value_split_sort_is_numpy_stable_sort(dtype, monkeypatch):
    # the sample sort of a long 1-D tensor (its size threshold lowered): buckets of value
    # ranges, NaNs of two payloads (last, first when descending) and signed zeros in order
    from numtile.tiletensor import sorting_split

    monkeypatch.setattr(sorting_split, "MIN_SIZE", 100)
    monkeypatch.setattr(sorting_split, "MIN_WORKERS_VALUES", 2)  # sort's own threshold: 4
    nt.init(ncpu=2)
    rng = np.random.default_rng(3)
    data = (rng.standard_normal(3000) * 1000).astype(dtype)
    if dtype == np.float64:
        data[::29] = np.nan
        data[::58] = -np.float64(np.nan)  # another NaN bit pattern
        data[::17], data[::23] = -0.0, 0.0
    x = nt.from_numpy(data, tile_shape=400)
    assert sorting_split.split_sort(x, False) is not None
    for descending in (False, True):
        flipped = np.flip(data) if descending else data
        expected = np.sort(flipped, kind="stable")
        expected = np.flip(expected) if descending else expected
        got = nt.sort(x, descending=descending).to_numpy()
        bits = f"u{got.itemsize}"  # NaN payloads and zero signs too
        np.testing.assert_array_equal(got.view(bits), expected.view(bits))
    # many equal values: buckets would be unbalanced, the merge sort runs instead
    few = nt.from_numpy(np.repeat(data[:3], 1000), tile_shape=400)
    assert sorting_split.split_sort(few, False) is None
    np.testing.assert_array_equal(nt.sort(few).to_numpy(), np.sort(np.repeat(data[:3], 1000)))
    # below the threshold, one tile: NumPy's sort of the group, NaN payloads put back
    got = nt.sort(nt.from_numpy(data[:99])).to_numpy()
    bits = f"u{got.itemsize}"
    np.testing.assert_array_equal(got.view(bits), np.sort(data[:99], kind="stable").view(bits))
    nt.init()


def _stable_descending_argsort(data):
    """NumPy's stable argsort, descending with equal elements in their original order."""
    return data.size - 1 - np.flip(np.argsort(np.flip(data), kind="stable"))


@pytest.mark.parametrize("sub_bucket", [16, 1 << 16])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.uint8])
def test_value_split_argsort_is_numpy_stable_argsort(dtype, sub_bucket, monkeypatch):
    # the sample sort carrying positions (its size threshold lowered), over tiles of 400 that
    # do not divide 3000, each bucket argsorted whole or in pieces of about 16: many ties (a
    # value every 7th element, 256 values of uint8), NaNs of two payloads and signed zeros,
    # ascending and descending; the values it sorts along with the indices (unique's path)
    # keep the payloads and signs in the order of the indices
    from numtile.tiletensor import sorting_split
    from numtile.tiletensor.codelets import sorting_split as split_codelets
    from numtile.tiletensor.sorting import sorted_with_indices

    monkeypatch.setattr(sorting_split, "MIN_SIZE", 100)
    monkeypatch.setattr(split_codelets, "SUB_BUCKET", sub_bucket)
    nt.init(ncpu=2)
    rng = np.random.default_rng(4)
    data = (rng.standard_normal(3000) * 1000).astype(dtype)
    data[::7] = data[3]
    if dtype in (np.float64, np.float32):
        data[::29] = np.nan
        data[::58] = -np.float64(np.nan)
        data[::17], data[::23] = -0.0, 0.0
    x = nt.from_numpy(data, tile_shape=400)
    assert sorting_split.split_sort(x, False, False, True) is not None
    bits = f"u{data.itemsize}"
    for descending in (False, True):
        expected = (
            _stable_descending_argsort(data) if descending else np.argsort(data, kind="stable")
        )
        np.testing.assert_array_equal(nt.argsort(x, descending=descending).to_numpy(), expected)
        values, indices = sorted_with_indices(x, 0, descending)
        np.testing.assert_array_equal(indices.to_numpy(), expected)
        np.testing.assert_array_equal(values.to_numpy().view(bits), data[expected].view(bits))
    nt.init()


@pytest.mark.parametrize("many_ties", [False, True])
@pytest.mark.parametrize("descending", [False, True])
def test_stable_order_puts_ties_in_position_order(descending, many_ties):
    # an unstable ascending order (runs of equal values, NaNs and zeros shuffled) made stable:
    # a few ties (runs reordered) or many (NumPy's stable argsort instead)
    from numtile.tiletensor.codelets.sorting_split import stable_order

    rng = np.random.default_rng(5)
    values = rng.integers(0, 5, 2000) if many_ties else rng.permutation(4000)[:2000]
    values = values.astype(np.float64)
    values[::290], values[::310], values[::370] = np.nan, -0.0, 0.0
    values[::410] = values[1]
    order = np.argsort(values, kind="stable")
    key = np.where(np.isnan(values), np.inf, values)[order]  # runs of equal keys, NaNs one run
    for value in np.unique(key):  # each run shuffled: an unstable sort's possible output
        run = np.flatnonzero(key == value)
        order[run] = rng.permutation(order[run])
    assert not np.array_equal(order, np.argsort(values, kind="stable"))
    expected = (
        _stable_descending_argsort(values) if descending else np.argsort(values, kind="stable")
    )
    np.testing.assert_array_equal(stable_order(values, order, descending), expected)
