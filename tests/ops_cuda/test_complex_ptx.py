"""The complex CUDA kernels (ops_cuda/complex.py: annex G's exp, the standard's power as
exp(w log z), annex G products in prod, multiply and divide) compile for a real GPU (sm_90),
in complex128. Their values are tested under the simulator in
tests/tiletensor/test_complex_power_prod.py and test_complex_arithmetic.py."""

_COMPILE_COMPLEX = """
    from numtile.ops_cuda import complex as ops

    i64 = types.int64
    t = types.complex128  # (complex64 is the same code: one dtype, for the CI budget)
    a, s = t[::1], types.UniTuple(i64, 2)
    kernels = [
        (ops._unary_kernel, (a, a, i64)),
        (ops._reduce_kernel, (a, a, i64, i64, i64, i64)),
        (ops._binary_kernel, (a, t, i64, s, a, t, i64, s, a, s, i64)),
    ]
    for kernel, signature in kernels:
        cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
"""


def test_complex_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_COMPLEX)
