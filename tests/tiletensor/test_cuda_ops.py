"""The NumPy-like API with every kernel on a GPU worker (CUDA simulator), against NumPy.

Each codelet is written once for both backends; these tests run the tiled ops through the
GPU worker (``restrict="cuda"``, a small GPU memory limit so tiles also move) and compare
with NumPy and with the same ops on the CPU backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import numtile as nt
from numtile.ops_cuda import available
from numtile.runtime import TaskError

pytestmark = pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")


@pytest.fixture(scope="module")
def gpu():
    runtime = nt.init(ncpu=1, ncuda=1, restrict="cuda", cuda_mem_limit=64 * 1024)
    yield runtime
    nt.init()


def _rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def test_elementwise_broadcasting_and_scalars(gpu):
    a, b = _rand((5, 7)), _rand((1, 7), 1)
    x = nt.from_numpy(a, tile_shape=(2, 3))
    y = nt.from_numpy(b, tile_shape=(1, 4))
    result = (nt.tanh(x) * y - 2.0) / (nt.exp(y) + 1.0)
    np.testing.assert_allclose(result.to_numpy(), (np.tanh(a) * b - 2.0) / (np.exp(b) + 1.0))
    np.testing.assert_array_equal((x > y).to_numpy(), a > b)
    ints = nt.from_numpy(np.arange(-4, 6), tile_shape=3)
    np.testing.assert_array_equal((ints**2 + 1).to_numpy(), np.arange(-4, 6) ** 2 + 1)
    np.testing.assert_array_equal(nt.astype(x, nt.int64).to_numpy(), a.astype(np.int64))


def test_negative_integer_powers_fail_like_on_cpu(gpu):
    ints = nt.from_numpy(np.arange(4), tile_shape=2)
    with pytest.raises(TaskError, match="negative integer powers"):
        (ints ** nt.from_numpy(np.array([1, -1, 2, 3]), tile_shape=2)).to_numpy()


def test_reductions_over_any_axes(gpu):
    a = _rand((4, 5, 6), 2)
    x = nt.from_numpy(a, tile_shape=(3, 2, 4))
    np.testing.assert_allclose(nt.sum(x, axis=(0, 2)).to_numpy(), a.sum(axis=(0, 2)))
    np.testing.assert_allclose(nt.max(x, axis=1).to_numpy(), a.max(axis=1))
    np.testing.assert_allclose(nt.sum(x).item(), a.sum())


def test_manipulation_copies(gpu):
    a = _rand((4, 6), 3)
    x = nt.from_numpy(a, tile_shape=(3, 4))
    np.testing.assert_array_equal(nt.permute_dims(x, (1, 0)).to_numpy(), a.T)
    rows = nt.retile(x, (2, 6))
    np.testing.assert_array_equal(rows.to_numpy(), a)
    np.testing.assert_array_equal(nt.reshape(rows, (8, 3)).to_numpy(), a.reshape(8, 3))
    np.testing.assert_array_equal(x[1:3, ::2].to_numpy(), a[1:3, ::2])


def test_random_numbers_do_not_depend_on_the_backend(gpu):
    on_gpu = nt.random.normal(size=(7, 5), seed=4, tile_shape=(3, 2)).to_numpy()
    nt.init(ncpu=1)
    try:
        on_cpu = nt.random.normal(size=(7, 5), seed=4, tile_shape=(3, 2)).to_numpy()
    finally:
        nt.init(ncpu=1, ncuda=1, restrict="cuda", cuda_mem_limit=64 * 1024)
    np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-12)


def test_linear_algebra(gpu):
    a, b = _rand((9, 7), 5), _rand((7, 6), 6)
    x = nt.from_numpy(a, tile_shape=(4, 3))
    y = nt.from_numpy(b, tile_shape=(3, 4))
    np.testing.assert_allclose((x @ y).to_numpy(), a @ b, rtol=1e-12)
    m = _rand((10, 10), 7)
    spd = m @ m.T + 10 * np.eye(10)
    s = nt.from_numpy(spd, tile_shape=(4, 4))
    np.testing.assert_allclose(
        nt.linalg.cholesky(s).to_numpy(), np.linalg.cholesky(spd), rtol=1e-10, atol=1e-12
    )
    rhs = _rand(10, 8)
    np.testing.assert_allclose(
        nt.linalg.solve(s, nt.from_numpy(rhs, tile_shape=4)).to_numpy(),
        np.linalg.solve(spd, rhs),
        rtol=1e-10,
    )


def test_cholesky_of_a_matrix_that_is_not_positive_definite(gpu):
    bad = nt.from_numpy(np.array([[1.0, 2.0], [2.0, 1.0]]), tile_shape=(1, 1))
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        nt.linalg.cholesky(bad).to_numpy()


def test_autograd_through_the_gpu(gpu):
    a = _rand((3, 4), 9)
    x = nt.from_numpy(a, tile_shape=(2, 3))
    x.requires_grad = True
    loss = nt.sum(nt.tanh(x) * x)
    loss.backward()
    expected = np.tanh(a) + a * (1 - np.tanh(a) ** 2)
    np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=1e-12)


def test_the_kernels_ran_on_the_gpu_worker(gpu):
    runtime = nt.get_runtime()
    before = runtime.busy[runtime.worker_names.index("cuda0")]
    (nt.ones((4, 4), tile_shape=(2, 2)) * 3).to_numpy()
    assert runtime.busy[runtime.worker_names.index("cuda0")] > before
    assert runtime.manager.counters()["transferred_bytes"]["cuda0->host"] > 0
