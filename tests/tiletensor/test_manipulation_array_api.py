"""Differential tests of the array API's manipulation functions (numtile/tiletensor/joining.py,
rearranging.py, manipulation.py) against ``array_api_strict``, with inputs drawn by hypothesis's
array API strategies over numtile: dtype x shape x tile shape (tiles that divide nothing,
one-element tiles, empty and 0-d arrays), several inputs tiled differently from each other."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import numtile as nt
from tests.tiletensor.test_array_api_hypothesis import SETTINGS, assert_same, retiled, strict, xps

xs = pytest.importorskip("array_api_strict")

SHAPES = xps.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
NONEMPTY_DIMS = xps.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4)


def _arrays(draw, dtype, shape):
    return draw(retiled(draw(xps.arrays(dtype, shape))))


@SETTINGS
@given(data=st.data())
def test_concat(data):
    shape = data.draw(NONEMPTY_DIMS, label="shape")
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1), label="axis")
    dtype = data.draw(xps.scalar_dtypes(), label="dtype")
    tensors = []
    for _ in range(data.draw(st.integers(1, 3), label="count")):
        this = list(shape)
        if axis is not None:
            this[axis] = data.draw(st.integers(0, 4))
        tensors.append(_arrays(data.draw, dtype, tuple(this)))
    expected = xs.concat([strict(t) for t in tensors], axis=axis)
    assert_same(nt.concat(tensors, axis=axis), expected, exact=True)


@SETTINGS
@given(data=st.data())
def test_concat_promotes_mixed_dtypes(data):
    x = _arrays(data.draw, data.draw(xps.integer_dtypes()), (3, 2))
    y = _arrays(data.draw, data.draw(xps.floating_dtypes()), (1, 2))
    expected = np.concatenate([x.to_numpy(), y.to_numpy()])
    assert_same(nt.concat([x, y]), expected, exact=True)


@SETTINGS
@given(data=st.data())
def test_stack_and_unstack(data):
    shape = data.draw(SHAPES, label="shape")
    dtype = data.draw(xps.scalar_dtypes(), label="dtype")
    tensors = [_arrays(data.draw, dtype, shape) for _ in range(data.draw(st.integers(1, 3)))]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)), label="axis")
    stacked = nt.stack(tensors, axis=axis)
    assert_same(stacked, xs.stack([strict(t) for t in tensors], axis=axis), exact=True)
    axis = data.draw(st.integers(-stacked.ndim, stacked.ndim - 1), label="unstack axis")
    ours, theirs = nt.unstack(stacked, axis=axis), xs.unstack(strict(stacked), axis=axis)
    assert isinstance(ours, tuple) and len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert_same(a, b, exact=True)


@st.composite
def axes_of(draw, ndim, allow_none=True):
    """None, one axis (negative too) or a tuple of distinct axes."""
    choices = st.lists(st.integers(-ndim, ndim - 1), unique_by=lambda a: a % ndim, max_size=ndim)
    options = st.integers(-ndim, ndim - 1) | choices.map(tuple) if ndim else st.just(())
    return draw(st.none() | options if allow_none else options)


@SETTINGS
@given(data=st.data())
def test_flip(data):
    x = _arrays(data.draw, data.draw(xps.scalar_dtypes()), data.draw(SHAPES))
    axis = data.draw(axes_of(x.ndim), label="axis")
    assert_same(nt.flip(x, axis=axis), xs.flip(strict(x), axis=axis), exact=True)


@SETTINGS
@given(data=st.data())
def test_roll(data):
    x = _arrays(data.draw, data.draw(xps.scalar_dtypes()), data.draw(SHAPES))
    axis = data.draw(axes_of(x.ndim), label="axis")
    axis = None if axis == () else axis  # NumPy refuses an empty tuple of shifts
    if isinstance(axis, tuple):
        shift = tuple(data.draw(st.integers(-9, 9)) for _ in axis)
    else:
        shift = data.draw(st.integers(-9, 9), label="shift")
    assert_same(nt.roll(x, shift, axis=axis), xs.roll(strict(x), shift, axis=axis), exact=True)


@SETTINGS
@given(data=st.data())
def test_moveaxis_permute_dims_expand_dims_squeeze(data):
    x = _arrays(data.draw, data.draw(xps.scalar_dtypes()), data.draw(NONEMPTY_DIMS))
    source = data.draw(axes_of(x.ndim, allow_none=False), label="source")
    count = 1 if isinstance(source, int) else len(source)
    destination = data.draw(st.permutations(range(x.ndim)).map(lambda p: tuple(p[:count])))
    if isinstance(source, int):
        destination = destination[0]
    expected = xs.moveaxis(strict(x), source, destination)
    assert_same(nt.moveaxis(x, source, destination), expected, exact=True)
    axes = tuple(data.draw(st.permutations(range(x.ndim)), label="axes"))
    assert_same(nt.permute_dims(x, axes), xs.permute_dims(strict(x), axes), exact=True)
    axis = data.draw(st.integers(-x.ndim - 1, x.ndim), label="expand axis")
    expanded = nt.expand_dims(x, axis)
    assert_same(expanded, xs.expand_dims(strict(x), axis=axis), exact=True)
    assert_same(nt.squeeze(expanded, axis), xs.squeeze(strict(expanded), axis=axis), exact=True)


@SETTINGS
@given(data=st.data())
def test_broadcast_to_and_broadcast_arrays(data):
    shapes = data.draw(xps.mutually_broadcastable_shapes(3, max_dims=3, max_side=4))
    dtype = data.draw(xps.scalar_dtypes(), label="dtype")
    tensors = [_arrays(data.draw, dtype, s) for s in shapes.input_shapes]
    ours = nt.broadcast_arrays(*tensors)
    theirs = xs.broadcast_arrays(*(strict(t) for t in tensors))
    for a, b in zip(ours, theirs, strict=True):
        assert_same(a, b, exact=True)
    expected = xs.broadcast_to(strict(tensors[0]), shapes.result_shape)
    assert_same(nt.broadcast_to(tensors[0], shapes.result_shape), expected, exact=True)


@SETTINGS
@given(data=st.data())
def test_tile(data):
    x = _arrays(data.draw, data.draw(xps.scalar_dtypes()), data.draw(SHAPES))
    repetitions = tuple(data.draw(st.lists(st.integers(0, 3), max_size=4), label="repetitions"))
    assert_same(nt.tile(x, repetitions), xs.tile(strict(x), repetitions), exact=True)


@SETTINGS
@given(data=st.data())
def test_repeat(data):
    x = _arrays(data.draw, data.draw(xps.scalar_dtypes()), data.draw(SHAPES))
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1) if x.ndim else st.none())
    length = x.size if axis is None else x.shape[axis]
    counts = st.lists(st.integers(0, 3), min_size=length, max_size=length)
    repeats = data.draw(st.integers(0, 3) | counts.map(lambda c: nt.asarray(c, dtype=nt.int64)))
    their_repeats = strict(repeats) if isinstance(repeats, nt.TileTensor) else repeats
    expected = xs.repeat(strict(x), their_repeats, axis=axis)
    assert_same(nt.repeat(x, repeats, axis=axis), expected, exact=True)


@st.composite
def _factorization(draw, size):
    """A shape whose product is ``size``, with length-1 axes mixed in."""
    shape, rest = [], size
    while rest > 1:
        factor = draw(st.sampled_from([d for d in range(2, rest + 1) if rest % d == 0]))
        shape.append(factor)
        rest //= factor
        if draw(st.booleans()):
            shape.append(1)
    return tuple(shape) if size else (0, *shape)


@SETTINGS
@given(data=st.data())
def test_reshape_always_works(data):
    x = _arrays(data.draw, data.draw(xps.scalar_dtypes()), data.draw(SHAPES))
    shape = data.draw(_factorization(x.size), label="shape")
    assert_same(nt.reshape(x, shape), xs.reshape(strict(x), shape), exact=True)
    assert_same(nt.reshape(x, (-1,)), xs.reshape(strict(x), (-1,)), exact=True)


# --- bad input: NumPy's errors, naming the values --------------------------------------------


def test_concat_bad_input_names_the_values():
    x, y = nt.ones((2, 3)), nt.ones((2, 4))
    with pytest.raises(ValueError, match="along dimension 1, the array at index 0 has size 3"):
        nt.concat([x, y])
    with pytest.raises(ValueError, match="index 0 has 2 dimension.* index 1 has 1"):
        nt.concat([x, nt.ones(3)])
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds for array of"):
        nt.concat([x, x], axis=2)
    with pytest.raises(ValueError, match="zero-dimensional"):
        nt.concat([nt.asarray(1.0)])
    with pytest.raises(TypeError, match="sequence of TileTensors"):
        nt.concat(x)
    with pytest.raises(TypeError, match="index 1 is a ndarray"):
        nt.concat([x, np.ones((2, 3))])
    with pytest.raises(ValueError, match="at least one"):
        nt.concat([])


def test_manipulation_bad_input_names_the_values():
    x = nt.ones((2, 3))
    with pytest.raises(ValueError, match=r"same shape, got \(2, 3\) and \(3, 2\)"):
        nt.stack([x, nt.ones((3, 2))])
    with pytest.raises(np.exceptions.AxisError, match="axis -3"):
        nt.flip(x, axis=-3)
    with pytest.raises(ValueError, match="repeated axis"):
        nt.flip(x, axis=(0, -2))
    with pytest.raises(ValueError, match="same length"):
        nt.roll(x, (1, 2), axis=0)
    with pytest.raises(ValueError, match="same number of elements"):
        nt.moveaxis(x, (0, 1), 0)
    with pytest.raises(ValueError, match=r"repeats has 2 values for an axis of length 3"):
        nt.repeat(x, [1, 2], axis=1)
    with pytest.raises(ValueError, match=r"must not be negative, got \[1, -1, 0\]"):
        nt.repeat(x, [1, -1, 0], axis=1)
    with pytest.raises(ValueError, match=r"must not be negative, got \(-1,\)"):
        nt.tile(x, (-1,))
    with pytest.raises(ValueError, match="0-d"):
        nt.unstack(nt.asarray(1.0))
    with pytest.raises(ValueError, match="shape mismatch"):
        nt.broadcast_arrays(x, nt.ones(4))
    with pytest.raises(ValueError, match=r"cannot reshape a tensor of shape \(2, 3\) into \(4,"):
        nt.reshape(x, (4, 2))


def test_reshape_copy_false_refuses_only_a_retile(check_tiles):
    x = nt.from_numpy(np.arange(12), tile_shape=4)
    check_tiles(nt.reshape(x, (3, 4), copy=False), np.arange(12).reshape(3, 4))
    with pytest.raises(ValueError, match=r"copy=False.*retile"):
        nt.reshape(x, (4, 3), copy=False)
    check_tiles(nt.reshape(x, (4, 3)), np.arange(12).reshape(4, 3))


@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_reshape_copy_true_to_the_same_shape_copies(shape):
    # copy=True must copy even when the shape does not change: writing the result leaves x
    data = np.arange(float(np.prod(shape))).reshape(shape) + 1
    x = nt.from_numpy(data, tile_shape=(1, 2)[: len(shape)])
    y = nt.reshape(x, shape, copy=True)
    assert y is not x
    y[...] = 0.0
    np.testing.assert_array_equal(x.to_numpy(), data)
    assert_same(y, xs.zeros(shape), exact=True)


def test_mismatched_tilings_join_without_a_retile(check_tiles):
    a, b = np.arange(35.0).reshape(5, 7), -np.arange(14.0).reshape(2, 7)
    x, y = nt.from_numpy(a, tile_shape=(2, 3)), nt.from_numpy(b, tile_shape=(1, 5))
    out = nt.concat([x, y])
    assert out.tile_shape == (2, 3)
    check_tiles(out, np.concatenate([a, b]))
    check_tiles(nt.stack([x[:2], y], axis=2), np.stack([a[:2], b], axis=2))
