"""The complex GEMM twins (numtile.ops_cuda.matmul on complex64/complex128 tiles): the tiled
``@cuda.jit`` kernel under the simulator and the cuBLAS c/zgemm path (through the stand-in for
CuPy of test_matmul.py, extended with 'C' and the complex routines) against the CPU kernel, for
every flag (0, 1 transpose, 2 conjugate transpose); ``herk`` (the complex Cholesky's
update, the same kernel on the lower triangle), ``trsm`` with a conjugate transpose and
``potrf`` of a Hermitian tile; the real-only QR kernels refuse complex tiles. Their
PTX for sm_90 is compiled by the compile tests of test_matmul.py and test_factorizations.py."""

import numpy as np
import pytest
from numba import cuda

from numtile import ops_cpu, ops_cuda
from tests.ops_cuda import test_matmul
from tests.ops_cuda.fake_libraries import column_major, scalar

COMPLEX = [np.complex64, np.complex128]
TOLERANCE = {np.complex64: 2e-5, np.complex128: 1e-12}
M, N, K = 5, 3, 6  # no multiple of the simulator's GEMM tile (4)


def _operands(dtype, trans_a, trans_b, batch=None, seed=0):
    rng = np.random.default_rng(seed)

    def draw(shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)

    shape_a = (K, M) if trans_a else (M, K)
    shape_b = (N, K) if trans_b else (K, N)
    if batch:
        return draw((batch[0], *shape_a)), draw((batch[1], *shape_b)), draw((batch[2], M, N))
    return draw(shape_a), draw(shape_b), draw((M, N))


def _run(function, dtype, trans_a, trans_b, alpha, beta, batch=None):
    a, b, c = _operands(dtype, trans_a, trans_b, batch)
    d_c = cuda.to_device(c)
    function(cuda.to_device(a), cuda.to_device(b), d_c, trans_a, trans_b, alpha, beta)
    (ops_cpu.gemm_batched if batch else ops_cpu.gemm)(a, b, c, trans_a, trans_b, alpha, beta)
    return d_c.copy_to_host(), c


def _close(actual, expected, dtype):
    tolerance = TOLERANCE[np.dtype(dtype).type]
    np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance)


def test_tiled_kernel_matches_cpu_for_every_flag():
    for trans_a in (0, 1, 2):
        for trans_b in (0, 1, 2):
            _close(*_run(ops_cuda.gemm, np.complex128, trans_a, trans_b, 1.5, -0.5), np.complex128)
    batch = (2, 1, 2)
    batched = _run(ops_cuda.matmul.gemm_batched_fallback, np.complex64, 2, 1, 1.0, 0.0, batch)
    _close(*batched, np.complex64)


class ComplexFakeCupy(test_matmul.FakeCupy):
    """The stand-in with cuBLAS's 'C' operation and the c/z routines (complex products)."""

    OP_C = 2

    def __init__(self):
        super().__init__()
        cublas = self.cuda.cublas
        cublas.CUBLAS_OP_C = self.OP_C
        for prefix, dtype in (("c", np.complex64), ("z", np.complex128)):
            setattr(cublas, prefix + "gemm", self._gemm(prefix + "gemm", dtype))
            name = prefix + "gemmStridedBatched"
            setattr(cublas, name, self._gemm_strided(name, dtype))

    def _gemm(self, name, dtype):
        if np.dtype(dtype).kind != "c":
            return super()._gemm(name, dtype)

        def operation(x, flag):
            return {self.OP_N: x, self.OP_T: x.T, self.OP_C: x.conj().T}[flag]

        def gemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
            assert handle == 4242 and self.current is not None, "no current stream"
            self.calls.append((name, self.current))
            op_a = column_major(A, *((m, k) if transa == self.OP_N else (k, m)), lda, dtype)
            op_b = column_major(B, *((k, n) if transb == self.OP_N else (n, k)), ldb, dtype)
            c = column_major(C, m, n, ldc, dtype)
            alpha, beta = scalar(alpha, dtype), scalar(beta, dtype)
            product = alpha * (
                operation(op_a, transa).astype(np.complex128) @ operation(op_b, transb)
            )
            c[...] = product if beta == 0 else product + beta * c

        return gemm


@pytest.fixture(name="fake_cupy")
def fake_cupy_fixture(monkeypatch):
    if not ops_cuda.SIMULATOR:
        pytest.skip("the stand-in for CuPy reads the simulator's host memory")
    fake = ComplexFakeCupy()
    monkeypatch.setattr(ops_cuda.matmul, "_cupy", lambda: fake)
    monkeypatch.setattr(
        ops_cuda.matmul, "_device_pointer", lambda x: x._ary.__array_interface__["data"][0]
    )
    return fake


@pytest.mark.parametrize("dtype", COMPLEX)
def test_cublas_path_matches_cpu_for_every_flag(fake_cupy, dtype):
    prefix = "c" if dtype == np.complex64 else "z"
    for trans_a, trans_b in [(0, 0), (2, 1), (1, 2), (2, 2)]:
        fake_cupy.calls.clear()
        _close(*_run(ops_cuda.gemm, dtype, trans_a, trans_b, 2.0, 0.5), dtype)
        assert fake_cupy.calls == [(prefix + "gemm", 0)]
    fake_cupy.calls.clear()
    _close(*_run(ops_cuda.gemm_batched, dtype, 0, 2, 1.0, 0.0, batch=(3, 1, 3)), dtype)
    assert fake_cupy.calls == [(prefix + "gemmStridedBatched", 0)]


def test_herk_matches_cpu_on_the_lower_triangle():
    # the Hermitian rank-k update of the complex Cholesky: c = alpha op(a) op(a)^H + beta c
    a, _, _ = _operands(np.complex128, False, False)  # (M, K)
    for trans in (False, True):
        tile = a.T.copy() if trans else a
        c = np.tril(_operands(np.complex128, False, False, seed=3)[0] @ a.conj().T)
        c[np.diag_indices(M)] = c.diagonal().real  # Hermitian: BLAS ignores imag(diagonal)
        d_c = cuda.to_device(c)
        ops_cuda.herk(cuda.to_device(tile), d_c, trans, -1.0, 0.5)
        expected = c.copy()
        ops_cpu.herk(tile, expected, trans, -1.0, 0.5)
        _close(np.tril(d_c.copy_to_host()), np.tril(expected), np.complex128)
        op = tile.conj().T if trans else tile
        _close(np.tril(expected), np.tril(-(op @ op.conj().T) + 0.5 * c), np.complex128)


def test_trsm_matches_cpu_for_every_flag():
    # the complex LU's and Cholesky's triangular solves, trans 2 = a^H (conjugated diagonal)
    rng = np.random.default_rng(5)
    a = np.tril(rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))) + 3 * np.eye(4)
    for left in (True, False):
        for lower, trans in [(True, 2), (False, 2), (True, 1), (False, 0)]:
            stored = a if lower else a.T.copy()
            b = rng.standard_normal((4, 3) if left else (3, 4)) + 0j
            d_b = cuda.to_device(b)
            ops_cuda.trsm(cuda.to_device(stored), d_b, left, lower, trans, False, 2.0)
            ops_cpu.trsm(stored, b, left, lower, trans, False, 2.0)
            _close(d_b.copy_to_host(), b, np.complex128)


def test_potrf_matches_cpu_on_a_hermitian_matrix():
    rng = np.random.default_rng(6)
    g = rng.standard_normal((5, 5)) + 1j * rng.standard_normal((5, 5))
    h = g @ g.conj().T + 5 * np.eye(5)
    d_h, info = cuda.to_device(h), cuda.to_device(np.ones(1, np.int32))
    ops_cuda.potrf(d_h, info)
    assert info.copy_to_host()[0] == ops_cpu.potrf(h) == 0
    _close(d_h.copy_to_host(), h, np.complex128)
    _close(h, np.linalg.cholesky(g @ g.conj().T + 5 * np.eye(5)), np.complex128)
