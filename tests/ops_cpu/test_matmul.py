"""The GEMM kernels (numtile.ops_cpu.matmul: gemm, gemm_batched, and their CUDA twins under the
simulator) against NumPy, on row-major tiles.

Every body parametrized over ``backend`` runs on both; on cuda each call is also checked
against the CPU twin. CUDA-only behaviour (the tiled kernel's edges, cuBLAS, launch settings)
is tested in tests/ops_cuda/test_matmul.py.
"""

import threading

import numpy as np
import pytest

from numtile import ops_cpu
from tests.kernels import garbage, random

FLOATS = [np.float32, np.float64]
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}
BOOLS = [False, True]

# m, n, k all different, so swapping any two dimensions breaks a shape or a value; none a
# multiple of the CUDA test GEMM tile (4).
M, N, K = 5, 3, 6


def assert_close(actual, expected, dtype):
    """Compare in float64 with the dtype's tolerance (exact for integers)."""
    tolerance = TOLERANCE.get(dtype, 0)
    np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [*FLOATS, np.int64])
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (2.0, -3.0), (-1.0, 1.0)])
def test_gemm_matches_numpy(backend, dtype, trans_a, trans_b, alpha, beta):
    a = random((K, M) if trans_a else (M, K), dtype, 1)
    b = random((N, K) if trans_b else (K, N), dtype, 2)
    c = garbage((M, N), dtype) if beta == 0 else random((M, N), dtype, 3)
    op_a, op_b = (a.T if trans_a else a), (b.T if trans_b else b)
    expected = alpha * (op_a.astype(np.float64) @ op_b) + (beta * c if beta else 0)
    backend.run("gemm", a, b, c, trans_a, trans_b, alpha, beta)
    assert not np.isnan(c).any()  # with beta == 0, NaN in c stays out
    assert_close(c, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_gemm_empty_inner_dimension_scales_c(backend, dtype):
    c = random((M, N), dtype, 3)
    expected = 0.5 * c.astype(np.float64)
    backend.run("gemm", np.empty((M, 0), dtype), np.empty((0, N), dtype), c, False, False, 1, 0.5)
    assert_close(c, expected, dtype)


def test_gemm_rejects_mismatched_shapes():
    c = np.zeros((M, N))
    with pytest.raises(AssertionError, match="shapes"):
        ops_cpu.gemm(np.ones((M, K)), np.ones((K + 1, N)), c, False, False, 1.0, 0.0)


# (batch of a, of b, of c): every broadcast, and 3 is more than the simulator's 2 blocks along
# the CUDA grid's z
BATCHES = [(3, 3, 3), (1, 3, 3), (3, 1, 3), (1, 1, 3)]


@pytest.mark.parametrize("dtype", [*FLOATS, np.int64])
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
@pytest.mark.parametrize("batch", BATCHES, ids=str)
def test_gemm_batched_matches_numpy(backend, dtype, trans_a, trans_b, batch):
    m, n, k = 3, 5, 2  # one or two CUDA tiles
    a = random((batch[0], k, m) if trans_a else (batch[0], m, k), dtype, 1)
    b = random((batch[1], n, k) if trans_b else (batch[1], k, n), dtype, 2)
    c = random((batch[2], m, n), dtype, 3)
    op_a = a.transpose(0, 2, 1) if trans_a else a  # (batch_a, m, k)
    op_b = b.transpose(0, 2, 1) if trans_b else b  # (batch_b, k, n)
    expected = 2.0 * (op_a.astype(np.float64) @ op_b) - c
    backend.run("gemm_batched", a, b, c, trans_a, trans_b, 2.0, -1.0)
    assert_close(c, expected, dtype)


def test_gemm_is_correct_from_concurrent_threads():
    a, b = random((64, 48), np.float64, 1), random((48, 32), np.float64, 2)
    outputs = [garbage((64, 32), np.float64) for _ in range(4)]

    def work(c):
        for _ in range(20):
            ops_cpu.gemm(a, b, c, False, False, 1.0, 0.0)

    threads = [threading.Thread(target=work, args=(c,)) for c in outputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for c in outputs:
        assert_close(c, a @ b, np.float64)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (False, True), (True, True)])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_gemm_of_one_row(dtype, trans_a, trans_b, beta):
    # m == 1 (a decoding step) goes through gemv when a is not transposed
    a = random((K, 1) if trans_a else (1, K), dtype, 0)
    b = random((N, K) if trans_b else (K, N), dtype, 1)
    c = random((1, N), dtype, 2)
    expected = 1.5 * (a.T if trans_a else a) @ (b.T if trans_b else b) + beta * c
    if beta == 0.0:
        c[:] = np.nan  # ignored when beta == 0
    ops_cpu.gemm(a, b, c, trans_a, trans_b, 1.5, beta)
    assert_close(c, expected, dtype)


def test_blas_kernels_release_the_gil():
    # the workers run these kernels in parallel threads: each must drop the GIL
    kernels = [ops_cpu.gemm, ops_cpu.gemm_batched, ops_cpu.potrf, ops_cpu.trsm, ops_cpu.syrk]
    assert all(kernel.targetoptions.get("nogil") for kernel in kernels)


def test_the_kernels_blas_is_one_thread_while_a_runtime_runs(tmp_path):
    # one BLAS thread per worker: the library the kernels call (found from its dgemm symbol,
    # not from the runtime's list) is held to one thread, wherever NumPy's own BLAS lives
    import os

    from threadpoolctl import threadpool_info

    from numtile.config import Config
    from numtile.ops_cpu.kernel_blas import kernel_blas_library
    from numtile.runtime import Runtime

    path = kernel_blas_library()
    if path is None:
        pytest.skip("dladdr cannot name the library")
    runtime = Runtime(Config(ncpu=1, ncuda=0, cache_dir=str(tmp_path)))
    try:
        found = [
            info
            for info in threadpool_info()
            if info["user_api"] == "blas" and os.path.samefile(info["filepath"], path)
        ]
    finally:
        runtime.shutdown()
    assert found and all(info["num_threads"] == 1 for info in found), found
