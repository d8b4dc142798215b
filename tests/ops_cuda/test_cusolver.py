"""The cuSOLVER/cuBLAS paths of the factorisation kernels (numtile.ops_cuda.cusolver, level3,
libraries), checked without a GPU against a stand-in for CuPy whose library calls are SciPy's
LAPACK/BLAS on the column-major matrices the pointers designate (tests/ops_cuda/
fake_libraries.py): results, pivots and info equal the CPU kernels' on tiles of odd shapes in
every float and complex dtype, the libraries run on the caller's stream, workspaces come from
the ``_bufferSize`` queries and are reused. The ``@cuda.jit`` twins themselves are tested in
test_lu.py, test_factorizations.py and test_qr.py; test_cusolver_gpu.py runs these paths on a
real GPU.
"""

import numpy as np
import pytest
from numba import cuda

import numtile as nt
from numtile import ops_cpu, ops_cuda
from numtile.ops_cuda import libraries, matmul
from tests.ops_cuda.fake_libraries import FakeLibraries

pytestmark = pytest.mark.skipif(
    not ops_cuda.SIMULATOR, reason="the stand-in for CuPy reads the simulator's host memory"
)

FLOATS = [np.float32, np.float64, np.complex64, np.complex128]
TOLERANCE = {np.float32: 2e-4, np.float64: 1e-11, np.complex64: 2e-4, np.complex128: 1e-11}
PREFIX = {np.float32: "s", np.float64: "d", np.complex64: "c", np.complex128: "z"}


def random(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def positive_definite(n, dtype, seed):
    x = random((n, n), np.complex128 if np.dtype(dtype).kind == "c" else np.float64, seed)
    return (x @ x.conj().T + n * np.eye(n)).astype(dtype)


def assert_close(actual, expected, dtype):
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance, equal_nan=True)


def names(fake) -> list[str]:
    return [name for name, _ in fake.calls]


def fortran(x):
    """A device array holding x column-major (an F-contiguous view)."""
    return cuda.to_device(np.ascontiguousarray(x.T)).T


@pytest.fixture(name="fake")
def fake_fixture(monkeypatch):
    monkeypatch.setattr(libraries, "_WORKSPACES", {})
    monkeypatch.setattr(libraries, "_SIZES", {})
    fake = FakeLibraries(workspaces=libraries._WORKSPACES)
    monkeypatch.setattr(libraries, "library", lambda: fake)
    monkeypatch.setattr(matmul, "_device_pointer", lambda x: x._ary.__array_interface__["data"][0])
    return fake


def test_solver_path_is_the_fallback_without_cupy():
    assert ops_cuda.solver_path() == "fallback"


def test_solver_path_reports_cusolver_where_cupy_is_usable(fake):
    assert ops_cuda.solver_path() == "cusolver"


# ---------------------------------------------------------------------------------------------
# potrf


def run_potrf(a, info_dtype=np.int64):
    expected = a.copy()
    expected_info = ops_cpu.potrf(expected)
    d_a, d_info = cuda.to_device(a), cuda.to_device(np.full(1, -1, info_dtype))
    ops_cuda.potrf(d_a, d_info)
    return d_a.copy_to_host(), int(d_info.copy_to_host()[0]), expected, expected_info


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 5, 7])
def test_potrf_matches_cpu_reading_only_the_lower_triangle(fake, dtype, n):
    a = positive_definite(n, dtype, n)
    a[np.triu_indices(n, 1)] = np.nan
    actual, info, expected, expected_info = run_potrf(a)
    assert info == expected_info == 0
    assert_close(actual, expected, dtype)
    assert np.all(actual[np.triu_indices(n, 1)] == 0)
    prefix = PREFIX[dtype]
    assert names(fake) == [prefix + "potrf_bufferSize", prefix + "potrf"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("info_dtype", [np.int32, np.int64])
def test_potrf_failures_give_the_cpu_info(fake, dtype, info_dtype):
    a = positive_definite(6, dtype, 1)
    a[3, 3] = -100  # the leading minor of order 4 is not positive
    actual, info, expected, expected_info = run_potrf(a, info_dtype)
    assert info == expected_info == 4
    assert_close(actual[:, :3], expected[:, :3], dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_potrf_fails_a_nan_pivot_like_the_cpu(fake, dtype):
    a = positive_definite(5, dtype, 2)
    a[2, 2] = np.nan  # SciPy's LAPACK here (OpenBLAS), like cuSOLVER, may let it through
    _, info, _, expected_info = run_potrf(a)
    assert info == expected_info == 3


# ---------------------------------------------------------------------------------------------
# getrf


def run_getrf(a, pivot_dtype=np.int64, layout=cuda.to_device):
    k = min(a.shape)
    expected, pivots, info = a.copy(), np.zeros(k, pivot_dtype), np.zeros(1, np.int32)
    ops_cpu.getrf(expected, pivots, info)
    d_a = layout(a)
    d_pivots = cuda.to_device(np.full(k, -7, pivot_dtype))
    d_info = cuda.to_device(np.full(1, -1, np.int32))
    ops_cuda.getrf(d_a, d_pivots, d_info)
    np.testing.assert_array_equal(d_pivots.copy_to_host(), pivots)
    assert int(d_info.copy_to_host()[0]) == info[0]
    assert_close(d_a.copy_to_host(), expected, a.dtype.type)
    return int(info[0])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (6, 6)])
@pytest.mark.parametrize("pivot_dtype", [np.int32, np.int64])
def test_getrf_matches_cpu(fake, dtype, shape, pivot_dtype):
    assert run_getrf(random(shape, dtype, sum(shape)), pivot_dtype) == 0
    prefix = PREFIX[dtype]
    # transposed into the workspace, factored, transposed back
    expected = ["geam", "getrf_bufferSize", "getrf", "geam"]
    assert names(fake) == [prefix + name for name in expected]


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_getrf_reports_the_first_exactly_zero_pivot(fake, dtype):
    a = random((6, 5), dtype, 3)
    a[:, 2] = 0  # U[2, 2] == 0 exactly (the factorisation goes on, as LAPACK's)
    assert run_getrf(a) == 3


def test_getrf_of_a_column_major_tile_needs_no_copy(fake):
    run_getrf(random((7, 4), np.float64, 4), layout=fortran)
    assert names(fake) == ["dgetrf_bufferSize", "dgetrf"]


def test_workspaces_are_queried_once_per_shape_and_reused(fake):
    run_getrf(random((6, 4), np.float64, 5))
    work = libraries._WORKSPACES[(0, "work", "<f8")]
    run_getrf(random((6, 4), np.float64, 6))
    assert fake.queries == ["dgetrf"]
    assert libraries._WORKSPACES[(0, "work", "<f8")] is work
    run_getrf(random((12, 9), np.float64, 7))
    assert fake.queries == ["dgetrf", "dgetrf"]
    assert libraries._WORKSPACES[(0, "work", "<f8")].size == fake.sizes["dgetrf"] > work.size


# ---------------------------------------------------------------------------------------------
# geqrt, gemqrt


def run_geqrt(a, ib, layout=cuda.to_device):
    expected, t = a.copy(), np.zeros((a.shape[1], ib), a.dtype)
    ops_cpu.geqrt(expected, t)
    d_a, d_t = layout(a), cuda.to_device(np.full((a.shape[1], ib), 5, a.dtype))
    ops_cuda.geqrt(d_a, d_t)
    assert_close(d_a.copy_to_host(), expected, a.dtype.type)
    assert_close(d_t.copy_to_host(), t, a.dtype.type)
    return expected, t


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (5, 5)])
@pytest.mark.parametrize("ib", [1, 3, 8])
def test_geqrt_matches_cpu(fake, dtype, shape, ib):
    run_geqrt(random(shape, dtype, ib), ib)
    expected = ["geam", "geqrf_bufferSize", "geqrf", *gram_products(shape, ib), "geam"]
    assert names(fake) == [PREFIX[dtype] + name for name in expected]


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_geqrt_of_many_reflector_blocks_loops_over_the_grid(fake, dtype):
    run_geqrt(random((11, 7), dtype, 3), 2)  # 4 blocks of reflectors, 2 simulated blocks
    assert names(fake).count(PREFIX[dtype] + "gemm") == 4


def gram_products(shape, ib) -> list[str]:
    """geqrt's gemm calls: one per block of reflectors that has rows under it."""
    m, n = shape
    k = min(m, n)
    nb = min(ib, k)
    return ["gemm" for start in range(0, k, nb) if start + min(nb, k - start) < m]


def test_geqrt_of_a_column_major_tile_needs_no_copy(fake):
    run_geqrt(random((6, 4), np.float64, 1), 2, layout=fortran)
    assert names(fake) == ["dgeqrf_bufferSize", "dgeqrf", "dgemm", "dgemm"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("v_shape, columns", [((7, 4), 5), ((4, 6), 3)])
@pytest.mark.parametrize("transpose", [False, True])
def test_gemqrt_matches_cpu(fake, dtype, v_shape, columns, transpose):
    v, t = run_geqrt(random(v_shape, dtype, 2), 3)
    c = random((v_shape[0], columns), dtype, 3)
    expected = c.copy()
    ops_cpu.gemqrt(v, t, expected, transpose)
    fake.calls.clear()
    d_c = cuda.to_device(c)
    ops_cuda.gemqrt(cuda.to_device(v), cuda.to_device(t), d_c, transpose)
    assert_close(d_c.copy_to_host(), expected, dtype)
    prefix = PREFIX[dtype]
    if np.dtype(dtype).kind == "c":  # c transposed into a workspace and back
        steps = ["geam", "geam", "unmqr_bufferSize", "unmqr", "geam"]
    else:  # from the right, on c's own buffer
        steps = ["geam", "ormqr_bufferSize", "ormqr"]
    assert names(fake) == [prefix + name for name in steps]


# ---------------------------------------------------------------------------------------------
# trsm, syrk, herk (cuBLAS)


def stored_triangle(order, lower, unit, dtype):
    """A well-conditioned triangle with NaN wherever trsm must not read."""
    used = np.tril(random((order, order), dtype, 4)) + order * np.eye(order, dtype=dtype)
    used = used if lower else used.T.copy()
    stored = used.copy()
    stored[np.triu_indices(order, 1) if lower else np.tril_indices(order, -1)] = np.nan
    if unit:
        np.fill_diagonal(stored, np.nan)
    return stored


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("unit", [False, True])
def test_trsm_matches_cpu(fake, dtype, left, lower, trans, unit):
    if trans == 2 and np.dtype(dtype).kind != "c":
        pytest.skip("the conjugate transpose flag is for complex tiles")
    b = random((5, 3), dtype, 5)
    a = stored_triangle(5 if left else 3, lower, unit, dtype)
    flag = trans if np.dtype(dtype).kind == "c" else bool(trans)
    expected = b.copy()
    ops_cpu.trsm(a, expected, left, lower, flag, unit, 1.5)
    d_b = cuda.to_device(b)
    ops_cuda.trsm(cuda.to_device(a), d_b, left, lower, flag, unit, 1.5)
    assert_close(d_b.copy_to_host(), expected, dtype)
    assert names(fake) == [PREFIX[dtype] + "trsm"]


def run_rank_k(name, dtype, trans, alpha, beta):
    a = random((4, 6) if trans else (6, 4), dtype, 6)
    c = random((6, 6), dtype, 7) if beta else np.full((6, 6), np.nan, dtype)
    c[np.triu_indices(6, 1)] = 9  # never touched
    if name == "herk":  # a Hermitian c: BLAS's herk drops the diagonal's imaginary part
        c[np.diag_indices(6)] = c.diagonal().real
    expected = c.copy()
    getattr(ops_cpu, name)(a, expected, trans, alpha, beta)
    d_c = cuda.to_device(c)
    getattr(ops_cuda, name)(cuda.to_device(a), d_c, trans, alpha, beta)
    assert_close(d_c.copy_to_host(), expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("alpha, beta", [(1.5, 0.0), (-1.0, 0.5)])
def test_syrk_matches_cpu(fake, dtype, trans, alpha, beta):
    run_rank_k("syrk", dtype, trans, alpha, beta)
    assert names(fake) == [PREFIX[dtype] + "syrk"]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("alpha, beta", [(1.5, 0.0), (-1.0, 0.5)])
def test_herk_matches_cpu(fake, dtype, trans, alpha, beta):
    run_rank_k("herk", dtype, trans, alpha, beta)
    assert names(fake) == [PREFIX[dtype] + "herk"]


def test_herk_stays_on_the_kernel_where_cupy_lacks_it(fake, monkeypatch):
    without = FakeLibraries(herk=False)
    monkeypatch.setattr(libraries, "library", lambda: without)
    run_rank_k("herk", np.complex128, False, -1.0, 0.5)
    assert without.calls == []


def test_empty_inner_dimensions_and_strided_tiles_stay_on_the_kernels(fake):
    c = random((4, 4), np.float64, 8)
    d_c = cuda.to_device(c)
    ops_cuda.syrk(cuda.to_device(np.zeros((4, 0))), d_c, False, 1.0, 2.0)
    np.testing.assert_allclose(np.tril(d_c.copy_to_host()), np.tril(2 * c))
    wide = random((5, 8), np.float64, 9)
    run_getrf(wide[:, ::2].copy(), layout=lambda x: cuda.to_device(wide)[:, ::2])
    assert fake.calls == []


# ---------------------------------------------------------------------------------------------
# streams, and the tiled factorisations through the library path


class FakeNumbaStream:
    """A stream like numba's: int() gives the CUstream."""

    handle = None

    def __int__(self):
        return 0xBEEF


def test_every_library_call_runs_on_the_callers_stream(fake):
    stream = FakeNumbaStream()
    a = cuda.to_device(positive_definite(4, np.float64, 9))
    info, pivots = cuda.to_device(np.zeros(1, np.int32)), cuda.to_device(np.zeros(4, np.int64))
    t, c = cuda.to_device(np.zeros((4, 2))), cuda.to_device(random((4, 3), np.float64, 1))
    ops_cuda.potrf(a, info, stream=stream)
    ops_cuda.trsm(a, c, True, True, False, False, 1.0, stream=stream)
    ops_cuda.syrk(c, a, False, -1.0, 1.0, stream=stream)
    ops_cuda.getrf(a, pivots, info, stream=stream)
    ops_cuda.geqrt(a, t, stream=stream)
    ops_cuda.gemqrt(a, t, c, True, stream=stream)
    assert len(fake.calls) == 16  # potrf 2, trsm 1, syrk 1, getrf 4, geqrt 5, gemqrt 3
    assert {stream for _, stream in fake.calls} == {0xBEEF}
    assert set(fake.bound.values()) == {0xBEEF}


@pytest.fixture(name="gpu")
def gpu_fixture(fake):
    runtime = nt.init(ncpu=1, ncuda=1, restrict="cuda", cuda_mem_limit=256 * 1024)
    yield fake
    nt.init()
    del runtime


def test_tiled_factorisations_on_a_gpu_worker_through_the_libraries(gpu):
    n, tile = 10, 4
    spd = positive_definite(n, np.float64, 11)
    a = nt.from_numpy(spd, tile_shape=(tile, tile))
    rhs = random(n, np.float64, 12)
    np.testing.assert_allclose(
        nt.linalg.cholesky(a).to_numpy(), np.linalg.cholesky(spd), rtol=1e-10, atol=1e-12
    )
    general = random((n, n), np.float64, 13)
    x = nt.linalg.solve(nt.from_numpy(general, tile_shape=(tile, tile)), nt.from_numpy(rhs, 4))
    np.testing.assert_allclose(x.to_numpy(), np.linalg.solve(general, rhs), rtol=1e-9)
    tall = random((13, 5), np.float64, 14)
    q, r = nt.linalg.qr(nt.from_numpy(tall, tile_shape=(4, 3)))
    np.testing.assert_allclose((q @ r).to_numpy(), tall, rtol=1e-10, atol=1e-12)
    used = {name for name, _ in gpu.calls}
    assert {"dpotrf", "dtrsm", "dsyrk", "dgetrf", "dgeqrf", "dormqr"} <= used


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    from numtile.ops_cuda import cusolver

    int32 = types.int32[::1]
    for t in (types.float32, types.float64, types.complex64, types.complex128):
        for info in (int32, types.int64[::1]):
            cuda.compile_ptx(cusolver._potrf_finish.py_func, (t[:, ::1], int32, info), cc=(9, 0))
            signature = (int32, int32, info, int32)
            cuda.compile_ptx(cusolver._getrf_finish.py_func, signature, cc=(9, 0))
        for a in (t[:, ::1], t[::1, :]):  # row-major tiles, and geqrt(major.T, t)
            signature = (a, t[::1], t[:, :, ::1], t[:, ::1], types.int64)
            cuda.compile_ptx(cusolver._block_factors.py_func, signature, cc=(9, 0))
        cuda.compile_ptx(cusolver._taus.py_func, (t[:, ::1], t[::1], types.int64), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
