"""Sorting, searching, set functions and indexing with every kernel on a GPU worker (CUDA
simulator), against NumPy: the codelets are written once for both backends."""

from __future__ import annotations

import numpy as np
import pytest

import numtile as nt
from numtile.ops_cuda import available

pytestmark = pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")


@pytest.fixture(scope="module")
def gpu():
    runtime = nt.init(ncpu=1, ncuda=1, restrict="cuda", cuda_mem_limit=64 * 1024)
    yield runtime
    nt.init()


def test_sort_argsort_searchsorted_argmax_on_a_gpu(gpu):
    data = np.random.default_rng(0).integers(-5, 5, (3, 29)).astype(np.float32)
    data[:, ::6] = np.nan
    x = nt.from_numpy(data, tile_shape=(2, 6))
    np.testing.assert_array_equal(nt.sort(x).to_numpy(), np.sort(data, kind="stable"))
    np.testing.assert_array_equal(nt.argsort(x, axis=0).to_numpy(), np.argsort(data, 0, "stable"))
    run = np.sort(data[0])
    ours = nt.searchsorted(nt.from_numpy(run, tile_shape=7), x, side="right")
    np.testing.assert_array_equal(ours.to_numpy(), np.searchsorted(run, data, "right"))
    np.testing.assert_array_equal(nt.argmax(x, axis=1).to_numpy(), np.argmax(data, axis=1))


def test_unique_nonzero_and_indexing_on_a_gpu(gpu):
    data = np.random.default_rng(1).integers(0, 4, (5, 6))
    x = nt.from_numpy(data, tile_shape=(2, 4))
    result = nt.unique_all(x)
    values, indices, inverse, counts = np.unique(
        data, return_index=True, return_inverse=True, return_counts=True
    )
    np.testing.assert_array_equal(result.values.to_numpy(), values)
    np.testing.assert_array_equal(result.indices.to_numpy(), indices)
    np.testing.assert_array_equal(result.inverse_indices.to_numpy(), inverse.reshape(data.shape))
    np.testing.assert_array_equal(result.counts.to_numpy(), counts)
    for ours, theirs in zip(nt.nonzero(x), np.nonzero(data)):
        np.testing.assert_array_equal(ours.to_numpy(), theirs)
    np.testing.assert_array_equal(x[x > 1].to_numpy(), data[data > 1])
    np.testing.assert_array_equal(x[:, [5, 0, 5]].to_numpy(), data[:, [5, 0, 5]])
    y = nt.from_numpy(data.astype(np.float64), tile_shape=(2, 4)).requires_grad_()
    nt.sum(y[[0, 0, 3]]).backward()
    expected = np.zeros(data.shape)
    np.add.at(expected, [0, 0, 3], 1.0)
    np.testing.assert_array_equal(y.grad.to_numpy(), expected)


def test_one_pass_statistics_tile_groups_and_mask_assignment_on_a_gpu(gpu):
    rng = np.random.default_rng(2)
    a = 1e3 + rng.standard_normal((7, 9))
    x = nt.from_numpy(a, tile_shape=(3, 4))
    np.testing.assert_allclose(nt.var(x, axis=0).to_numpy(), a.var(axis=0), rtol=1e-9)
    np.testing.assert_allclose(nt.sum(x, axis=0).to_numpy(), a.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(nt.cumulative_sum(x, axis=0).to_numpy(), a.cumsum(axis=0))
    few = rng.integers(0, 3, 200)  # few values per tile: each tile's groups on the GPU
    values, counts = nt.unique_counts(nt.from_numpy(few, tile_shape=50))
    expected_values, expected_counts = np.unique(few, return_counts=True)
    np.testing.assert_array_equal(values.to_numpy(), expected_values)
    np.testing.assert_array_equal(counts.to_numpy(), expected_counts)
    x[x > 1e3] = 0.0
    np.testing.assert_array_equal(x.to_numpy(), np.where(a > 1e3, 0.0, a))


def test_unique_counts_of_a_small_span_on_a_gpu(gpu):
    # integers of a span at most a quarter of a tile: counted per tile by count_values' twin
    from numtile.tiletensor import sets

    data = np.random.default_rng(3).integers(-3, 2, 50).astype(np.int16)
    x = nt.from_numpy(data, tile_shape=23)
    assert sets._unique_by_histogram(x) is not None
    values, counts = nt.unique_counts(x)
    expected_values, expected_counts = np.unique(data, return_counts=True)
    np.testing.assert_array_equal(values.to_numpy(), expected_values)
    np.testing.assert_array_equal(counts.to_numpy(), expected_counts)
