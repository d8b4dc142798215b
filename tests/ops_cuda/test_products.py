"""What only the CUDA product kernels have (numtile.ops_cuda.products): tiles longer than the
grid, and their compilation for a real GPU. Results against NumPy and the CPU twin are tested
on both backends by tests/ops_cpu/test_products.py."""

import numpy as np
from numba import cuda

from numtile import ops_cpu, ops_cuda
from tests.kernels import random


def test_cross_of_more_vectors_than_threads_loops_over_the_grid():
    a, b = random((40, 3, 2), np.float64, 3), random((40, 3, 2), np.float64, 4)
    expected = np.empty_like(a)
    ops_cpu.cross(a.reshape(-1), b.reshape(-1), expected.reshape(-1), 2)
    out = cuda.to_device(np.zeros(a.size))
    ops_cuda.cross(cuda.to_device(a.reshape(-1)), cuda.to_device(b.reshape(-1)), out, 2)
    np.testing.assert_array_equal(out.copy_to_host().reshape(a.shape), expected)


_COMPILE_ALL = """
    from numtile.ops_cuda import products

    for t in (types.float32, types.float64, types.complex64, types.complex128, types.int64):
        a = t[::1]
        cuda.compile_ptx(products._cross_kernel.py_func, (a, a, a, types.int64), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
