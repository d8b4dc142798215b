"""What only the CUDA structured-tile kernels have: compilation for a real GPU (their results
against NumPy and the CPU twins are tested, on both backends, by
tests/ops_cpu/test_structured.py)."""

_COMPILE_ALL = """
    from numtile.ops_cuda import structured

    i64 = types.int64
    for t in (types.float32, types.float64, types.int64, types.boolean, types.complex128):
        signature = (t[:, :, :], t[:, :, :], i64, i64, i64, i64)
        cuda.compile_ptx(structured._band_kernel.py_func, signature, cc=(9, 0))
    for t, wide in ((types.float32, types.float64), (types.float64, types.float64),
                    (types.complex64, types.complex128), (types.complex128, types.complex128)):
        signature = (t[::1], wide, wide, i64, i64, wide)
        cuda.compile_ptx(structured._linspace_kernel.py_func, signature, cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
