"""The LU kernels (numtile.ops_cpu.lu: getrf, laswp, and their CUDA twins under the simulator)
against SciPy, on row-major panels.

Every body parametrized over ``backend`` runs on both; on cuda the results are also checked
against the CPU twin (pivots exactly). CUDA-only checks are in tests/ops_cuda/test_lu.py.
"""

import numpy as np
import pytest
import scipy.linalg

from tests.kernels import CPU, assert_twins, random

FLOATS = [np.float32, np.float64]
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}


def run_getrf(backend, a):
    """getrf of a in place on ``backend``: (pivots, info); on cuda checked against the CPU."""
    pivots, info = np.full(min(a.shape), -1, np.int64), np.full(1, -1, np.int32)
    backend.run("getrf", a, pivots, info, exact=False)
    return pivots, int(info[0])


def permuted(a, pivots):
    """a with the sequential row interchanges applied (LAPACK's laswp)."""
    out = a.astype(np.float64)
    for i, p in enumerate(pivots):
        out[[i, p]] = out[[p, i]]
    return out


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (6, 6), (11, 4), (20, 3), (4, 7)])
def test_getrf_factors_with_lapack_pivots(backend, dtype, shape):
    a = random(shape, dtype, 3)
    original = a.copy()
    pivots, info = run_getrf(backend, a)
    assert info == 0
    k = min(shape)
    lower = np.tril(a, -1)[:, :k] + np.eye(shape[0], k)
    upper = np.triu(a)[:k]
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(
        lower @ upper, permuted(original, pivots), rtol=tolerance, atol=tolerance
    )
    if shape[0] == shape[1]:  # the same pivots and factor as scipy's LAPACK
        factor, ipiv = scipy.linalg.lu_factor(original.astype(np.float64))
        np.testing.assert_array_equal(pivots, ipiv)
        np.testing.assert_allclose(a, factor, rtol=10 * tolerance, atol=10 * tolerance)


@pytest.mark.parametrize("dtype", FLOATS)
def test_getrf_reports_the_first_zero_pivot_and_completes(backend, dtype):
    a = random((6, 6), dtype, 4)
    a[:, 2] = 0  # U[2, 2] is exactly zero (and the factorisation goes on past it)
    pivots, info = run_getrf(backend, a)
    assert info == 3
    assert a[2, 2] == 0
    assert np.all(np.isfinite(a))


@pytest.mark.parametrize("dtype", FLOATS)
def test_laswp_applies_interchanges_in_order(backend, dtype):
    a = random((9, 5), dtype, 5)
    pivots = np.array([4, 4, 8, 3], np.int64)  # row 4 moves twice: order matters
    expected = permuted(a, pivots).astype(dtype)
    backend.run("laswp", a, pivots)
    np.testing.assert_array_equal(a, expected)


def test_getrf_twins_agree_on_a_panel(backend):
    a = random((13, 5), np.float64, 6)
    pivots, info = run_getrf(backend, a)
    expected = random((13, 5), np.float64, 6)
    expected_pivots, expected_info = run_getrf(CPU, expected)
    np.testing.assert_array_equal(pivots, expected_pivots)
    assert info == expected_info
    assert_twins(a, expected)
