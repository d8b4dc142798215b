"""The factorisation kernels (numtile.ops_cpu.factorizations: potrf, trsm, syrk, and their CUDA
twins under the simulator) against NumPy, on row-major tiles.

Every body parametrized over ``backend`` runs on both; on cuda each call is also checked
against the CPU twin. CUDA-only behaviour is tested in tests/ops_cuda/test_factorizations.py.
"""

import numpy as np
import pytest
from numba.core.errors import TypingError

from numtile import ops_cpu
from tests.kernels import garbage, random, spd, triangle

FLOATS = [np.float32, np.float64]
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}
BOOLS = [False, True]
N, K = 10, 6  # syrk: 3 x 3 GEMM tiles on CUDA, blocks above the diagonal skipped


def assert_close(actual, expected, dtype):
    """Compare in float64 with the dtype's tolerance."""
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance)


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
        ops_cpu.syrk(a, c, False, 1.0, 0.0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2, 7, 10])
def test_potrf_matches_numpy_and_ignores_upper_triangle(backend, dtype, n):
    a = spd(n, dtype)
    expected = np.linalg.cholesky(a.astype(np.float64))
    a[np.triu_indices(n, 1)] = np.nan  # only the lower triangle may be read
    assert backend.potrf(a) == 0
    assert_close(a, expected, dtype)
    assert np.all(np.triu(a, 1) == 0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_potrf_reports_first_leading_minor_not_positive_definite(backend, dtype):
    a = spd(6, dtype)
    a[3, 3] = -100.0  # the leading minors of order 1-3 are fine, order 4 is not
    assert backend.potrf(a) == 4


@pytest.mark.parametrize("dtype", FLOATS)
def test_potrf_reports_a_nan_pivot_as_lapack_does(backend, dtype):
    # reference LAPACK fails a NaN pivot (info = its column), oneMKL too; OpenBLAS lets it
    # through and the kernel catches it (test_blas_library runs this file on both libraries)
    a = spd(6, dtype)
    expected = np.linalg.cholesky(a.astype(np.float64))
    a[3, 3] = np.nan
    assert backend.potrf(a) == 4
    assert_close(a[:, :3], expected[:, :3], dtype)  # the columns before it are final


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("left", BOOLS)
@pytest.mark.parametrize("lower", BOOLS)
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("unit_diagonal", BOOLS)
def test_trsm_matches_numpy(backend, dtype, left, lower, trans_a, unit_diagonal):
    b = random((5, 7), dtype, 5)
    a, used = triangle(5 if left else 7, lower, unit_diagonal, dtype)
    op_a = used.T if trans_a else used
    rhs = -1.5 * b.astype(np.float64)
    # left: op(a) x = rhs; right: x op(a) = rhs, i.e. op(a).T x.T = rhs.T
    expected = np.linalg.solve(op_a, rhs) if left else np.linalg.solve(op_a.T, rhs.T).T
    backend.run("trsm", a, b, left, lower, trans_a, unit_diagonal, -1.5)
    assert_close(b, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (-1.0, 1.0), (0.5, 2.0)])
def test_syrk_lower_triangle_matches_numpy(backend, dtype, trans_a, alpha, beta):
    a = random((K, N) if trans_a else (N, K), dtype, 6)
    c = garbage((N, N), dtype) if beta == 0 else random((N, N), dtype, 7)
    c[np.triu_indices(N, 1)] = np.nan  # neither read nor written
    op_a = (a.T if trans_a else a).astype(np.float64)  # (N, K)
    expected = alpha * op_a @ op_a.T + (beta * c if beta else 0)
    backend.run("syrk", a, c, trans_a, alpha, beta)
    lower = np.tril_indices(N)
    assert_close(c[lower], expected[lower], dtype)
    assert np.all(np.isnan(c[np.triu_indices(N, 1)]))


def tiled_cholesky(backend, matrix, tile):
    """Right-looking tiled Cholesky built from the kernels, exactly as the runtime calls them."""
    bounds = list(range(0, matrix.shape[0], tile)) + [matrix.shape[0]]
    grid = len(bounds) - 1
    tiles = {
        (i, j): matrix[bounds[i] : bounds[i + 1], bounds[j] : bounds[j + 1]].copy()
        for i in range(grid)
        for j in range(i + 1)
    }
    for k in range(grid):
        assert backend.potrf(tiles[k, k]) == 0
        for i in range(k + 1, grid):
            backend.run("trsm", tiles[k, k], tiles[i, k], False, True, True, False, 1.0)
        for i in range(k + 1, grid):
            backend.run("syrk", tiles[i, k], tiles[i, i], False, -1.0, 1.0)  # A_ii -= L_ik L_ik^T
            for j in range(k + 1, i):
                backend.run("gemm", tiles[i, k], tiles[j, k], tiles[i, j], False, True, -1.0, 1.0)
    result = np.zeros_like(matrix)
    for (i, j), value in tiles.items():
        result[bounds[i] : bounds[i + 1], bounds[j] : bounds[j + 1]] = value
    return result


@pytest.mark.parametrize("dtype", FLOATS)
def test_tiled_cholesky_matches_numpy(backend, dtype):
    matrix = spd(11, dtype)  # tiles of 4, 4 and 3: the last tile is smaller
    expected = np.linalg.cholesky(matrix.astype(np.float64))
    assert_close(tiled_cholesky(backend, matrix, 4), expected, dtype)
