"""What only the CUDA scan and moments kernels have: compilation for a real GPU (their results
against the CPU twins are tested on both backends by tests/ops_cpu/test_scan.py and
test_moments.py)."""

_COMPILE_ALL = """
    from numtile.ops_cuda import moments, scan

    i64 = types.int64
    for t in (types.float32, types.float64, i64, types.uint64, types.complex64, types.complex128):
        a = t[::1]
        cuda.compile_ptx(scan._cumulative_sum_kernel.py_func, (a, a, i64, i64, i64), cc=(9, 0))
        cuda.compile_ptx(scan._scan_carry_kernel.py_func, (a, a, a, i64, i64, i64), cc=(9, 0))
        cuda.compile_ptx(
            scan._cumulative_sum_from_kernel.py_func, (a, a, a, i64, i64, i64), cc=(9, 0)
        )
    for t in (types.float32, types.float64):
        f64 = types.float64[::1]
        signature = (t[::1], f64, f64, f64, f64, i64, i64, i64)
        cuda.compile_ptx(moments._moments_kernel.py_func, signature, cc=(9, 0))
    cuda.compile_ptx(moments._merge_kernel.py_func, (types.float64[::1],) * 8, cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
