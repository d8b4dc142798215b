"""Tests for numtile/tiletensor/manipulation.py: transpose, reshape, retile and indexing."""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numtile as nt

HYPOTHESIS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _tensor(shape, tile_shape, make_array, dtype=np.float64, seed=0):
    a = make_array(shape, dtype, seed=seed)
    return a, nt.from_numpy(a, tile_shape=tile_shape)


# --- permute_dims / transpose --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
@pytest.mark.parametrize("tile_shape", [(2, 3, 2), (3, 4, 5), (1, 1, 1)])
@pytest.mark.parametrize("axes", list(itertools.permutations(range(3))))
def test_permute_dims(axes, tile_shape, dtype, make_array, check_tiles):
    a, x = _tensor((3, 4, 5), tile_shape, make_array, dtype)
    out = nt.permute_dims(x, axes)
    assert out.tile_shape == tuple(tile_shape[i] for i in axes)
    check_tiles(out, np.transpose(a, axes))
    check_tiles(x.permute_dims(axes), np.transpose(a, axes))


def test_permute_dims_accepts_negative_axes(make_array, check_tiles):
    a, x = _tensor((3, 4, 5), (2, 3, 2), make_array)
    check_tiles(nt.permute_dims(x, (-1, 0, -2)), np.transpose(a, (2, 0, 1)))


@pytest.mark.parametrize("tile_shape", [(2, 3), (5, 7), (1, 1)])
def test_transpose_t_and_mt(tile_shape, make_array, check_tiles):
    a, x = _tensor((5, 7), tile_shape, make_array)
    check_tiles(x.T, a.T)
    check_tiles(x.mT, a.T)
    check_tiles(x.transpose(), a.T)
    check_tiles(nt.matrix_transpose(x), a.T)


def test_transpose_with_axes_and_batched_mt(make_array, check_tiles):
    a, x = _tensor((2, 3, 4), (1, 2, 3), make_array)
    check_tiles(x.transpose(), a.transpose())
    check_tiles(x.transpose(1, 0, 2), a.transpose(1, 0, 2))
    check_tiles(x.transpose((2, 0, 1)), a.transpose((2, 0, 1)))
    check_tiles(x.mT, np.swapaxes(a, -1, -2))


def test_transpose_of_1d_and_0d_is_the_same_values(make_array, check_tiles):
    a, x = _tensor((5,), (2,), make_array)
    check_tiles(x.transpose(), a)
    check_tiles(nt.from_numpy(np.float64(3.0)).transpose(), np.float64(3.0))


def test_transpose_errors(make_array):
    _, x = _tensor((2, 3, 4), (1, 2, 3), make_array)
    with pytest.raises(ValueError, match="2-d"):
        _ = x.T
    with pytest.raises(ValueError, match="at least 2 axes"):
        _ = nt.ones((3,)).mT
    with pytest.raises(ValueError, match="permutation"):
        nt.permute_dims(x, (0, 1, 1))
    with pytest.raises(ValueError, match="permutation"):
        nt.permute_dims(x, (0, 1))


def test_permute_dims_error_names_the_given_axes():
    with pytest.raises(ValueError, match=r"\(0, 1, 2\)"):
        nt.permute_dims(nt.ones((2, 3)), (0, 1, 2))


# --- retile --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.bool_])
@pytest.mark.parametrize(
    "old, new",
    [((2, 3), (3, 2)), ((2, 3), (5, 7)), ((5, 7), (1, 1)), ((1, 1), (4, 6)), ((4, 4), (2, None))],
)
def test_retile(old, new, dtype, make_array, check_tiles):
    a, x = _tensor((5, 7), old, make_array, dtype)
    out = x.retile(new)
    assert out.tile_shape == tuple(7 if t is None else t for t in new)
    check_tiles(out, a)
    check_tiles(nt.retile(x, new), a)


def test_retile_to_the_same_tiles_returns_the_tensor(make_array):
    _, x = _tensor((5, 7), (2, 3), make_array)
    assert x.retile((2, 3)) is x


def test_retile_0d_and_empty(check_tiles):
    check_tiles(nt.from_numpy(np.float64(2.0)).retile(()), np.float64(2.0))
    check_tiles(nt.zeros((0, 4), tile_shape=(2, 2)).retile((3, 3)), np.zeros((0, 4)))


def test_retile_under_each_scheduler(scheduler, make_array, check_tiles):
    a, x = _tensor((9, 8), (4, 3), make_array)
    check_tiles(x.retile((2, 5)), a)


@pytest.mark.parametrize(
    "bad, error", [((0, 2), ValueError), ((2,), ValueError), ((2.0, 2), TypeError)]
)
def test_retile_errors(bad, error, make_array):
    _, x = _tensor((5, 7), (2, 3), make_array)
    with pytest.raises(error):
        x.retile(bad)


@HYPOTHESIS
@given(data=st.data())
def test_retile_any_shape_to_any_tiling(data, make_array, check_tiles):
    shape = tuple(data.draw(st.lists(st.integers(1, 7), min_size=1, max_size=3), label="shape"))
    old = tuple(data.draw(st.integers(1, s + 1)) for s in shape)
    new = tuple(data.draw(st.integers(1, s + 1)) for s in shape)
    a, x = _tensor(shape, old, make_array, seed=3)
    check_tiles(x.retile(new), a)


# --- reshape, expand_dims, squeeze ---------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, tile_shape, new_shape, new_tiles",
    [
        ((12,), (4,), (3, 4), (1, 4)),
        ((12,), (4,), (6, 2), (2, 2)),
        ((12,), (12,), (2, 2, 3), (2, 2, 3)),  # one tile stays one tile
        ((4, 6), (2, 6), (24,), (12,)),
        ((4, 6), (2, 6), (-1,), (12,)),
        ((4, 6), (2, 6), (2, 2, 6), (1, 2, 6)),
        ((4, 6), (2, 3), (4, 2, 3), (2, 1, 3)),
        ((4, 6), (4, 6), (6, 4), (6, 4)),
        ((3, 4, 5), (1, 4, 5), (3, 20), (1, 20)),
        ((3, 4, 5), (2, 4, 2), (12, 5), (8, 2)),
        ((2, 3), (1, 2), (1, 2, 1, 3, 1), (1, 1, 1, 2, 1)),  # inserting length-1 axes
        ((1, 5, 1), (1, 2, 1), (5,), (2,)),  # removing them
        ((1, 1), (1, 1), (), ()),
        ((), (), (1, 1), (1, 1)),
    ],
)
def test_reshape_where_tiling_allows(
    shape, tile_shape, new_shape, new_tiles, make_array, check_tiles
):
    a, x = _tensor(shape, tile_shape, make_array)
    out = x.reshape(new_shape)
    assert out.tile_shape == new_tiles
    check_tiles(out, a.reshape(new_shape))
    check_tiles(nt.reshape(x, new_shape), a.reshape(new_shape))


@pytest.mark.parametrize(
    "shape, tile_shape, new_shape, new_tiles",
    [
        ((12,), (1,), (3, 4), (1, 1)),
        ((3, 4), (1, 2), (12,), (2,)),
        ((2, 6), (1, 3), (4, 3), (1, 3)),
    ],
)
def test_reshape_with_tiles_of_one_on_leading_axes(
    shape, tile_shape, new_shape, new_tiles, make_array, check_tiles
):
    a, x = _tensor(shape, tile_shape, make_array)
    out = x.reshape(new_shape)
    assert out.tile_shape == new_tiles
    check_tiles(out, a.reshape(new_shape))


def test_reshape_method_takes_separate_ints(make_array, check_tiles):
    a, x = _tensor((12,), (4,), make_array)
    check_tiles(x.reshape(3, 4), a.reshape(3, 4))
    check_tiles(x.reshape(-1, 4), a.reshape(-1, 4))


def test_reshape_to_the_same_shape_returns_the_tensor(make_array):
    _, x = _tensor((4, 6), (2, 3), make_array)
    assert x.reshape((4, 6)) is x


def test_reshape_of_an_empty_tensor(check_tiles):
    check_tiles(nt.zeros((0, 6), tile_shape=(2, 4)).reshape((3, 0, 2)), np.zeros((3, 0, 2)))


@pytest.mark.parametrize(
    "shape, tile_shape, new_shape",
    [
        ((12,), (4,), (4, 3)),
        ((12,), (4,), (2, 6)),
        ((4, 6), (2, 3), (24,)),
        ((4, 6), (2, 3), (4, 3, 2)),
        ((4, 6), (3, 6), (6, 4)),
    ],
)
def test_reshape_the_tiling_forbids_retiles_or_explains_itself_with_copy_false(
    shape, tile_shape, new_shape, make_array, check_tiles
):
    a, x = _tensor(shape, tile_shape, make_array)
    with pytest.raises(
        ValueError, match=r"cannot reshape .*tile_shape.*copy=False.*retile"
    ) as info:
        nt.reshape(x, new_shape, copy=False)
    assert str(shape) in str(info.value) and str(new_shape) in str(info.value)
    check_tiles(x.retile(shape).reshape(new_shape), a.reshape(new_shape))  # one tile always works
    check_tiles(x.reshape(new_shape), a.reshape(new_shape))  # array API: always works
    check_tiles(nt.reshape(x, new_shape, copy=True), a.reshape(new_shape))


@pytest.mark.parametrize("new_shape", [(5, 5), (7,), (-1, 5), (-1, -1), (0, -1)])
def test_reshape_to_a_wrong_size_is_a_value_error(new_shape):
    with pytest.raises(ValueError, match="reshape|-1"):
        nt.ones((4, 6), tile_shape=(2, 3)).reshape(new_shape)


@st.composite
def _factorization(draw, size):
    """A shape whose product is ``size`` (with some length-1 axes mixed in)."""
    shape, rest = [], size
    while rest > 1:
        divisors = [d for d in range(2, rest + 1) if rest % d == 0]
        factor = draw(st.sampled_from(divisors))
        shape.append(factor)
        rest //= factor
        if draw(st.integers(0, 3)) == 0:
            shape.append(1)
    return tuple(shape)


@HYPOTHESIS
@given(data=st.data())
def test_reshape_matches_numpy_and_copy_false_either_matches_or_explains(
    data, make_array, check_tiles
):
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3), label="shape"))
    tiles = tuple(data.draw(st.integers(1, s)) for s in shape)
    new_shape = data.draw(_factorization(int(np.prod(shape))), label="new_shape")
    a, x = _tensor(shape, tiles, make_array, seed=6)
    check_tiles(x.reshape(new_shape), a.reshape(new_shape))
    try:
        out = nt.reshape(x, new_shape, copy=False)
    except ValueError as error:
        assert "retile" in str(error) and tiles != shape  # a single tile always reshapes
        return
    check_tiles(out, a.reshape(new_shape))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_expand_dims(axis, make_array, check_tiles):
    a, x = _tensor((4, 6), (3, 4), make_array)
    out = nt.expand_dims(x, axis)
    check_tiles(out, np.expand_dims(a, axis))


def test_expand_dims_out_of_range_is_a_value_error():
    with pytest.raises(np.exceptions.AxisError, match="axis 3 is out of bounds"):
        nt.expand_dims(nt.ones((2, 3)), 3)
    with pytest.raises(np.exceptions.AxisError, match="axis -4 is out of bounds"):
        nt.expand_dims(nt.ones((2, 3)), -4)


@pytest.mark.parametrize("axis", [0, 2, (0, 2), -1, (-3, -1)])
def test_squeeze(axis, make_array, check_tiles):
    a, x = _tensor((1, 5, 1), (1, 2, 1), make_array)
    check_tiles(nt.squeeze(x, axis), np.squeeze(a, axis))


def test_squeeze_a_long_axis_is_a_value_error():
    with pytest.raises(ValueError, match="not 1"):
        nt.squeeze(nt.ones((1, 3, 1)), axis=1)


def test_squeeze_an_out_of_range_axis_is_an_error():
    with pytest.raises((ValueError, IndexError)):
        nt.squeeze(nt.ones((1, 3, 1)), axis=5)


# --- getitem -------------------------------------------------------------------------------------

KEYS = [
    1,
    -1,
    -5,
    (2, 3),
    (-1, -7),
    slice(None),
    slice(1, 4),
    slice(None, None, 2),
    slice(None, None, -1),
    slice(4, 0, -2),
    slice(-2, None),
    (slice(None), slice(1, 6, 3)),
    (slice(None, None, -2), slice(5, None, -3)),
    (1, slice(None, None, -1)),
    (slice(1, 3), 4),
    None,
    (None, 2),
    (slice(None), None, slice(2, 5)),
    Ellipsis,
    (Ellipsis, 3),
    (2, Ellipsis),
    (None, Ellipsis, None),
    (slice(2, 2),),  # empty
    (slice(10, 20),),  # empty, beyond the end
    (slice(-100, 100), slice(None, None, 100)),
    (),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
@pytest.mark.parametrize("tile_shape", [(2, 3), (5, 7), (1, 1), (4, 2)])
def test_getitem_matches_numpy(key, tile_shape, make_array, check_tiles):
    a, x = _tensor((5, 7), tile_shape, make_array)
    check_tiles(x[key], a[key])


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_getitem_keeps_the_dtype(dtype, make_array, check_tiles):
    a, x = _tensor((5, 7), (2, 3), make_array, dtype)
    check_tiles(x[1:, ::2], a[1:, ::2])
    check_tiles(x[3], a[3])


def test_getitem_on_3d_and_0d(make_array, check_tiles):
    a, x = _tensor((3, 4, 5), (2, 3, 2), make_array)
    check_tiles(x[..., 1], a[..., 1])
    check_tiles(x[1, ..., ::-2], a[1, ..., ::-2])
    check_tiles(x[:, None, 2:, -1], a[:, None, 2:, -1])
    check_tiles(x[2, 3, 4], a[2, 3, 4])
    z = nt.from_numpy(np.float64(4.0))
    check_tiles(z[()], np.float64(4.0))
    check_tiles(z[...], np.float64(4.0))
    check_tiles(z[None], np.array([4.0]))


def test_getitem_accepts_numpy_integers(make_array, check_tiles):
    a, x = _tensor((5, 7), (2, 3), make_array)
    check_tiles(x[np.int64(2), np.int32(-1)], a[2, -1])


@pytest.mark.parametrize(
    "key, tile_index",
    [
        ((slice(2, None), slice(3, None)), (1, 1)),
        ((slice(2, 4),), (1, 0)),
        ((slice(None), slice(6, None)), (0, 2)),  # the leftover column of tiles
        ((slice(4, 5), slice(3, 6)), (2, 1)),  # the leftover row of tiles
        ((Ellipsis, slice(0, 3)), (0, 0)),
    ],
)
def test_tile_aligned_slices_share_handles(key, tile_index, make_array, check_tiles):
    a, x = _tensor((5, 7), (2, 3), make_array)
    y = x[key]
    check_tiles(y, a[key])
    first = np.array(tile_index)
    for index in y.layout.indices():
        assert y.tile(index) is x.tile(tuple(first + index)), index
    assert y.handles[0] is x.handles[tile_index[0] * x.grid[1] + tile_index[1]]


def test_whole_slice_shares_every_handle(make_array):
    _, x = _tensor((5, 7), (2, 3), make_array)
    y = x[:]
    assert len(y.handles) == len(x.handles)
    assert all(a is b for a, b in zip(y.handles, x.handles, strict=True))


@pytest.mark.parametrize(
    "key",
    [slice(1, 3), slice(0, 3), slice(None, None, 2), slice(None, None, -1), 2],
    ids=repr,
)
def test_unaligned_indexing_copies(key, make_array, check_tiles):
    a, x = _tensor((5, 7), (2, 3), make_array)
    y = x[key]
    check_tiles(y, a[key])
    shared = {id(h) for h in x.handles}
    assert not any(id(h) in shared for h in y.handles)


@pytest.mark.parametrize(
    "key, error",
    [
        (5, IndexError),
        (-6, IndexError),
        ((0, 7), IndexError),
        ((0, 0, 0), IndexError),
        ((Ellipsis, Ellipsis), IndexError),
        (1.5, IndexError),  # NumPy's error for a key of no index type
        ("a", IndexError),
        ([0, 5], IndexError),  # integer-array keys (tests/tiletensor/test_indexing.py)
        (np.array([0, -6]), IndexError),
        ((True, 1.5), IndexError),  # x[True] itself is NumPy's new axis (test_indexing.py)
        ((slice(None), [7]), IndexError),
    ],
    ids=repr,
)
def test_bad_indices(key, error, make_array):
    _, x = _tensor((5, 7), (2, 3), make_array)
    with pytest.raises(error):
        x[key]


def test_indexing_with_a_float_tile_tensor_is_an_index_error(make_array):
    _, x = _tensor((5, 7), (2, 3), make_array)
    with pytest.raises(IndexError, match="integer or boolean"):
        x[nt.arange(2.0)]


def test_zero_slice_step_is_a_value_error(make_array):
    _, x = _tensor((5, 7), (2, 3), make_array)
    with pytest.raises(ValueError, match="zero"):
        x[::0]


def _slices(size):
    bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
    step = st.one_of(st.none(), st.integers(-4, 4).filter(lambda s: s != 0))
    return st.builds(slice, bound, bound, step)


@HYPOTHESIS
@given(data=st.data())
def test_getitem_any_slices_and_tilings(data, make_array, check_tiles):
    shape = tuple(data.draw(st.lists(st.integers(1, 7), min_size=1, max_size=3), label="shape"))
    tiles = tuple(data.draw(st.integers(1, s)) for s in shape)
    key = []
    for size in shape:
        key.append(data.draw(st.one_of(_slices(size), st.integers(-size, size - 1))))
    a, x = _tensor(shape, tiles, make_array, seed=4)
    key = tuple(key)
    check_tiles(x[key], a[key])
