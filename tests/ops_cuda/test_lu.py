"""What only the CUDA LU kernels have (numtile.ops_cuda.lu): panels taller than a block,
empty operands, shape checks and their compilation for a real GPU. Results against SciPy and
the CPU twins are tested on both backends by tests/ops_cpu/test_lu.py."""

import numpy as np
import pytest
from numba import cuda

from numtile import ops_cpu, ops_cuda
from tests.kernels import random


def test_getrf_of_a_panel_taller_than_the_block_matches_cpu():
    a = random((40, 3), np.float64, 7)  # more rows than the simulator's threads
    expected, cpu_pivots, cpu_info = a.copy(), np.zeros(3, np.int64), np.zeros(1, np.int32)
    ops_cpu.getrf(expected, cpu_pivots, cpu_info)
    d_a, pivots, info = (
        cuda.to_device(v) for v in (a, np.zeros(3, np.int64), np.ones(1, np.int32))
    )
    ops_cuda.getrf(d_a, pivots, info)
    np.testing.assert_array_equal(pivots.copy_to_host(), cpu_pivots)
    assert info.copy_to_host()[0] == cpu_info[0] == 0
    np.testing.assert_allclose(d_a.copy_to_host(), expected, rtol=1e-12, atol=1e-12)


def test_laswp_of_many_columns_loops_over_the_grid():
    a = random((5, 37), np.float64, 8)
    pivots = np.array([2, 3, 2], np.int64)
    expected = a.copy()
    ops_cpu.laswp(expected, pivots)
    d_a = cuda.to_device(a)
    ops_cuda.laswp(d_a, cuda.to_device(pivots))
    np.testing.assert_array_equal(d_a.copy_to_host(), expected)


def test_getrf_rejects_short_pivots():
    with pytest.raises(AssertionError, match="too short"):
        ops_cuda.getrf(
            cuda.to_device(np.eye(3)),
            cuda.to_device(np.zeros(2, np.int64)),
            cuda.to_device(np.zeros(1, np.int32)),
        )


_COMPILE_ALL = """
    from numtile.ops_cuda import lu

    for t in (types.float32, types.float64):
        a = t[:, ::1]
        for pivots in (types.int32[::1], types.int64[::1]):
            cuda.compile_ptx(lu._getrf_kernel.py_func, (a, pivots, types.int32[::1]), cc=(9, 0))
            cuda.compile_ptx(lu._laswp_kernel.py_func, (a, pivots), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
