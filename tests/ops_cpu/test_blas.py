"""Tests for numtile/ops_cpu/blas.py against NumPy references, on row-major tiles."""

import threading

import numpy as np
import pytest
from numba.core.errors import TypingError

from numtile.ops_cpu import blas

FLOATS = [np.float32, np.float64]
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}
BOOLS = [False, True]


def random(shape, dtype, seed=0):
    """Reproducible standard-normal array of `dtype` (small integers for integer dtypes)."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 6, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def spd(n, dtype, seed=0):
    """Well-conditioned symmetric positive definite matrix."""
    x = random((n, n), np.float64, seed)
    return (x @ x.T + n * np.eye(n)).astype(dtype)


def assert_close(actual, expected, dtype):
    """Compare in float64 with the dtype's tolerance (exact for integers)."""
    tolerance = TOLERANCE.get(dtype, 0)
    np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance)


def garbage(shape, dtype):
    """Output tile full of values the kernel must ignore when beta == 0."""
    return np.full(shape, 123 if np.issubdtype(dtype, np.integer) else np.nan, dtype)


# m, n, k all different, so swapping any two dimensions breaks a shape or a value.
M, N, K = 3, 5, 4


@pytest.mark.parametrize("dtype", [*FLOATS, np.int64])
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (2.0, -3.0), (-1.0, 1.0)])
def test_gemm_matches_numpy(dtype, trans_a, trans_b, alpha, beta):
    a = random((K, M) if trans_a else (M, K), dtype, 1)
    b = random((N, K) if trans_b else (K, N), dtype, 2)
    c = garbage((M, N), dtype) if beta == 0 else random((M, N), dtype, 3)
    op_a, op_b = (a.T if trans_a else a), (b.T if trans_b else b)
    expected = alpha * (op_a.astype(np.float64) @ op_b) + (beta * c if beta else 0)
    blas.gemm(a, b, c, trans_a, trans_b, alpha, beta)
    assert_close(c, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_gemm_empty_inner_dimension_scales_c(dtype):
    c = random((M, N), dtype, 3)
    expected = 0.5 * c.astype(np.float64)
    blas.gemm(np.empty((M, 0), dtype), np.empty((0, N), dtype), c, False, False, 1.0, 0.5)
    assert_close(c, expected, dtype)


def test_gemm_rejects_mismatched_shapes():
    c = np.zeros((M, N))
    with pytest.raises(AssertionError, match="shapes"):
        blas.gemm(np.ones((M, K)), np.ones((K + 1, N)), c, False, False, 1.0, 0.0)


@pytest.mark.parametrize(
    "a, c",
    [
        (np.ones((2, 2), np.float16), np.ones((2, 2), np.float16)),
        (np.ones((2, 2), np.float32), np.ones((2, 2), np.float64)),
        (np.ones((2, 2)), np.asfortranarray(np.ones((2, 2)))),
    ],
    ids=["float16", "mixed-dtypes", "fortran-order"],
)
def test_blas_rejects_unsupported_arrays_at_compile_time(a, c):
    with pytest.raises(TypingError):
        blas.syrk(a, c, False, 1.0, 0.0)


@pytest.mark.parametrize("dtype", [*FLOATS, np.int64])
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
@pytest.mark.parametrize("batch_a, batch_b", [(4, 4), (1, 4), (4, 1), (1, 1)])
def test_gemm_batched_matches_numpy(dtype, trans_a, trans_b, batch_a, batch_b):
    a = random((batch_a, K, M) if trans_a else (batch_a, M, K), dtype, 1)
    b = random((batch_b, N, K) if trans_b else (batch_b, K, N), dtype, 2)
    c = random((4, M, N), dtype, 3)
    op_a = a.transpose(0, 2, 1) if trans_a else a  # (batch_a, M, K)
    op_b = b.transpose(0, 2, 1) if trans_b else b  # (batch_b, K, N)
    expected = 2.0 * (op_a.astype(np.float64) @ op_b) - c
    blas.gemm_batched(a, b, c, trans_a, trans_b, 2.0, -1.0)
    assert_close(c, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2, 7])
def test_potrf_matches_numpy_and_ignores_upper_triangle(dtype, n):
    a = spd(n, dtype)
    expected = np.linalg.cholesky(a.astype(np.float64))
    a[np.triu_indices(n, 1)] = np.nan  # only the lower triangle may be read
    assert blas.potrf(a) == 0
    assert_close(a, expected, dtype)
    assert np.all(np.triu(a, 1) == 0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_potrf_reports_first_leading_minor_not_positive_definite(dtype):
    a = spd(6, dtype)
    a[3, 3] = -100.0  # the leading minors of order 1-3 are fine, order 4 is not
    info = blas.potrf(a)
    assert info == 4


def triangle(order, lower, unit_diagonal, dtype):
    """(stored, used): a well-conditioned triangular matrix as the kernel gets it, with NaN
    wherever it must not read (the other triangle, the diagonal if unit), and as it is meant."""
    used = np.tril(random((order, order), np.float64, 4)) + order * np.eye(order)
    if not lower:
        used = used.T
    stored = used.copy()
    stored[np.triu_indices(order, 1) if lower else np.tril_indices(order, -1)] = np.nan
    if unit_diagonal:
        np.fill_diagonal(stored, np.nan)
        np.fill_diagonal(used, 1.0)
    return stored.astype(dtype), used


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("left", BOOLS)
@pytest.mark.parametrize("lower", BOOLS)
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("unit_diagonal", BOOLS)
def test_trsm_matches_numpy(dtype, left, lower, trans_a, unit_diagonal):
    b = random((M, N), dtype, 5)
    a, used = triangle(M if left else N, lower, unit_diagonal, dtype)
    op_a = used.T if trans_a else used
    rhs = -1.5 * b.astype(np.float64)
    # left: op(a) x = rhs; right: x op(a) = rhs, i.e. op(a).T x.T = rhs.T
    expected = np.linalg.solve(op_a, rhs) if left else np.linalg.solve(op_a.T, rhs.T).T
    blas.trsm(a, b, left, lower, trans_a, unit_diagonal, -1.5)
    assert_close(b, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (-1.0, 1.0), (0.5, 2.0)])
def test_syrk_lower_triangle_matches_numpy(dtype, trans_a, alpha, beta):
    a = random((K, N) if trans_a else (N, K), dtype, 6)
    c = garbage((N, N), dtype) if beta == 0 else random((N, N), dtype, 7)
    c[np.triu_indices(N, 1)] = np.nan  # neither read nor written
    op_a = (a.T if trans_a else a).astype(np.float64)  # (N, K)
    expected = alpha * op_a @ op_a.T + (beta * c if beta else 0)
    blas.syrk(a, c, trans_a, alpha, beta)
    lower = np.tril_indices(N)
    assert_close(c[lower], expected[lower], dtype)
    assert np.all(np.isnan(c[np.triu_indices(N, 1)]))


def tiled_cholesky(matrix, tile):
    """Right-looking tiled Cholesky built from the kernels, exactly as the runtime calls them."""
    bounds = list(range(0, matrix.shape[0], tile)) + [matrix.shape[0]]
    grid = len(bounds) - 1
    tiles = {
        (i, j): matrix[bounds[i] : bounds[i + 1], bounds[j] : bounds[j + 1]].copy()
        for i in range(grid)
        for j in range(i + 1)
    }
    for k in range(grid):
        assert blas.potrf(tiles[k, k]) == 0
        for i in range(k + 1, grid):
            blas.trsm(tiles[k, k], tiles[i, k], False, True, True, False, 1.0)  # A_ik L_kk^-T
        for i in range(k + 1, grid):
            blas.syrk(tiles[i, k], tiles[i, i], False, -1.0, 1.0)  # A_ii -= L_ik L_ik^T
            for j in range(k + 1, i):
                blas.gemm(tiles[i, k], tiles[j, k], tiles[i, j], False, True, -1.0, 1.0)
    result = np.zeros_like(matrix)
    for (i, j), value in tiles.items():
        result[bounds[i] : bounds[i + 1], bounds[j] : bounds[j + 1]] = value
    return result


@pytest.mark.parametrize("dtype", FLOATS)
def test_tiled_cholesky_matches_numpy(dtype):
    matrix = spd(11, dtype)  # tiles of 4, 4 and 3: the last tile is smaller
    expected = np.linalg.cholesky(matrix.astype(np.float64))
    assert_close(tiled_cholesky(matrix, 4), expected, dtype)


def test_gemm_is_correct_from_concurrent_threads():
    a, b = random((64, 48), np.float64, 1), random((48, 32), np.float64, 2)
    outputs = [garbage((64, 32), np.float64) for _ in range(4)]

    def work(c):
        for _ in range(20):
            blas.gemm(a, b, c, False, False, 1.0, 0.0)

    threads = [threading.Thread(target=work, args=(c,)) for c in outputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for c in outputs:
        assert_close(c, a @ b, np.float64)
