"""Tests for numtile/tiletensor/layout.py: grid, leftover tiles, bounds and validation."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numtile import Layout
from numtile.config import Config
from numtile.tiletensor.layout import default_tile_shape


@pytest.mark.parametrize(
    "shape, tile_shape, grid, last_tile",
    [
        ((5, 4), (2, 4), (3, 1), (1, 4)),
        ((6, 6), (3, 2), (2, 3), (3, 2)),  # tiles divide the shape
        ((7,), (3,), (3,), (1,)),
        ((7, 5, 3), (7, 5, 3), (1, 1, 1), (7, 5, 3)),  # one tile
        ((3, 4), (1, 1), (3, 4), (1, 1)),  # tiles of one element
        ((2, 3), (10, 10), (1, 1), (2, 3)),  # tile larger than the shape
        ((), (), (), ()),  # 0-d: one tile of one element
    ],
)
def test_grid_and_leftover_tiles(shape, tile_shape, grid, last_tile):
    layout = Layout(shape, tile_shape)
    assert layout.shape == shape
    assert layout.grid == grid
    assert layout.ndim == len(shape)
    assert layout.ntiles == int(np.prod(grid))
    assert layout.size == int(np.prod(shape))
    assert layout.tile_shape_at(tuple(g - 1 for g in grid)) == last_tile
    assert layout.tile_shapes()[-1] == last_tile
    assert len(layout.tile_shapes()) == layout.ntiles


def test_tile_bounds_cover_the_shape_exactly_once():
    layout = Layout((7, 5), (3, 2))
    covered = np.zeros((7, 5), int)
    for index in layout.indices():
        (r0, r1), (c0, c1) = layout.tile_bounds(index)
        assert (r1 - r0, c1 - c0) == layout.tile_shape_at(index)
        covered[r0:r1, c0:c1] += 1
    assert (covered == 1).all()
    assert layout.tile_bounds((2, 2)) == ((6, 7), (4, 5))
    assert layout.tile_bounds((1, 0)) == ((3, 6), (0, 2))
    assert layout.tile_sizes(0) == (3, 3, 1)
    assert layout.tile_sizes(1) == (2, 2, 1)


def test_indices_are_c_ordered():
    layout = Layout((4, 6, 2), (3, 4, 1))
    assert list(layout.indices()) == list(itertools.product(range(2), range(2), range(2)))


@pytest.mark.parametrize("position, tile", [(0, 0), (2, 0), (3, 1), (6, 2)])
def test_tile_of(position, tile):
    assert Layout((7,), (3,)).tile_of(0, position) == tile


@pytest.mark.parametrize("whole", [None, -1])
def test_none_or_minus_one_means_the_whole_axis(whole):
    layout = Layout((5, 7), (2, whole))
    assert layout.tile_shape == (2, 7)
    assert layout.grid == (3, 1)


def test_whole_axis_of_length_zero_gets_tile_one():
    layout = Layout((0, 3), (None, 2))
    assert layout.tile_shape == (1, 2)
    assert layout.grid == (0, 2)
    assert layout.ntiles == 0
    assert list(layout.indices()) == []


def test_int_shape_and_tile_shape():
    layout = Layout(10, 4)
    assert layout.shape == (10,) and layout.tile_shape == (4,) and layout.grid == (3,)


def test_numpy_integers_are_accepted():
    layout = Layout((np.int64(6), np.int32(4)), (np.int64(4), 3))
    assert layout.shape == (6, 4) and layout.tile_shape == (4, 3)
    assert all(type(s) is int for s in layout.shape + layout.tile_shape)


def test_default_tile_shape_is_capped_by_the_shape():
    config = Config.defaults()
    layout = Layout((3, 5))
    assert layout.tile_shape == (min(3, config.tile), min(5, config.tile))
    assert Layout((0, 2)).tile_shape == (1, 2)  # tiles are at least 1 even on empty axes


def test_equality_and_hash_depend_on_shape_and_tiles():
    assert Layout((4, 4), (2, 2)) == Layout([4, 4], [2, 2])
    assert hash(Layout((4, 4), (2, 2))) == hash(Layout((4, 4), (2, 2)))
    assert Layout((4, 4), (2, 2)) != Layout((4, 4), (2, 4))
    assert Layout((4, 4), (2, 2)) != Layout((4, 5), (2, 2))
    assert Layout((4, 4), (2, 2)) != (4, 4)


def test_repr_names_shape_tiles_and_grid():
    text = repr(Layout((5, 4), (2, 4)))
    assert "(5, 4)" in text and "(2, 4)" in text and "(3, 1)" in text


@pytest.mark.parametrize(
    "shape, tile_shape",
    [((4, 4), (2,)), ((4,), (2, 2)), ((), (1,)), ((3, 3, 3), (1, 1))],
)
def test_rank_mismatch_is_a_value_error(shape, tile_shape):
    with pytest.raises(ValueError, match="rank"):
        Layout(shape, tile_shape)


@pytest.mark.parametrize("tile_shape", [(0, 2), (2, -2), (-3, 1)])
def test_zero_or_negative_tile_is_a_value_error(tile_shape):
    with pytest.raises(ValueError, match="positive"):
        Layout((4, 4), tile_shape)


def test_negative_shape_is_a_value_error():
    with pytest.raises(ValueError, match="negative"):
        Layout((3, -1), (1, 1))


@pytest.mark.parametrize("bad", [(2.5, 2), ("a", 2)])
def test_non_integer_tile_shape_is_a_type_error(bad):
    with pytest.raises(TypeError, match="integers"):
        Layout((4, 4), bad)


def test_non_integer_shape_is_a_type_error():
    with pytest.raises(TypeError, match="integers"):
        Layout((4.0, 4), (2, 2))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(1, 10)), min_size=0, max_size=4))
def test_tiles_partition_any_shape(dims):
    shape = tuple(s for s, _ in dims)
    tile_shape = tuple(t for _, t in dims)
    layout = Layout(shape, tile_shape)
    counts = np.zeros(shape, int)
    for index, tile in zip(layout.indices(), layout.tile_shapes(), strict=True):
        bounds = layout.tile_bounds(index)
        assert tile == tuple(b - a for a, b in bounds)
        assert all(1 <= b - a <= t for (a, b), t in zip(bounds, tile_shape, strict=True))
        counts[tuple(slice(a, b) for a, b in bounds)] += 1
    assert (counts == 1).all()


def test_default_tiles_come_from_the_running_runtime():
    import numtile as nt

    try:
        nt.init(tile=64, tile_1d=100)
        assert nt.zeros((200, 200)).tile_shape == (64, 64)
        assert nt.ones((50, 300, 2)).tile_shape == (50, 64, 2)
        assert nt.zeros((1000,)).tile_shape == (100,)
        assert nt.random.normal(size=(130, 7)).tile_shape == (64, 7)
        assert nt.arange(250).grid == (3,)
        nt.init(tile=32)
        assert nt.full((100, 100), 1.0).tile_shape == (32, 32)  # read at creation, not import
    finally:
        nt.init()
    assert nt.zeros((200, 200)).tile_shape == default_tile_shape((200, 200))
