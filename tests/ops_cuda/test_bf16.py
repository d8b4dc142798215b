"""The CUDA bfloat16 conversions compile for a real GPU (sm_90 PTX), with the uint16 fill and
copy the codelets run on bfloat16 bit patterns; their results are tested under the simulator
in tests/ops_cpu/test_bf16.py."""

_COMPILE_ALL = """
    from numtile.ops_cuda import bf16, copy

    u16, u32, i64 = types.uint16[::1], types.uint32[::1], types.int64
    cuda.compile_ptx(bf16._widen_kernel.py_func, (u16, u32), cc=(9, 0))
    cuda.compile_ptx(bf16._narrow_kernel.py_func, (u32, u16), cc=(9, 0))
    cuda.compile_ptx(copy._fill_kernel.py_func, (u16, types.uint16), cc=(9, 0))
    s = types.UniTuple(i64, 2)
    cuda.compile_ptx(copy._copy_kernel.py_func, (u16, i64, s, u16, i64, s, s, i64), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
