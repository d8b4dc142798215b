"""Tests for numtile/tiletensor/random.py: tiling-independent, seeded random tensors."""

import numpy as np
import pytest

import numtile as nt

SHAPE = (7, 9)
TILINGS = [(2, 4), (7, 9), (1, 1), (3, 9), (7, 2)]


@pytest.mark.parametrize("make", ["uniform", "normal", "random"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_same_seed_same_values_whatever_the_tiling(make, dtype, check_tiles):
    function = getattr(nt.random, make)
    reference = function(size=SHAPE, seed=123, dtype=dtype, tile_shape=SHAPE).to_numpy()
    assert reference.dtype == dtype and reference.shape == SHAPE
    assert len(np.unique(reference)) == reference.size  # not a constant or a repeated tile
    for tile_shape in TILINGS:
        out = function(size=SHAPE, seed=123, dtype=dtype, tile_shape=tile_shape)
        assert out.tile_shape == tile_shape
        check_tiles(out, reference, rtol=0, atol=0)


def test_same_values_under_each_scheduler(scheduler):
    a = nt.random.normal(size=(6, 5), seed=9, tile_shape=(4, 2)).to_numpy()
    b = nt.random.normal(size=(6, 5), seed=9, tile_shape=(1, 5)).to_numpy()
    np.testing.assert_array_equal(a, b)


def test_float32_values_are_the_float64_values_rounded():
    a = nt.random.uniform(-1, 1, size=100, seed=4, dtype=np.float32).to_numpy()
    b = nt.random.uniform(-1, 1, size=100, seed=4, dtype=np.float64).to_numpy()
    np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("make", ["uniform", "normal"])
def test_different_seeds_differ(make):
    function = getattr(nt.random, make)
    a = function(size=(50,), seed=0, tile_shape=16).to_numpy()
    b = function(size=(50,), seed=1, tile_shape=16).to_numpy()
    assert not np.any(a == b)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.5


def test_unseeded_calls_draw_fresh_values():
    a = nt.random.uniform(size=(20,)).to_numpy()
    b = nt.random.uniform(size=(20,)).to_numpy()
    assert not np.any(a == b)


def test_seed_makes_the_unseeded_stream_reproducible():
    nt.random.seed(42)
    first = [nt.random.random((6,), tile_shape=4).to_numpy() for _ in range(3)]
    nt.random.seed(42)
    again = [nt.random.random((6,), tile_shape=(6,)).to_numpy() for _ in range(3)]
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[1])  # successive calls differ
    nt.random.seed(43)
    assert not np.any(nt.random.random((6,)).to_numpy() == first[0])


@pytest.mark.parametrize("low, high", [(0.0, 1.0), (-2.0, 3.0), (10, 10.5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniform_range_and_moments(low, high, dtype):
    x = nt.random.uniform(low, high, size=(40000,), seed=7, dtype=dtype, tile_shape=9000)
    values = x.to_numpy()
    assert values.dtype == dtype
    assert values.min() >= low and values.max() < high
    width = high - low
    assert values.min() < low + 0.01 * width and values.max() > high - 0.01 * width
    assert abs(values.mean() - (low + high) / 2) < 0.02 * width
    assert abs(values.var() - width**2 / 12) < 0.05 * width**2 / 12
    counts, _ = np.histogram(values, bins=10, range=(low, high))
    assert counts.min() > 0.9 * values.size / 10  # no hole anywhere in the range


def test_float32_uniform_never_returns_high():
    high = 2.0**20 + 1
    values = nt.random.uniform(2.0**20, high, size=1000, seed=0, dtype=np.float32).to_numpy()
    assert values.max() < high


@pytest.mark.parametrize("loc, scale", [(0.0, 1.0), (1.5, 2.0), (-3.0, 0.5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normal_mean_and_std(loc, scale, dtype):
    values = nt.random.normal(
        loc, scale, size=(200, 200), seed=11, dtype=dtype, tile_shape=(64, 48)
    ).to_numpy()
    assert values.dtype == dtype and np.isfinite(values).all()
    assert abs(values.mean() - loc) < 0.03 * scale
    assert abs(values.std() - scale) < 0.03 * scale
    inside = np.mean(np.abs(values - loc) < scale)
    assert abs(inside - 0.6827) < 0.02  # the bell shape, not just two moments


def test_degenerate_distributions_are_constant():
    np.testing.assert_array_equal(
        nt.random.normal(3.0, 0.0, size=5, seed=1).to_numpy(), np.full(5, 3.0)
    )
    np.testing.assert_array_equal(
        nt.random.uniform(2.0, 2.0, size=5, seed=1).to_numpy(), np.full(5, 2.0)
    )


def test_sizes_int_and_none():
    assert nt.random.uniform(size=4, seed=1).shape == (4,)
    scalar = nt.random.uniform(size=None, seed=1)
    assert scalar.shape == ()
    assert 0.0 <= scalar.item() < 1.0
    assert nt.random.normal(size=(0, 3), seed=1).to_numpy().shape == (0, 3)


def test_random_errors():
    with pytest.raises(TypeError, match="floating"):
        nt.random.uniform(size=4, dtype=np.int64)
    with pytest.raises(TypeError):
        nt.random.normal(size=4, dtype=np.longdouble)
    with pytest.raises(ValueError, match="low <= high"):
        nt.random.uniform(2.0, 1.0, size=4)
    with pytest.raises(ValueError, match="scale >= 0"):
        nt.random.normal(0.0, -1.0, size=4)
    with pytest.raises(ValueError, match="positive"):
        nt.random.uniform(size=(4,), tile_shape=(0,))
