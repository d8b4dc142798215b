"""Differential tests of numtile.linalg against ``array_api_strict`` over drawn shapes: batch
shapes that broadcast, matrix sizes and tile shapes (one-element tiles, tiles that divide
nothing, tiles past the extent), float32 and float64."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numtile as nt

xs = pytest.importorskip("array_api_strict")

SETTINGS = settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DTYPES = st.sampled_from([np.float32, np.float64])


@st.composite
def tensors(draw, shape, dtype, seed):
    """A numtile tensor of ``shape`` with drawn tiles, and its array_api_strict twin."""
    data = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    tiles = tuple(draw(st.integers(1, side + 1)) for side in shape)
    return nt.from_numpy(data, tile_shape=tiles), xs.asarray(data)


def batches(max_dims=2):
    return st.lists(st.integers(1, 3), min_size=0, max_size=max_dims).map(tuple)


@st.composite
def broadcasting(draw, batch):
    """A shape that broadcasts to ``batch``: some leading axes dropped, some sides set to 1."""
    kept = batch[draw(st.integers(0, len(batch))) :]
    return tuple(1 if draw(st.booleans()) else side for side in kept)


def assert_close(ours, theirs):
    expected = np.asarray(theirs)
    assert ours.shape == expected.shape and str(ours.dtype) == str(expected.dtype)
    tolerance = 2e-4 if expected.dtype == np.float32 else 1e-9
    np.testing.assert_allclose(ours.to_numpy(), expected, rtol=tolerance, atol=tolerance)


@SETTINGS
@given(data=st.data(), batch=batches(), n=st.integers(1, 5), dtype=DTYPES)
def test_vecdot_and_cross(data, batch, n, dtype):
    other = data.draw(broadcasting(batch))
    (a, sa), (b, sb) = (
        data.draw(tensors(batch + (n,), dtype, 1)),
        data.draw(tensors(other + (n,), dtype, 2)),
    )
    assert_close(nt.linalg.vecdot(a, b), xs.linalg.vecdot(sa, sb))
    (c, sc), (d, sd) = (
        data.draw(tensors(batch + (3,), dtype, 3)),
        data.draw(tensors(other + (3,), dtype, 4)),
    )
    assert_close(nt.linalg.cross(c, d), xs.linalg.cross(sc, sd))


@SETTINGS
@given(
    data=st.data(),
    batch=batches(),
    rows=st.integers(1, 6),
    columns=st.integers(1, 6),
    offset=st.integers(-6, 6),
    dtype=DTYPES,
)
def test_diagonal_trace_and_matrix_norms(data, batch, rows, columns, offset, dtype):
    x, sx = data.draw(tensors(batch + (rows, columns), dtype, 5))
    assert_close(nt.linalg.diagonal(x, offset=offset), xs.linalg.diagonal(sx, offset=offset))
    assert_close(nt.linalg.trace(x, offset=offset), xs.linalg.trace(sx, offset=offset))
    order = data.draw(st.sampled_from(["fro", 1, -1, np.inf, -np.inf]))
    keepdims = data.draw(st.booleans())
    assert_close(
        nt.linalg.matrix_norm(x, ord=order, keepdims=keepdims),
        xs.linalg.matrix_norm(sx, ord=order, keepdims=keepdims),
    )


@SETTINGS
@given(
    data=st.data(),
    left=st.lists(st.integers(1, 4), min_size=0, max_size=2).map(tuple),
    inner=st.lists(st.integers(1, 4), min_size=0, max_size=2).map(tuple),
    right=st.lists(st.integers(1, 4), min_size=0, max_size=2).map(tuple),
    dtype=DTYPES,
)
def test_tensordot(data, left, inner, right, dtype):
    a, sa = data.draw(tensors(left + inner, dtype, 6))
    b, sb = data.draw(tensors(inner + right, dtype, 7))
    assert_close(
        nt.linalg.tensordot(a, b, axes=len(inner)), xs.linalg.tensordot(sa, sb, axes=len(inner))
    )


@SETTINGS
@given(data=st.data(), batch=batches(), n=st.integers(1, 5), dtype=DTYPES)
def test_stacked_solve_inv_det_cholesky(data, batch, n, dtype):
    shift = np.float64(3 * n) * np.eye(n)
    raw, _ = data.draw(tensors(batch + (n, n), np.float64, 8))
    a_data = (raw.to_numpy() + shift).astype(dtype)
    tiles = raw.tile_shape
    a, sa = nt.from_numpy(a_data, tile_shape=tiles), xs.asarray(a_data)
    k = data.draw(st.integers(1, 3))
    b, sb = data.draw(tensors(data.draw(broadcasting(batch)) + (n, k), dtype, 9))
    assert_close(nt.linalg.solve(a, b), xs.linalg.solve(sa, sb))
    assert_close(nt.linalg.inv(a), xs.linalg.inv(sa))
    assert_close(nt.linalg.det(a), xs.linalg.det(sa))
    spd_data = a_data @ np.swapaxes(a_data, -1, -2)
    spd = nt.from_numpy(spd_data, tile_shape=tiles)
    assert_close(nt.linalg.cholesky(spd), xs.linalg.cholesky(xs.asarray(spd_data)))
