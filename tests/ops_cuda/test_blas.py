"""Tests for numtile/ops_cuda/blas.py against the ops_cpu twins (under the CUDA simulator).

The cuBLAS path cannot run here; it is checked with a stand-in for CuPy whose cuBLAS calls
are a column-major reference BLAS working on the simulator's host memory, so that the
row-major/column-major mapping (flags, leading dimensions, strides, scalars, stream) is
verified anyway.
"""

import ctypes
import types

import numpy as np
import pytest
from numba import cuda

from numtile.ops_cpu import blas as cpu
from numtile.ops_cuda import blas

FLOATS = [np.float32, np.float64]
TOLERANCE = {np.float32: 2e-5, np.float64: 1e-12}
BOOLS = [False, True]

# Sizes: none a multiple of the GEMM tile (4 under the tests), all different so that a swapped
# dimension breaks a shape or a value. The simulator runs each thread as a Python thread, so
# most tests use SMALL; LARGE has 3 row tiles, more than the simulator's 2 blocks per grid
# dimension, so the kernels' grid loops run too.
SMALL = (5, 3, 6)
LARGE = (9, 7, 6)
M, N, K = SMALL


def random(shape, dtype, seed=0):
    """Reproducible standard-normal array of dtype (small integers for integer dtypes)."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 6, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def spd(n, dtype, seed=0):
    """Well-conditioned symmetric positive definite matrix."""
    x = random((n, n), np.float64, seed)
    return (x @ x.T + n * np.eye(n)).astype(dtype)


def garbage(shape, dtype):
    """Output tile full of values the kernel must ignore when beta == 0."""
    return np.full(shape, 123 if np.issubdtype(dtype, np.integer) else np.nan, dtype)


def assert_close(actual, expected, dtype):
    tolerance = TOLERANCE.get(np.dtype(dtype).type, 0)
    if tolerance:
        np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance)
    else:
        np.testing.assert_array_equal(actual, expected)


def run_gemm(function, dtype, trans_a, trans_b, alpha, beta, batch=None, sizes=SMALL, seed=1):
    """Run a CUDA gemm launcher and the CPU twin on the same inputs; return both results.

    batch: None for 2-D tiles, else (batch of a, batch of b, batch of c) for 3-D stacks."""
    m, n, k = sizes
    shape_a = (k, m) if trans_a else (m, k)
    shape_b = (n, k) if trans_b else (k, n)
    shape_c = (m, n)
    if batch:
        shape_a, shape_b, shape_c = (batch[0], *shape_a), (batch[1], *shape_b), (batch[2], *shape_c)
    a, b = random(shape_a, dtype, seed), random(shape_b, dtype, seed + 1)
    c = garbage(shape_c, dtype) if beta == 0 else random(shape_c, dtype, seed + 2)
    d_a, d_b, d_c = cuda.to_device(a), cuda.to_device(b), cuda.to_device(c)
    function(d_a, d_b, d_c, trans_a, trans_b, alpha, beta)
    (cpu.gemm_batched if batch else cpu.gemm)(a, b, c, trans_a, trans_b, alpha, beta)
    return d_c.copy_to_host(), c


# ---------------------------------------------------------------------------------------------
# gemm


def test_gemm_uses_the_fallback_under_the_simulator():
    assert blas.gemm_path() == "fallback"
    assert blas.TILE == 4  # conftest's NUMTILE_CUDA_GEMM_TILE: the sizes above are not multiples


@pytest.mark.parametrize("dtype", [*FLOATS, np.int64])
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (2.0, -3.0), (-0.5, 1.0)])
def test_gemm_fallback_matches_cpu(dtype, trans_a, trans_b, alpha, beta):
    actual, expected = run_gemm(blas.gemm_fallback, dtype, trans_a, trans_b, alpha, beta)
    assert not np.isnan(actual).any()  # with beta == 0, NaN in c stays out
    assert_close(actual, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, True)])
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (1.5, 0.5)])
def test_gemm_with_several_tiles_per_block_matches_cpu(dtype, trans_a, trans_b, alpha, beta):
    actual, expected = run_gemm(blas.gemm, dtype, trans_a, trans_b, alpha, beta, sizes=LARGE)
    assert_close(actual, expected, dtype)


@pytest.mark.parametrize("sizes", [(1, 1, 1), (4, 4, 4), (8, 4, 3), (3, 8, 9)])
def test_gemm_edge_sizes_match_cpu(sizes):
    actual, expected = run_gemm(blas.gemm, np.float64, True, False, 1.0, 1.0, sizes=sizes)
    assert_close(actual, expected, np.float64)


@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
def test_gemm_int32_matches_cpu(trans_a, trans_b):
    actual, expected = run_gemm(blas.gemm, np.int32, trans_a, trans_b, 2.0, -3.0)
    np.testing.assert_array_equal(actual, expected)


def test_gemm_casts_alpha_and_beta_to_integer_dtype_like_cpu():
    actual, expected = run_gemm(blas.gemm, np.int64, False, True, 2.7, -1.9)
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("function", [blas.gemm, blas.gemm_fallback])
def test_gemm_empty_inner_dimension_scales_c(dtype, function):
    c = random((M, N), dtype, 3)
    d_c = cuda.to_device(c)
    a, b = cuda.to_device(np.empty((M, 0), dtype)), cuda.to_device(np.empty((0, N), dtype))
    function(a, b, d_c, False, False, 1.0, 0.5)
    assert_close(d_c.copy_to_host(), 0.5 * c, dtype)


def test_gemm_with_empty_output_launches_nothing():
    c = cuda.to_device(np.empty((0, N)))
    blas.gemm(
        cuda.to_device(np.ones((0, K))), cuda.to_device(np.ones((K, N))), c, False, False, 1, 0
    )
    assert c.copy_to_host().shape == (0, N)


def test_gemm_rejects_mismatched_shapes():
    c = cuda.to_device(np.zeros((M, N)))
    a, b = cuda.to_device(np.ones((M, K))), cuda.to_device(np.ones((K + 1, N)))
    with pytest.raises(AssertionError, match="shapes"):
        blas.gemm(a, b, c, False, False, 1.0, 0.0)
    with pytest.raises(AssertionError, match="shapes"):
        blas.gemm_fallback(a, b, c, False, False, 1.0, 0.0)


def test_gemm_runs_on_a_stream():
    a, b, c = (
        random((M, K), np.float64, 1),
        random((K, N), np.float64, 2),
        random((M, N), np.float64, 3),
    )
    stream = cuda.stream()
    d_a, d_b = cuda.to_device(a, stream=stream), cuda.to_device(b, stream=stream)
    d_c = cuda.to_device(c, stream=stream)
    blas.gemm(d_a, d_b, d_c, False, False, 1.0, 1.0, stream=stream)
    stream.synchronize()
    assert_close(d_c.copy_to_host(), a @ b + c, np.float64)


# ---------------------------------------------------------------------------------------------
# gemm_batched


# (batch of a, of b, of c): 3 is more than the simulator's 2 blocks along the grid's z
BATCHES = [(2, 2, 2), (1, 2, 2), (2, 1, 2), (1, 1, 2), (3, 1, 3)]
TINY = (3, 5, 2)  # m, n, k: one or two tiles


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
@pytest.mark.parametrize("batch", BATCHES)
def test_gemm_batched_matches_cpu(dtype, trans_a, trans_b, batch):
    actual, expected = run_gemm(
        blas.gemm_batched, dtype, trans_a, trans_b, 2.0, -1.0, batch, sizes=TINY
    )
    assert_close(actual, expected, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (-1.0, 2.0)])
@pytest.mark.parametrize("batch", [(1, 2, 2), (2, 1, 2)])
def test_gemm_batched_fallback_matches_cpu(dtype, alpha, beta, batch):
    actual, expected = run_gemm(
        blas.gemm_batched_fallback, dtype, True, False, alpha, beta, batch, sizes=SMALL
    )
    assert_close(actual, expected, dtype)


def test_gemm_batched_rejects_bad_batch_sizes():
    a, b = cuda.to_device(np.ones((2, M, K))), cuda.to_device(np.ones((3, K, N)))
    c = cuda.to_device(np.zeros((3, M, N)))
    with pytest.raises(AssertionError, match="batch sizes"):
        blas.gemm_batched(a, b, c, False, False, 1.0, 0.0)


# ---------------------------------------------------------------------------------------------
# potrf


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2, 7, 10])
def test_potrf_matches_cpu_and_ignores_upper_triangle(dtype, n):
    a = spd(n, dtype)
    expected = a.copy()
    assert cpu.potrf(expected) == 0
    a[np.triu_indices(n, 1)] = np.nan  # only the lower triangle may be read
    d_a, info = cuda.to_device(a), cuda.to_device(np.array([-7], np.int32))
    blas.potrf(d_a, info)
    assert info.copy_to_host()[0] == 0
    result = d_a.copy_to_host()
    assert_close(result, expected, dtype)
    assert np.all(np.triu(result, 1) == 0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("info_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("pivot, order", [(-100.0, 4), (0.0, 4), (0.0, 1), (-1.0, 6)])
def test_potrf_reports_first_leading_minor_not_positive_definite(dtype, info_dtype, pivot, order):
    a = spd(6, dtype)
    a[order - 1, order - 1] = pivot  # leading minors of order < `order` are fine
    expected = a.copy()
    cpu_info = cpu.potrf(expected)
    d_a, info = cuda.to_device(a), cuda.to_device(np.zeros(1, info_dtype))
    blas.potrf(d_a, info)
    assert info.copy_to_host()[0] == cpu_info == order
    result = d_a.copy_to_host()
    done = order - 1  # the columns factored before the failure are final
    assert_close(result[:, :done], expected[:, :done], dtype)
    assert np.all(np.triu(result, 1) == 0)


def test_potrf_lets_a_nan_pivot_through_like_cpu():
    a = spd(4, np.float64)
    a[2, 2] = np.nan  # OpenBLAS does not test for NaN: info 0 and a NaN factor
    expected = a.copy()
    cpu_info = cpu.potrf(expected)
    d_a, info = cuda.to_device(a), cuda.to_device(np.full(1, -1, np.int32))
    blas.potrf(d_a, info)
    assert info.copy_to_host()[0] == cpu_info == 0
    np.testing.assert_allclose(d_a.copy_to_host(), expected, rtol=1e-12, atol=1e-12)


def test_potrf_rejects_non_square():
    with pytest.raises(AssertionError, match="square"):
        blas.potrf(cuda.to_device(np.ones((2, 3))), cuda.to_device(np.zeros(1, np.int32)))


# ---------------------------------------------------------------------------------------------
# trsm


def triangle(order, lower, unit_diagonal, dtype):
    """A well-conditioned triangular matrix with NaN wherever the kernel must not read."""
    used = np.tril(random((order, order), np.float64, 4)) + order * np.eye(order)
    if not lower:
        used = used.T
    stored = used.copy()
    stored[np.triu_indices(order, 1) if lower else np.tril_indices(order, -1)] = np.nan
    if unit_diagonal:
        np.fill_diagonal(stored, np.nan)
    return stored.astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("left", BOOLS)
@pytest.mark.parametrize("lower", BOOLS)
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("unit_diagonal", BOOLS)
def test_trsm_matches_cpu(dtype, left, lower, trans_a, unit_diagonal):
    b = random((5, 7), dtype, 5)
    a = triangle(5 if left else 7, lower, unit_diagonal, dtype)
    expected = b.copy()
    cpu.trsm(a, expected, left, lower, trans_a, unit_diagonal, -1.5)
    d_b = cuda.to_device(b)
    blas.trsm(cuda.to_device(a), d_b, left, lower, trans_a, unit_diagonal, -1.5)
    assert_close(d_b.copy_to_host(), expected, dtype)


@pytest.mark.parametrize("left", BOOLS)
def test_trsm_many_right_hand_sides_loop_over_the_grid(left):
    # 20 right-hand sides: more than the simulator's 2 blocks of 8 threads
    b = random((3, 20) if left else (20, 3), np.float64, 5)
    a = triangle(3, True, False, np.float64)
    expected = b.copy()
    cpu.trsm(a, expected, left, True, False, False, 2.0)
    d_b = cuda.to_device(b)
    blas.trsm(cuda.to_device(a), d_b, left, True, False, False, 2.0)
    assert_close(d_b.copy_to_host(), expected, np.float64)


def test_trsm_with_alpha_zero_zeroes_b_like_cpu():
    b = np.full((3, 4), np.nan)
    a = triangle(3, True, False, np.float64)
    expected = b.copy()
    cpu.trsm(a, expected, True, True, False, False, 0.0)
    d_b = cuda.to_device(b)
    blas.trsm(cuda.to_device(a), d_b, True, True, False, False, 0.0)
    np.testing.assert_array_equal(d_b.copy_to_host(), expected)


def test_trsm_rejects_mismatched_a():
    with pytest.raises(AssertionError, match="does not match"):
        blas.trsm(cuda.to_device(np.eye(3)), cuda.to_device(np.ones((4, 2))), True, True, 0, 0, 1)


# ---------------------------------------------------------------------------------------------
# syrk


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (-1.0, 1.0), (0.5, 2.0)])
def test_syrk_lower_triangle_matches_cpu(dtype, trans_a, alpha, beta):
    n, k = 10, 6  # 3 x 3 tiles: blocks above the diagonal are skipped, the diagonal ones masked
    a = random((k, n) if trans_a else (n, k), dtype, 6)
    c = garbage((n, n), dtype) if beta == 0 else random((n, n), dtype, 7)
    c[np.triu_indices(n, 1)] = np.nan  # neither read nor written
    expected = c.copy()
    cpu.syrk(a, expected, trans_a, alpha, beta)
    d_c = cuda.to_device(c)
    blas.syrk(cuda.to_device(a), d_c, trans_a, alpha, beta)
    result = d_c.copy_to_host()
    lower = np.tril_indices(n)
    assert_close(result[lower], expected[lower], dtype)
    assert np.all(np.isnan(result[np.triu_indices(n, 1)]))


def test_syrk_with_alpha_zero_does_not_read_a_like_cpu():
    a, c = np.full((4, 3), np.nan), random((4, 4), np.float64, 7)
    expected = c.copy()
    cpu.syrk(a, expected, False, 0.0, 2.0)
    d_c = cuda.to_device(c)
    blas.syrk(cuda.to_device(a), d_c, False, 0.0, 2.0)
    lower = np.tril_indices(4)
    assert_close(d_c.copy_to_host()[lower], expected[lower], np.float64)


def test_syrk_rejects_mismatched_shapes():
    with pytest.raises(AssertionError, match="shapes"):
        blas.syrk(cuda.to_device(np.ones((3, 2))), cuda.to_device(np.ones((4, 4))), 0, 1, 0)


# ---------------------------------------------------------------------------------------------
# the kernels together: a tiled right-looking Cholesky on the device


def test_tiled_cholesky_matches_numpy():
    matrix = spd(11, np.float64)  # tiles of 4, 4 and 3: the last tile is smaller
    bounds = [0, 4, 8, 11]
    tiles = {
        (i, j): cuda.to_device(
            np.ascontiguousarray(matrix[bounds[i] : bounds[i + 1], bounds[j] : bounds[j + 1]])
        )
        for i in range(3)
        for j in range(i + 1)
    }
    info = cuda.to_device(np.zeros(1, np.int32))
    for k in range(3):
        blas.potrf(tiles[k, k], info)
        assert info.copy_to_host()[0] == 0
        for i in range(k + 1, 3):
            blas.trsm(tiles[k, k], tiles[i, k], False, True, True, False, 1.0)
        for i in range(k + 1, 3):
            blas.syrk(tiles[i, k], tiles[i, i], False, -1.0, 1.0)
            for j in range(k + 1, i):
                blas.gemm(tiles[i, k], tiles[j, k], tiles[i, j], False, True, -1.0, 1.0)
    result = np.zeros_like(matrix)
    for (i, j), tile in tiles.items():
        result[bounds[i] : bounds[i + 1], bounds[j] : bounds[j + 1]] = tile.copy_to_host()
    assert_close(result, np.linalg.cholesky(matrix), np.float64)


# ---------------------------------------------------------------------------------------------
# the cuBLAS path, against a stand-in for CuPy


def _column_major(pointer, rows, cols, ld, dtype):
    """The rows x cols column-major matrix at `pointer` with leading dimension ld (a view)."""
    assert ld >= max(1, rows), (ld, rows)
    itemsize = np.dtype(dtype).itemsize
    nbytes = ((cols - 1) * ld + rows) * itemsize
    buffer = (ctypes.c_char * nbytes).from_address(pointer)
    return np.ndarray((rows, cols), dtype, buffer=buffer, strides=(itemsize, ld * itemsize))


def _scalar(pointer, dtype):
    itemsize = np.dtype(dtype).itemsize
    return np.frombuffer((ctypes.c_char * itemsize).from_address(pointer), dtype)[0]


class FakeCupy:
    """Just enough of ``cupy`` for the launchers: streams, a handle, reference cuBLAS gemms."""

    OP_N, OP_T = 0, 1

    def __init__(self):
        self.calls = []
        self.current = None
        fake = self

        class Stream:
            def __init__(self, pointer):
                self.ptr = pointer

            def __enter__(self):
                fake.current = self.ptr
                return self

            def __exit__(self, *exc):
                fake.current = None

        Stream.null = Stream(0)
        cublas = types.SimpleNamespace(
            CUBLAS_OP_N=self.OP_N,
            CUBLAS_OP_T=self.OP_T,
            CUBLAS_POINTER_MODE_HOST=0,
            setPointerMode=self._set_pointer_mode,
        )
        for prefix, dtype in (("s", np.float32), ("d", np.float64)):
            setattr(cublas, prefix + "gemm", self._gemm(prefix + "gemm", dtype))
            name = prefix + "gemmStridedBatched"
            setattr(cublas, name, self._gemm_strided(name, dtype))
        self.cuda = types.SimpleNamespace(
            Stream=Stream,
            ExternalStream=Stream,
            cublas=cublas,
            device=types.SimpleNamespace(get_cublas_handle=lambda: 4242),
        )

    def _set_pointer_mode(self, handle, mode):
        assert handle == 4242 and mode == 0

    def _gemm(self, name, dtype):
        def gemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
            assert handle == 4242 and self.current is not None, "no current stream"
            self.calls.append((name, self.current))
            op_a = _column_major(A, *((m, k) if transa == self.OP_N else (k, m)), lda, dtype)
            op_b = _column_major(B, *((k, n) if transb == self.OP_N else (n, k)), ldb, dtype)
            op_a = op_a if transa == self.OP_N else op_a.T
            op_b = op_b if transb == self.OP_N else op_b.T
            c = _column_major(C, m, n, ldc, dtype)
            alpha, beta = _scalar(alpha, dtype), _scalar(beta, dtype)
            product = alpha * (op_a.astype(np.float64) @ op_b)
            c[...] = product if beta == 0 else product + beta * c

        return gemm

    def _gemm_strided(self, name, dtype):
        single = self._gemm(name, dtype)
        size = np.dtype(dtype).itemsize

        def gemm_strided(
            handle, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, count
        ):
            assert sc >= ldc * n, "batches of c overlap"
            for i in range(count):
                single(handle, ta, tb, m, n, k, alpha, A + i * sa * size, lda,
                       B + i * sb * size, ldb, beta, C + i * sc * size, ldc)  # fmt: skip
            self.calls[-count:] = [(name, self.current)]

        return gemm_strided


class FakeNumbaStream:
    """A stream like numba's: a ctypes handle, and int() giving the CUstream."""

    handle = ctypes.c_void_p(0xBEEF)

    def __int__(self):
        return 0xBEEF


class FakeHandleOnlyStream:
    """A stream known only by its ctypes handle."""

    handle = ctypes.c_void_p(0xCAFE)


@pytest.fixture(name="fake_cupy")
def fake_cupy_fixture(monkeypatch):
    fake = FakeCupy()
    monkeypatch.setattr(blas, "_cupy", lambda: fake)
    monkeypatch.setattr(blas, "_device_pointer", lambda x: x._ary.__array_interface__["data"][0])
    return fake


def test_gemm_path_reports_cublas_where_cupy_is_usable(fake_cupy):
    assert blas.gemm_path() == "cublas"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (2.0, -3.0)])
def test_cublas_gemm_matches_cpu(fake_cupy, dtype, trans_a, trans_b, alpha, beta):
    actual, expected = run_gemm(blas.gemm, dtype, trans_a, trans_b, alpha, beta)
    assert fake_cupy.calls == [(("s" if dtype == np.float32 else "d") + "gemm", 0)]
    assert not np.isnan(actual).any()
    assert_close(actual, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
@pytest.mark.parametrize("batch", [(3, 3, 3), (1, 3, 3), (3, 1, 3), (1, 1, 3)])
def test_cublas_gemm_batched_matches_cpu(fake_cupy, dtype, trans_a, trans_b, batch):
    actual, expected = run_gemm(blas.gemm_batched, dtype, trans_a, trans_b, 2.0, -1.0, batch)
    prefix = "s" if dtype == np.float32 else "d"
    assert fake_cupy.calls == [(prefix + "gemmStridedBatched", 0)]
    assert_close(actual, expected, dtype)


@pytest.mark.parametrize(
    "stream, pointer", [(FakeNumbaStream(), 0xBEEF), (FakeHandleOnlyStream(), 0xCAFE), (0, 0)]
)
def test_cublas_gemm_runs_on_the_callers_stream(fake_cupy, stream, pointer):
    a, b, c = random((M, K), np.float64, 1), random((K, N), np.float64, 2), np.zeros((M, N))
    d_c = cuda.to_device(c)
    blas.gemm(cuda.to_device(a), cuda.to_device(b), d_c, False, False, 1.0, 0.0, stream=stream)
    assert fake_cupy.calls == [("dgemm", pointer)]
    assert_close(d_c.copy_to_host(), a @ b, np.float64)


def test_cublas_path_leaves_integers_and_empty_inner_dimension_to_the_kernel(fake_cupy):
    actual, expected = run_gemm(blas.gemm, np.int64, True, False, 2.0, -3.0)
    np.testing.assert_array_equal(actual, expected)
    c = random((M, N), np.float64, 3)
    d_c = cuda.to_device(c)
    blas.gemm(cuda.to_device(np.empty((M, 0))), cuda.to_device(np.empty((0, N))), d_c, 0, 0, 1, 2)
    assert_close(d_c.copy_to_host(), 2 * c, np.float64)
    assert fake_cupy.calls == []


def test_gemm_fallback_never_uses_cublas(fake_cupy):
    actual, expected = run_gemm(blas.gemm_fallback, np.float64, False, True, 1.0, 1.0)
    assert_close(actual, expected, np.float64)
    assert fake_cupy.calls == []
