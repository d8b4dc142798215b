"""The CUDA QR tile kernels on complex tiles (numtile.ops_cuda.qr, one code for complex64 and
complex128): under the simulator they leave the same R, reflectors and block factors T as the
CPU twins (LAPACK's zgeqrt, ztpqrt), apply Q and Q^H as zgemqrt and ztpmqrt do, and they
compile for a real GPU (sm_90: tests/ops_cuda/test_qr.py compiles them in complex128)."""

import numpy as np
from numba import cuda

from numtile import ops_cpu, ops_cuda
from tests.kernels import cuda_launches

TOLERANCE = {np.complex128: 1e-12}


def _complex(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _both(name, *arrays):
    """Run kernel ``name`` on copies of ``arrays`` (scalars pass through) on the CPU and on
    the simulated GPU; return both sets of arrays."""
    cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    getattr(ops_cpu, name)(*cpu)
    gpu = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in arrays]
    with cuda_launches(block=3):  # few simulated threads (each a Python thread) is fast
        getattr(ops_cuda, name)(*gpu)
    gpu = [g.copy_to_host() if isinstance(a, np.ndarray) else g for a, g in zip(arrays, gpu)]
    return cpu, gpu


def _agree(cpu, gpu, dtype):
    for expected, got in zip(cpu, gpu, strict=True):
        if isinstance(expected, np.ndarray):
            tolerance = 10 * TOLERANCE[dtype]
            np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)


def test_complex_reflector_kernels_match_lapack():
    # complex128 only (CI budget: complex64's LAPACK signatures cost ~10 s to compile cold);
    # the kernels are the same code for both (complex64 passed this test too, run by hand)
    dtype = np.complex128
    a = _complex((7, 5), dtype, 1)
    cpu, gpu = _both("geqrt", a, np.zeros((5, 2), dtype))  # R, V and T (two blocks of T)
    _agree(cpu, gpu, dtype)
    v, t = cpu
    for transpose in (True, False):  # Q^H c and Q c
        _agree(*_both("gemqrt", v, t, _complex((7, 3), dtype, 2), transpose), dtype)
    q = np.eye(7, dtype=dtype)
    ops_cuda_q = _both("gemqrt", v, t, q, False)[1][2]
    np.testing.assert_allclose(ops_cuda_q @ np.triu(v)[:7], a, atol=10 * TOLERANCE[dtype])
    for triangular, rows in [(False, 4), (True, 6)]:  # [R; B] with a square and a triangle B
        bottom = _complex((rows, 5), dtype, 3)
        cpu, gpu = _both("tpqrt", np.triu(v), bottom, np.zeros((5, 2), dtype), triangular)
        _agree(cpu, gpu, dtype)
        _, reflectors, factors, _ = cpu
        for transpose in (True, False):
            c = _complex((6, 3), dtype, 4), _complex((rows, 3), dtype, 5)
            args = reflectors, factors, *c, transpose, triangular
            _agree(*_both("tpmqrt", *args), dtype)


def test_tiled_complex_qr_runs_on_a_gpu_worker():
    # every task on the CUDA twins (simulator): the blocked panels (T conjugated as on a CPU
    # worker), the complex GEMM updates and the TSQR leaves of a tall matrix
    import numtile as nt

    before = ops_cuda.launch_settings()  # the CUDA node configures every later launch
    nt.init(ncpu=1, ncuda=1, restrict="cuda", cuda_block=4, cuda_gemm_tile=2)
    try:
        for shape, tile in [((4, 3), (2, 2)), ((6, 2), (3, 2))]:  # blocked, then TSQR
            a = _complex(shape, np.complex128, 6)
            q, r = (f.to_numpy() for f in nt.linalg.qr(nt.from_numpy(a, tile_shape=tile)))
            # R as LAPACK's up to the signs of its rows (TSQR's tree picks its own), its
            # diagonal real; Q unitary, Q R = a
            np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(a)[1]), atol=1e-12)
            np.testing.assert_array_equal(np.tril(r, -1), 0)
            np.testing.assert_array_equal(np.diagonal(r).imag, 0)
            np.testing.assert_allclose(q.conj().T @ q, np.eye(shape[1]), atol=1e-12)
            np.testing.assert_allclose(q @ r, a, atol=1e-12)
    finally:
        nt.init()
        ops_cuda.configure(*before)
