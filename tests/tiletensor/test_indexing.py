"""x[key], x[key] = value and take against NumPy and array_api_strict: basic keys (negative
steps, None, ...), boolean masks, integer arrays; the gradients of getitem and take against
NumPy's add.at; bad keys raise IndexError naming the index and the size."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import numtile as nt
from tests.tiletensor.test_array_api_hypothesis import SETTINGS, assert_same, retiled, strict, xps

xs = pytest.importorskip("array_api_strict")
SHAPES = xps.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5)


@SETTINGS
@given(data=st.data())
def test_basic_keys_match_array_api_strict(data):
    x = data.draw(retiled(data.draw(xps.arrays(xps.scalar_dtypes(), SHAPES))), label="x")
    key = data.draw(xps.indices(x.shape, allow_newaxis=True), label="key")
    assert_same(x[key], strict(x)[key], exact=True)


@SETTINGS
@given(data=st.data())
def test_basic_assignment_matches_numpy(data):
    array = data.draw(xps.arrays(xps.real_dtypes(), SHAPES))
    x = data.draw(retiled(array), label="x")
    key = data.draw(xps.indices(x.shape, allow_newaxis=True), label="key")
    expected = x.to_numpy()
    shape = expected[key].shape
    value = data.draw(xps.arrays(x.dtype, st.just(shape)), label="value")
    expected[key] = value.to_numpy()
    x[key] = value
    np.testing.assert_array_equal(x.to_numpy(), expected)


@SETTINGS
@given(data=st.data())
def test_boolean_masks_match_array_api_strict(data):
    x = data.draw(retiled(data.draw(xps.arrays(xps.scalar_dtypes(), SHAPES))), label="x")
    ndim = data.draw(st.integers(1, x.ndim), label="mask axes")
    mask = data.draw(xps.arrays(nt.bool, st.just(x.shape[:ndim])), label="mask")
    mask = data.draw(retiled(mask), label="tiled mask")
    assert_same(x[mask], strict(x)[strict(mask)], exact=True)
    if ndim == x.ndim and x.dtype.kind in "iuf":
        expected = x.to_numpy()
        expected[mask.to_numpy()] = 3
        x[mask] = 3
        np.testing.assert_array_equal(x.to_numpy(), expected)


@SETTINGS
@given(data=st.data())
def test_integer_array_keys_match_numpy(data):
    array = data.draw(xps.arrays(xps.real_dtypes(), SHAPES.filter(lambda s: 0 not in s)))
    x = data.draw(retiled(array), label="x")
    count = data.draw(st.integers(1, x.ndim), label="indexed axes")
    shape = data.draw(xps.array_shapes(min_dims=1, max_dims=2, max_side=4), label="key shape")
    key = tuple(
        data.draw(xps.arrays(nt.int64, st.just(shape), elements=st.integers(-s, s - 1))).to_numpy()
        for s in x.shape[:count]
    )
    expected = x.to_numpy()[key]
    np.testing.assert_array_equal(x[key].to_numpy(), expected)
    if count == 1:  # one array among slices: take along its axis
        axis = data.draw(st.integers(0, x.ndim - 1), label="axis")
        index = np.arange(x.shape[axis])[::-1].copy()
        slices = (slice(None),) * axis + (index,)
        np.testing.assert_array_equal(x[slices].to_numpy(), x.to_numpy()[slices])
        expected = xs.take(strict(x), xs.asarray(index), axis=axis)
        assert_same(nt.take(x, nt.asarray(index), axis=axis), expected)


def test_integer_array_assignment_keeps_the_last_duplicate():
    x = nt.zeros((4, 5), tile_shape=(3, 2))
    expected = np.zeros((4, 5))
    index = np.array([3, 0, 3, 1])
    x[:, index] = nt.from_numpy(np.arange(16.0).reshape(4, 4), tile_shape=(1, 3))
    expected[:, index] = np.arange(16.0).reshape(4, 4)
    x[np.array([0, 2]), np.array([4, 4])] = 7.0
    expected[np.array([0, 2]), np.array([4, 4])] = 7.0
    np.testing.assert_array_equal(x.to_numpy(), expected)


@pytest.mark.parametrize(
    ("shape", "tile_shape", "mask_tiles"),
    [((9, 13), (4, 5), (4, 5)), ((5, 6, 7), (2, 4, 7), (3, 6, 2)), ((4, 6, 5), (3, 6, 2), None)],
)
def test_whole_masks_of_tiles_cut_after_the_first_axis(shape, tile_shape, mask_tiles):
    # each tile's lines interleave with other tiles' in C order; the output spans several tiles
    data = np.random.default_rng(4).standard_normal(shape)
    mask = data > 0.2
    try:
        nt.init(tile_1d=7)
        x = nt.from_numpy(data, tile_shape=tile_shape)
        key = mask if mask_tiles is None else nt.from_numpy(mask, tile_shape=mask_tiles)
        np.testing.assert_array_equal(x[key].to_numpy(), data[mask])
        assert x[x > 9].shape == (0,)
    finally:
        nt.init()


@pytest.mark.parametrize(("shape", "tile_shape"), [((0, 2), (1, 1)), ((2, 0, 3), (1, 1, 2))])
def test_whole_masks_of_empty_tensors_cut_after_the_first_axis(shape, tile_shape):
    # no tiles at all: the masked selection is empty, as array_api_strict's
    x = nt.from_numpy(np.zeros(shape), tile_shape=tile_shape)
    mask = nt.from_numpy(np.zeros(shape, bool), tile_shape=(1,) * len(shape))
    expected = xs.asarray(np.zeros(shape))[xs.asarray(np.zeros(shape, bool))]
    assert_same(x[mask], expected, exact=True)


def test_mask_of_leading_axes_and_tensor_values():
    data = np.arange(24.0).reshape(4, 3, 2)
    x = nt.from_numpy(data, tile_shape=(3, 2, 1))
    mask = np.array([True, False, True, True])
    np.testing.assert_array_equal(x[nt.from_numpy(mask)].to_numpy(), data[mask])
    np.testing.assert_array_equal(
        x[:, [True, False, True]].to_numpy(), data[:, [True, False, True]]
    )
    full = data > 10
    x[nt.from_numpy(full)] = nt.arange(float(full.sum()))
    data[full] = np.arange(float(full.sum()))
    np.testing.assert_array_equal(x.to_numpy(), data)


def test_bad_keys_raise_index_errors_naming_the_index():
    x = nt.ones((3, 4), tile_shape=(2, 2))
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 1 with size 4"):
        x[:, [0, 5]]
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 0 with size 3"):
        x[-4]
    with pytest.raises(IndexError, match=r"boolean index of shape \(2,\)"):
        x[nt.ones(2, dtype="bool")]
    with pytest.raises(IndexError, match="out of bounds"):
        nt.take(x, nt.asarray([3]), axis=0)
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="integer or boolean"):
        x[np.array([0.5])]
    with pytest.raises(IndexError, match="out of bounds"):
        x[3] = 1.0


def test_gradients_of_getitem_and_take_scatter_add_like_numpy_add_at():
    data = np.random.default_rng(0).standard_normal((5, 4))
    keys = [
        (slice(1, None, 2), slice(None, None, -1)),
        (np.array([0, 3, 0]),),
        (slice(None), np.array([1, 1, 2])),
        (data > 0,),
        (np.array([4, 4, 1]), np.array([0, 0, 3])),
        (None, 2, slice(None, 1)),
    ]
    for key in keys:
        x = nt.from_numpy(data, tile_shape=(2, 3)).requires_grad_()
        weights = np.random.default_rng(1).standard_normal(data[key].shape)
        nt.sum(x[key] * nt.from_numpy(weights)).backward()
        expected = np.zeros_like(data)
        np.add.at(expected, key, weights)
        np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=1e-12)
        assert x.grad.tile_shape == (2, 3)
    x = nt.from_numpy(data, tile_shape=(2, 3)).requires_grad_()
    nt.sum(nt.take(x, nt.asarray([2, 2, 0]), axis=1)).backward()
    expected = np.zeros_like(data)
    np.add.at(expected, (slice(None), [2, 2, 0]), 1.0)
    np.testing.assert_array_equal(x.grad.to_numpy(), expected)


def test_setitem_of_a_tensor_that_requires_grad_refuses():
    x = nt.ones((2, 2)).requires_grad_()
    with pytest.raises(nt.NoGradientError, match="__setitem__"):
        x[0] = 2.0


def test_assignment_is_ordered_after_earlier_reads():
    x = nt.from_numpy(np.arange(8.0), tile_shape=3)
    y = x * 1.0
    x[2:6] = 0.0
    z = x + 1.0
    np.testing.assert_array_equal(y.to_numpy(), np.arange(8.0))
    np.testing.assert_array_equal(z.to_numpy(), [1, 2, 1, 1, 1, 1, 7, 8])
