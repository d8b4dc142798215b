"""var, std and cumulative_sum (numtile.tiletensor.statistics) against ``array_api_strict``
(hypothesis over dtype x shape x tile shape x axes x correction x keepdims x include_initial),
numerical stability against NumPy, and their gradients against PyTorch autograd (float64)."""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import numtile as nt
from numtile.ops_cuda import available as cuda_available
from numtile.runtime.codelet import REGISTRY
from tests.kernels import FAR_FROM_ZERO, exact_m2, far_from_zero
from tests.tiletensor.test_array_api_hypothesis import (
    SETTINGS,
    SHAPES,
    assert_same,
    axis_of,
    retiled,
    strict,
    xps,
    xs,
)


@pytest.mark.parametrize("name", ["var", "std"])
@SETTINGS
@given(data=st.data())
def test_var_and_std(name, data):
    dtype = data.draw(xps.floating_dtypes(), label="dtype")
    elements = {"min_value": -1e3, "max_value": 1e3, "allow_nan": False}
    x = data.draw(retiled(data.draw(xps.arrays(dtype, SHAPES, elements=elements))), label="x")
    axis = data.draw(axis_of(x.shape), label="axis")
    correction = data.draw(st.sampled_from([0, 1, 0.5]), label="correction")
    keepdims = data.draw(st.booleans(), label="keepdims")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = getattr(xs, name)(strict(x), axis=axis, correction=correction, keepdims=keepdims)
        ours = getattr(nt, name)(x, axis=axis, correction=correction, keepdims=keepdims)
        ours.wait()
    # the mean is summed tile by tile in any order: a few ulps of the data's magnitude
    expected = np.asarray(expected)
    assert str(ours.dtype) == str(expected.dtype) and ours.shape == expected.shape
    atol = 1e-3 if dtype == nt.float32 else 1e-9
    np.testing.assert_allclose(ours.to_numpy(), expected, rtol=1e-4, atol=atol, equal_nan=True)


def test_var_is_stable_for_a_large_offset():
    # sum(x^2) - n mean^2 loses every digit here; two passes keep them
    data = 1e9 + np.random.default_rng(0).standard_normal(10_000)
    x = nt.from_numpy(data, tile_shape=(999,))
    np.testing.assert_allclose(nt.var(x).item(), np.var(data), rtol=1e-9)


def _merges():
    return REGISTRY["moments_merge"].calls if "moments_merge" in REGISTRY else 0


def test_var_over_the_rows_of_a_row_tiled_matrix_merges_partial_moments():
    # one output tile: its 9 tiles go into partial moments in turn, merged at the end, so
    # the two workers run side by side
    data = 1e6 + np.random.default_rng(2).standard_normal((70, 5)) * np.arange(1, 6)
    nt.init(ncpu=2)
    try:
        before = _merges()
        x = nt.from_numpy(data, tile_shape=(8, 5))
        got = nt.var(x, axis=0, correction=1).to_numpy()
        assert _merges() > before
    finally:
        nt.init()
    np.testing.assert_allclose(got, np.var(data, axis=0, ddof=1), rtol=1e-9)


# tiles of rows, workers: one tile; four tiles into one running state; eight tiles in four
# partial chains merged at the end (one output tile, fewer than workers); the same on a GPU
# worker (CUDA simulator)
RUNS = {
    "one tile": (1200, {"ncpu": 1}),
    "four tiles": (300, {"ncpu": 1}),
    "partial chains": (150, {"ncpu": 2}),
    "gpu": (150, {"ncpu": 1, "ncuda": 1, "restrict": "cuda", "cuda_mem_limit": 1 << 16}),
}


@pytest.mark.parametrize("data", FAR_FROM_ZERO)
@pytest.mark.parametrize("run", RUNS)
def test_var_keeps_numpys_digits_far_from_zero(data, run):
    # measured at most 8e-16 (NumPy's var: 1.2e-15 for N(1e6, 1), 5e-10 for N(-1e8, 1e-2));
    # with the running mean unshifted: 2e-13 - 8e-12, and 4e-9 - 9e-8
    tile_rows, workers = RUNS[run]
    if "ncuda" in workers and not cuda_available():
        pytest.skip("needs a GPU or the CUDA simulator")
    x = far_from_zero(data, (1200, 5))
    nt.init(**workers)
    try:
        before = _merges()
        got = nt.var(nt.from_numpy(x, tile_shape=(tile_rows, 5)), axis=0).to_numpy()
        merged = _merges() > before
    finally:
        nt.init()
    assert merged == (run in ("partial chains", "gpu"))
    np.testing.assert_allclose(got * len(x), exact_m2(x).astype(np.float64), rtol=1e-14)


@pytest.mark.parametrize("workers", [1, 2])
def test_var_of_nan_inf_and_empty_columns_is_numpys(workers):
    # a NaN or an infinity anywhere in a column, the first value included (the shift of
    # every merge), makes its variance NaN; a column of no rows too
    data = np.random.default_rng(4).standard_normal((9, 6)) + 1e6
    data[0, 0] = data[5, 1] = np.nan
    data[0, 2], data[7, 3], data[3, 4] = np.inf, -np.inf, np.inf
    data[8, 4] = -np.inf
    nt.init(ncpu=workers)
    try:
        got = nt.var(nt.from_numpy(data, tile_shape=(2, 4)), axis=0).to_numpy()
        empty = nt.var(nt.from_numpy(np.ones((0, 3)), tile_shape=(1, 2)), axis=0).to_numpy()
    finally:
        nt.init()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_allclose(got, np.var(data, axis=0), rtol=1e-9)
        np.testing.assert_array_equal(empty, np.var(np.ones((0, 3)), axis=0))


@SETTINGS
@given(data=st.data())
def test_cumulative_sum(data):
    dtype = data.draw(xps.numeric_dtypes(), label="dtype")
    elements = None
    if dtype.kind in "fc":  # tiles add their carries in another order than a running sum
        elements = {"min_value": -1e3, "max_value": 1e3, "allow_nan": False}
        if dtype.kind == "c":
            elements = st.complex_numbers(
                max_magnitude=1e3, allow_nan=False, allow_infinity=False, width=8 * dtype.itemsize
            )
    shapes = xps.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5)
    x = data.draw(retiled(data.draw(xps.arrays(dtype, shapes, elements=elements))), label="x")
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis") if x.ndim > 1 else None
    include_initial = data.draw(st.booleans(), label="include_initial")
    expected = xs.cumulative_sum(strict(x), axis=axis, include_initial=include_initial)
    ours = nt.cumulative_sum(x, axis=axis, include_initial=include_initial)
    if dtype.kind in "fc":
        expected = np.asarray(expected)
        assert str(ours.dtype) == str(expected.dtype) and ours.shape == expected.shape
        np.testing.assert_allclose(ours.to_numpy(), expected, rtol=1e-4, atol=1e-3)
    else:
        assert_same(ours, expected)


@pytest.mark.parametrize("tile", [(1, 1), (2, 3), (4, 7)])
def test_cumulative_sum_with_a_dtype_over_many_tiles(tile):
    data = np.random.default_rng(0).integers(-100, 100, (9, 20)).astype(np.int8)
    x = nt.from_numpy(data, tile_shape=tile)
    for axis in (0, 1):
        out = nt.cumulative_sum(x, axis=axis, dtype=nt.float64)
        assert out.dtype == nt.float64
        np.testing.assert_array_equal(out.to_numpy(), np.cumsum(data, axis=axis, dtype=np.float64))


def test_cumulative_sum_bad_input():
    with pytest.raises(ValueError, match="needs an axis"):
        nt.cumulative_sum(nt.ones((2, 3)))
    with pytest.raises(ValueError, match="0-d"):
        nt.cumulative_sum(nt.asarray(1.0))
    with pytest.raises(ValueError, match="out of bounds"):
        nt.cumulative_sum(nt.ones((2, 3)), axis=2)


# --- gradients against PyTorch ------------------------------------------------------------------


def _pair(data, tile):
    tensor = nt.from_numpy(data, tile_shape=tile).requires_grad_()
    return tensor, torch.tensor(data, requires_grad=True)


def _check_gradient(ours, theirs, x, tx, seed=1):
    np.testing.assert_allclose(ours.to_numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
    weights = np.random.default_rng(seed).standard_normal(theirs.shape)
    w = nt.from_numpy(weights, tile_shape=ours.tile_shape) if weights.ndim else float(weights)
    nt.sum(ours * w).backward()
    (theirs * torch.tensor(weights)).sum().backward()
    assert x.grad is not None and x.grad.tile_shape == x.tile_shape
    np.testing.assert_allclose(x.grad.to_numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize(("axis", "correction", "keepdims"), [(None, 0, False), (0, 1, True)])
@pytest.mark.parametrize("tile", [(2, 3), (5, 7)])
def test_var_and_std_gradients_match_torch(name, axis, correction, keepdims, tile):
    x, tx = _pair(np.random.default_rng(0).standard_normal((5, 7)), tile)
    ours = getattr(nt, name)(x, axis=axis, correction=correction, keepdims=keepdims)
    dims = {} if axis is None else {"dim": axis, "keepdim": keepdims}
    theirs = getattr(torch, name)(tx, correction=correction, **dims)
    _check_gradient(ours, theirs, x, tx)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("include_initial", [False, True])
def test_cumulative_sum_gradient_matches_torch(axis, include_initial):
    x, tx = _pair(np.random.default_rng(0).standard_normal((5, 7)), (2, 3))
    ours = nt.cumulative_sum(x, axis=axis, include_initial=include_initial)
    theirs = torch.cumsum(tx, dim=axis)
    if include_initial:
        shape = list(tx.shape)
        shape[axis] = 1
        theirs = torch.cat([torch.zeros(shape, dtype=tx.dtype), theirs], dim=axis)
    _check_gradient(ours, theirs, x, tx)
