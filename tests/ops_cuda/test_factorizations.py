"""What only the CUDA factorisation kernels have (numtile.ops_cuda.factorizations): potrf's info
array and partial factors, NaN pivots, right-hand sides beyond the grid, alpha == 0, shape
checks. Results against NumPy (and the CPU twins) are tested, on both backends, by
tests/ops_cpu/test_factorizations.py.
"""

import numpy as np
import pytest
from numba import cuda

from numtile import ops_cpu, ops_cuda
from tests.kernels import random, spd, triangle

FLOATS = [np.float32, np.float64]
TOLERANCE = {np.float32: 2e-5, np.float64: 1e-12}
BOOLS = [False, True]


def assert_close(actual, expected, dtype):
    tolerance = TOLERANCE[np.dtype(dtype).type]
    np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance)


# ---------------------------------------------------------------------------------------------
# potrf


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("info_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("pivot, order", [(-100.0, 4), (0.0, 4), (0.0, 1), (-1.0, 6)])
def test_potrf_reports_first_leading_minor_not_positive_definite(dtype, info_dtype, pivot, order):
    a = spd(6, dtype)
    a[order - 1, order - 1] = pivot  # leading minors of order < `order` are fine
    expected = a.copy()
    cpu_info = ops_cpu.potrf(expected)
    d_a, info = cuda.to_device(a), cuda.to_device(np.zeros(1, info_dtype))
    ops_cuda.potrf(d_a, info)
    assert info.copy_to_host()[0] == cpu_info == order
    result = d_a.copy_to_host()
    done = order - 1  # the columns factored before the failure are final
    assert_close(result[:, :done], expected[:, :done], dtype)
    assert np.all(np.triu(result, 1) == 0)


def test_potrf_reports_a_nan_pivot_like_lapack_and_cpu():
    a = spd(4, np.float64)
    a[2, 2] = np.nan  # reference LAPACK: a NaN pivot is not positive, info = its column
    expected = a.copy()
    cpu_info = ops_cpu.potrf(expected)  # under OpenBLAS too, which does not test for NaN
    d_a, info = cuda.to_device(a), cuda.to_device(np.full(1, -1, np.int32))
    ops_cuda.potrf(d_a, info)
    assert info.copy_to_host()[0] == cpu_info == 3
    np.testing.assert_allclose(d_a.copy_to_host()[:, :2], expected[:, :2], rtol=1e-12)


def test_potrf_rejects_non_square():
    with pytest.raises(AssertionError, match="square"):
        ops_cuda.potrf(cuda.to_device(np.ones((2, 3))), cuda.to_device(np.zeros(1, np.int32)))


# ---------------------------------------------------------------------------------------------
# trsm


@pytest.mark.parametrize("left", BOOLS)
def test_trsm_many_right_hand_sides_loop_over_the_grid(left):
    # 20 right-hand sides: more than the simulator's 2 blocks of 8 threads
    b = random((3, 20) if left else (20, 3), np.float64, 5)
    a, _ = triangle(3, True, False, np.float64)
    expected = b.copy()
    ops_cpu.trsm(a, expected, left, True, False, False, 2.0)
    d_b = cuda.to_device(b)
    ops_cuda.trsm(cuda.to_device(a), d_b, left, True, False, False, 2.0)
    assert_close(d_b.copy_to_host(), expected, np.float64)


def test_trsm_with_alpha_zero_zeroes_b_like_cpu():
    b = np.full((3, 4), np.nan)
    a, _ = triangle(3, True, False, np.float64)
    expected = b.copy()
    ops_cpu.trsm(a, expected, True, True, False, False, 0.0)
    d_b = cuda.to_device(b)
    ops_cuda.trsm(cuda.to_device(a), d_b, True, True, False, False, 0.0)
    np.testing.assert_array_equal(d_b.copy_to_host(), expected)


def test_trsm_rejects_mismatched_a():
    with pytest.raises(AssertionError, match="does not match"):
        ops_cuda.trsm(
            cuda.to_device(np.eye(3)), cuda.to_device(np.ones((4, 2))), True, True, 0, 0, 1
        )


# ---------------------------------------------------------------------------------------------
# syrk


def test_syrk_with_alpha_zero_does_not_read_a_like_cpu():
    a, c = np.full((4, 3), np.nan), random((4, 4), np.float64, 7)
    expected = c.copy()
    ops_cpu.syrk(a, expected, False, 0.0, 2.0)
    d_c = cuda.to_device(c)
    ops_cuda.syrk(cuda.to_device(a), d_c, False, 0.0, 2.0)
    lower = np.tril_indices(4)
    assert_close(d_c.copy_to_host()[lower], expected[lower], np.float64)


def test_syrk_rejects_mismatched_shapes():
    with pytest.raises(AssertionError, match="shapes"):
        ops_cuda.syrk(cuda.to_device(np.ones((3, 2))), cuda.to_device(np.ones((4, 4))), 0, 1, 0)


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    from numtile.ops_cuda import factorizations

    flag = types.boolean
    for t in (types.float32, types.float64):
        a = t[:, ::1]
        for info in (types.int32[::1], types.int64[::1]):
            cuda.compile_ptx(factorizations._potrf_kernel.py_func, (a, info), cc=(9, 0))
        signature = (a, a, flag, flag, flag, flag, t)
        cuda.compile_ptx(factorizations._trsm_kernel.py_func, signature, cc=(9, 0))
    # complex tiles (the complex LU and Cholesky): an integer trans flag, 2 = conjugate
    t = types.complex128
    signature = (t[:, ::1], t[:, ::1], flag, flag, types.int64, flag, t)
    cuda.compile_ptx(factorizations._trsm_kernel.py_func, signature, cc=(9, 0))
    cuda.compile_ptx(factorizations._potrf_kernel.py_func, (t[:, ::1], types.int32[::1]), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
