"""The cuSOLVER/cuBLAS paths on a real GPU (run with ``NUMTILE_TEST_GPU=1`` where CuPy imports;
bench/gpu_check.sh does): each factorisation kernel against its CPU twin on tiles of odd shapes
in every float and complex dtype, on a stream of its own, then the tiled Cholesky, LU solve
and QR with every task on the GPU worker, against NumPy. test_cusolver.py checks the same
paths without a GPU, against a stand-in for CuPy."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from numba import cuda

import numtile as nt
from numtile import ops_cpu, ops_cuda
from tests.ops_cuda.test_cusolver import (
    FLOATS,
    assert_close,
    positive_definite,
    random,
    run_geqrt,
    run_getrf,
    run_potrf,
    run_rank_k,
)

pytestmark = pytest.mark.skipif(
    os.environ.get("NUMTILE_TEST_GPU") != "1" or importlib.util.find_spec("cupy") is None,
    reason="needs NUMTILE_TEST_GPU=1, a GPU and CuPy",
)

SHAPES = [(37, 23), (64, 64), (23, 50)]


def test_the_factorisations_take_the_library_path():
    assert ops_cuda.solver_path() == "cusolver"
    assert ops_cuda.gemm_path() == "cublas"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_cusolver_kernels_match_cpu(dtype, shape):
    n = min(shape)
    actual, info, expected, expected_info = run_potrf(positive_definite(n, dtype, n))
    assert info == expected_info == 0
    assert_close(actual, expected, dtype)
    assert run_getrf(random(shape, dtype, 1)) == 0
    v, t = run_geqrt(random(shape, dtype, 2), 16)
    for transpose in (False, True):
        c = random((shape[0], 19), dtype, 3)
        expected = c.copy()
        ops_cpu.gemqrt(v, t, expected, transpose)
        d_c = cuda.to_device(c)
        ops_cuda.gemqrt(cuda.to_device(v), cuda.to_device(t), d_c, transpose)
        assert_close(d_c.copy_to_host(), expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_failures_give_the_cpu_info(dtype):
    a = positive_definite(40, dtype, 4)
    a[17, 17] = -1000
    assert run_potrf(a)[1] == 18
    a = positive_definite(40, dtype, 5)
    a[9, 9] = np.nan
    assert run_potrf(a)[1] == 10
    singular = random((30, 20), dtype, 6)
    singular[:, 7] = 0
    assert run_getrf(singular) == 8


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans", [False, True])
def test_cublas_level3_matches_cpu(dtype, trans):
    run_rank_k("syrk", dtype, trans, -1.0, 0.5)
    if np.dtype(dtype).kind == "c":
        run_rank_k("herk", dtype, trans, -1.0, 0.5)
    a = np.tril(random((33, 33), dtype, 7)) + 33 * np.eye(33, dtype=dtype)
    b = random((33, 21), dtype, 8)
    expected = b.copy()
    ops_cpu.trsm(a, expected, True, True, trans, False, 2.0)
    d_b = cuda.to_device(b)
    stream = cuda.stream()
    ops_cuda.trsm(cuda.to_device(a), d_b, True, True, trans, False, 2.0, stream=stream)
    stream.synchronize()
    assert_close(d_b.copy_to_host(), expected, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_tiled_factorisations_on_the_gpu_worker(dtype):
    nt.init(ncpu=1, ncuda=1, restrict="cuda")
    try:
        n, tile = 300, 64
        spd = positive_definite(n, dtype, 9)
        a = nt.from_numpy(spd, tile_shape=(tile, tile))
        np.testing.assert_allclose(
            nt.linalg.cholesky(a).to_numpy(), np.linalg.cholesky(spd), rtol=1e-9, atol=1e-10
        )
        general, rhs = random((n, n), dtype, 10), random(n, dtype, 11)
        x = nt.linalg.solve(nt.from_numpy(general, tile_shape=(tile, tile)), nt.from_numpy(rhs, 64))
        np.testing.assert_allclose(x.to_numpy(), np.linalg.solve(general, rhs), rtol=1e-8)
        tall = random((500, 120), dtype, 12)
        q, r = (f.to_numpy() for f in nt.linalg.qr(nt.from_numpy(tall, tile_shape=(100, 60))))
        np.testing.assert_allclose(q @ r, tall, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(q.conj().T @ q, np.eye(120), atol=1e-10)
    finally:
        nt.init()
