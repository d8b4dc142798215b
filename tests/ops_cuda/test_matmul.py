"""What only the CUDA GEMM has (numtile.ops_cuda.matmul): the tiled kernel's edges (several tiles
per block, integer dtypes, empty operands), launch settings from ``configure()``, streams, and
the cuBLAS path, checked with a stand-in for CuPy whose cuBLAS calls are a column-major
reference BLAS working on the simulator's host memory, so that the row-major/column-major
mapping (flags, leading dimensions, strides, scalars, stream) is verified anyway. Results
against NumPy (and the CPU twins) are tested, on both backends, by tests/ops_cpu/test_matmul.py.
"""

import ctypes
import types

import numpy as np
import pytest
from numba import cuda

from numtile import ops_cpu, ops_cuda
from numtile.ops_cuda import launch, matmul
from tests.kernels import CUDA, cuda_launches, garbage, random
from tests.ops_cuda.fake_libraries import column_major, scalar

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
    (ops_cpu.gemm_batched if batch else ops_cpu.gemm)(a, b, c, trans_a, trans_b, alpha, beta)
    return d_c.copy_to_host(), c


# ---------------------------------------------------------------------------------------------
# gemm


@pytest.mark.skipif(not ops_cuda.SIMULATOR, reason="a real GPU may use cuBLAS")
def test_gemm_uses_the_fallback_under_the_simulator():
    assert ops_cuda.gemm_path() == "fallback"
    # the tests' configuration (conftest): the sizes above are not multiples of the tile
    assert ops_cuda.launch_settings().gemm_tile == 4


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, True)])
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (1.5, 0.5)])
def test_gemm_with_several_tiles_per_block_matches_cpu(dtype, trans_a, trans_b, alpha, beta):
    actual, expected = run_gemm(ops_cuda.gemm, dtype, trans_a, trans_b, alpha, beta, sizes=LARGE)
    assert_close(actual, expected, dtype)


@pytest.mark.parametrize("sizes", [(1, 1, 1), (4, 4, 4), (8, 4, 3), (3, 8, 9)])
def test_gemm_edge_sizes_match_cpu(sizes):
    actual, expected = run_gemm(ops_cuda.gemm, np.float64, True, False, 1.0, 1.0, sizes=sizes)
    assert_close(actual, expected, np.float64)


@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
def test_gemm_int32_matches_cpu(trans_a, trans_b):
    actual, expected = run_gemm(ops_cuda.gemm, np.int32, trans_a, trans_b, 2.0, -3.0)
    np.testing.assert_array_equal(actual, expected)


def test_gemm_casts_alpha_and_beta_to_integer_dtype_like_cpu():
    actual, expected = run_gemm(ops_cuda.gemm, np.int64, False, True, 2.7, -1.9)
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("function", [ops_cuda.gemm, matmul.gemm_fallback])
def test_gemm_empty_inner_dimension_scales_c(dtype, function):
    c = random((M, N), dtype, 3)
    d_c = cuda.to_device(c)
    a, b = cuda.to_device(np.empty((M, 0), dtype)), cuda.to_device(np.empty((0, N), dtype))
    function(a, b, d_c, False, False, 1.0, 0.5)
    assert_close(d_c.copy_to_host(), 0.5 * c, dtype)


def test_gemm_with_empty_output_launches_nothing():
    c = cuda.to_device(np.empty((0, N)))
    ops_cuda.gemm(
        cuda.to_device(np.ones((0, K))), cuda.to_device(np.ones((K, N))), c, False, False, 1, 0
    )
    assert c.copy_to_host().shape == (0, N)


def test_gemm_rejects_mismatched_shapes():
    c = cuda.to_device(np.zeros((M, N)))
    a, b = cuda.to_device(np.ones((M, K))), cuda.to_device(np.ones((K + 1, N)))
    with pytest.raises(AssertionError, match="shapes"):
        ops_cuda.gemm(a, b, c, False, False, 1.0, 0.0)
    with pytest.raises(AssertionError, match="shapes"):
        matmul.gemm_fallback(a, b, c, False, False, 1.0, 0.0)


def test_gemm_runs_on_a_stream():
    a, b, c = (
        random((M, K), np.float64, 1),
        random((K, N), np.float64, 2),
        random((M, N), np.float64, 3),
    )
    stream = cuda.stream()
    d_a, d_b = cuda.to_device(a, stream=stream), cuda.to_device(b, stream=stream)
    d_c = cuda.to_device(c, stream=stream)
    ops_cuda.gemm(d_a, d_b, d_c, False, False, 1.0, 1.0, stream=stream)
    stream.synchronize()
    assert_close(d_c.copy_to_host(), a @ b + c, np.float64)


# ---------------------------------------------------------------------------------------------
# gemm_batched


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (-1.0, 2.0)])
@pytest.mark.parametrize("batch", [(1, 2, 2), (2, 1, 2)])
def test_gemm_batched_fallback_matches_cpu(dtype, alpha, beta, batch):
    actual, expected = run_gemm(
        matmul.gemm_batched_fallback, dtype, True, False, alpha, beta, batch, sizes=SMALL
    )
    assert_close(actual, expected, dtype)


def test_gemm_batched_rejects_bad_batch_sizes():
    a, b = cuda.to_device(np.ones((2, M, K))), cuda.to_device(np.ones((3, K, N)))
    c = cuda.to_device(np.zeros((3, M, N)))
    with pytest.raises(AssertionError, match="batch sizes"):
        ops_cuda.gemm_batched(a, b, c, False, False, 1.0, 0.0)


# ---------------------------------------------------------------------------------------------
# the cuBLAS path, against a stand-in for CuPy


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
            op_a = column_major(A, *((m, k) if transa == self.OP_N else (k, m)), lda, dtype)
            op_b = column_major(B, *((k, n) if transb == self.OP_N else (n, k)), ldb, dtype)
            op_a = op_a if transa == self.OP_N else op_a.T
            op_b = op_b if transb == self.OP_N else op_b.T
            c = column_major(C, m, n, ldc, dtype)
            alpha, beta = scalar(alpha, dtype), scalar(beta, dtype)
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
    if not ops_cuda.SIMULATOR:
        pytest.skip("the stand-in for CuPy reads the simulator's host memory")
    fake = FakeCupy()
    monkeypatch.setattr(matmul, "_cupy", lambda: fake)
    monkeypatch.setattr(matmul, "_device_pointer", lambda x: x._ary.__array_interface__["data"][0])
    return fake


def test_gemm_path_reports_cublas_where_cupy_is_usable(fake_cupy):
    assert ops_cuda.gemm_path() == "cublas"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (2.0, -3.0)])
def test_cublas_gemm_matches_cpu(fake_cupy, dtype, trans_a, trans_b, alpha, beta):
    actual, expected = run_gemm(ops_cuda.gemm, dtype, trans_a, trans_b, alpha, beta)
    assert fake_cupy.calls == [(("s" if dtype == np.float32 else "d") + "gemm", 0)]
    assert not np.isnan(actual).any()
    assert_close(actual, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a", BOOLS)
@pytest.mark.parametrize("trans_b", BOOLS)
@pytest.mark.parametrize("batch", [(3, 3, 3), (1, 3, 3), (3, 1, 3), (1, 1, 3)])
def test_cublas_gemm_batched_matches_cpu(fake_cupy, dtype, trans_a, trans_b, batch):
    actual, expected = run_gemm(ops_cuda.gemm_batched, dtype, trans_a, trans_b, 2.0, -1.0, batch)
    prefix = "s" if dtype == np.float32 else "d"
    assert fake_cupy.calls == [(prefix + "gemmStridedBatched", 0)]
    assert_close(actual, expected, dtype)


@pytest.mark.parametrize(
    "stream, pointer", [(FakeNumbaStream(), 0xBEEF), (FakeHandleOnlyStream(), 0xCAFE), (0, 0)]
)
def test_cublas_gemm_runs_on_the_callers_stream(fake_cupy, stream, pointer):
    a, b, c = random((M, K), np.float64, 1), random((K, N), np.float64, 2), np.zeros((M, N))
    d_c = cuda.to_device(c)
    ops_cuda.gemm(cuda.to_device(a), cuda.to_device(b), d_c, False, False, 1.0, 0.0, stream=stream)
    assert fake_cupy.calls == [("dgemm", pointer)]
    assert_close(d_c.copy_to_host(), a @ b, np.float64)


def test_cublas_path_leaves_integers_and_empty_inner_dimension_to_the_kernel(fake_cupy):
    actual, expected = run_gemm(ops_cuda.gemm, np.int64, True, False, 2.0, -3.0)
    np.testing.assert_array_equal(actual, expected)
    c = random((M, N), np.float64, 3)
    d_c = cuda.to_device(c)
    ops_cuda.gemm(
        cuda.to_device(np.empty((M, 0))), cuda.to_device(np.empty((0, N))), d_c, 0, 0, 1, 2
    )
    assert_close(d_c.copy_to_host(), 2 * c, np.float64)
    assert fake_cupy.calls == []


def test_gemm_fallback_never_uses_cublas(fake_cupy):
    actual, expected = run_gemm(matmul.gemm_fallback, np.float64, False, True, 1.0, 1.0)
    assert_close(actual, expected, np.float64)
    assert fake_cupy.calls == []


# ---------------------------------------------------------------------------------------------
# launch settings


@cuda.jit
def _record_block_size(out):
    if cuda.grid(1) == 0:
        out[0] = cuda.blockDim.x


def test_configure_sets_the_launches_of_later_kernels(monkeypatch):
    built = []
    factory = matmul._gemm_kernel
    monkeypatch.setattr(
        matmul, "_gemm_kernel", lambda dtype, tile: built.append(tile) or factory(dtype, tile)
    )
    block = cuda.to_device(np.zeros(1, np.int64))
    a, b, c = random((19, 9), np.float64, 1), random((9, 17), np.float64, 2), np.zeros((19, 17))
    with cuda_launches(block=32, gemm_tile=8):
        assert ops_cuda.launch_settings() == (32, 8)
        launch.launch(_record_block_size, 100, 0, block)
        assert block.copy_to_host()[0] == 32
        # results still equal the CPU twins' (checked by CUDA.run)
        CUDA.run("gemm", a, b, c, False, False, 1.0, 0.0)
        CUDA.run("syrk", a, np.zeros((19, 19)), False, 1.0, 0.0)
        CUDA.run("unary", a.reshape(-1), np.empty(a.size), 2)
        CUDA.run("reduce_accumulate", a.reshape(-1), np.zeros(9), 1, 19, 9, 0)
        assert built == [8, 8]  # the GEMM kernels for 8 x 8 tiles (gemm, syrk)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12)
    assert ops_cuda.launch_settings() == (8, 4)  # the tests' settings are back
    CUDA.run("gemm", a, b, c, False, False, 1.0, 0.0)
    assert built[-1] == 4
    launch.launch(_record_block_size, 100, 0, block)
    assert block.copy_to_host()[0] == 8


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"block": 0}, ValueError),
        ({"block": 2048}, ValueError),
        ({"gemm_tile": 33}, ValueError),
        ({"gemm_tile": 0}, ValueError),
        ({"block": 1.5}, TypeError),
        ({"gemm_tile": True}, TypeError),
    ],
)
def test_configure_refuses_impossible_launches(settings, error):
    before = ops_cuda.launch_settings()
    with pytest.raises(error, match=next(iter(settings))):
        ops_cuda.configure(**settings)
    assert ops_cuda.launch_settings() == before


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    import numpy as np

    from numtile.ops_cuda import matmul

    flag = types.boolean
    numeric = {np.float32: types.float32, np.float64: types.float64, np.int64: types.int64}
    for dtype, t in numeric.items():
        a = t[:, :, :]
        for tile in (4, 16, 32):
            kernel = matmul._gemm_kernel(np.dtype(dtype), tile)
            signature = (a, a, a, flag, flag, t, t, flag)
            cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    # complex tiles: the flags are integers (2: the conjugate transpose)
    for t in (types.complex64, types.complex128):
        kernel = matmul._gemm_kernel(np.dtype(str(t)), 16)
        signature = (t[:, :, :],) * 3 + (types.int64, types.int64, t, t, flag)
        cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))

    # the precision modes' rounding of GEMM inputs (ops_cuda/low_precision.py)
    from numtile.ops_cuda import low_precision

    u32, bits = types.uint32[::1], types.uint32
    signature = (u32, u32, bits, bits, bits)
    cuda.compile_ptx(low_precision._round_kernel.py_func, signature, cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
