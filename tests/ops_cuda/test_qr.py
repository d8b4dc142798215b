"""What only the CUDA QR kernels have (numtile.ops_cuda.qr): blocks of any width, shape checks
and their compilation for a real GPU (float32, float64 and complex128). Results against NumPy
and the CPU twins are tested on both backends by tests/ops_cpu/test_qr.py, complex tiles in
test_qr_complex.py."""

import numpy as np
import pytest
from numba import cuda

from numtile import ops_cpu, ops_cuda
from tests.kernels import cuda_launches, random


@pytest.mark.parametrize("threads", [1, 3, 32])
def test_geqrt_and_tpqrt_agree_with_cpu_for_any_block(threads):
    a, b = random((10, 7), np.float64, 1), random((6, 7), np.float64, 2)
    expected_a, expected_b = a.copy(), b.copy()
    expected_t, expected_u = np.zeros((7, 3)), np.zeros((7, 3))
    ops_cpu.geqrt(expected_a, expected_t)
    ops_cpu.tpqrt(expected_a, expected_b, expected_u, False)
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    d_t, d_u = cuda.to_device(np.full((7, 3), 5.0)), cuda.to_device(np.full((7, 3), 5.0))
    with cuda_launches(block=threads):
        ops_cuda.geqrt(d_a, d_t)
        ops_cuda.tpqrt(d_a, d_b, d_u, False)
    for device, expected in [(d_a, expected_a), (d_b, expected_b), (d_t, expected_t)]:
        np.testing.assert_allclose(device.copy_to_host(), expected, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(d_u.copy_to_host(), expected_u, rtol=1e-11, atol=1e-12)


def test_shape_checks_raise_the_cpu_messages():
    tile = cuda.to_device(np.eye(3))
    with pytest.raises(AssertionError, match="geqrt: t must be"):
        ops_cuda.geqrt(tile, cuda.to_device(np.zeros((2, 2))))
    with pytest.raises(AssertionError, match="gemqrt: shapes do not agree"):
        ops_cuda.gemqrt(tile, cuda.to_device(np.zeros((3, 2))), cuda.to_device(np.eye(4)), True)
    with pytest.raises(AssertionError, match="triu_copy: source too small"):
        ops_cuda.triu_copy(tile, cuda.to_device(np.zeros((4, 3))), 0)


_COMPILE_ALL = """
    from numtile.ops_cuda import qr

    for t in (types.float32, types.float64, types.complex128):
        a = t[:, ::1]
        i = types.int64
        cuda.compile_ptx(qr._geqrt_kernel.py_func, (a, a, i), cc=(9, 0))
        cuda.compile_ptx(qr._gemqrt_kernel.py_func, (a, a, a, types.boolean, i), cc=(9, 0))
        cuda.compile_ptx(qr._tpqrt_kernel.py_func, (a, a, a, i, i, i), cc=(9, 0))
        signature = (a, a, a, a, types.boolean, i, i, i)
        cuda.compile_ptx(qr._tpmqrt_kernel.py_func, signature, cc=(9, 0))
        if t != types.complex128:  # copies, no arithmetic: the real signatures stand for it
            cuda.compile_ptx(qr._triu_copy_kernel.py_func, (a, t[:, :], i), cc=(9, 0))
            cuda.compile_ptx(qr._eye_fill_kernel.py_func, (a, i), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
