"""The CUDA rounding kernel of the precision modes compiles for a real GPU (sm_90 PTX); its
results are tested under the simulator in tests/nn/test_precision.py."""

_COMPILE_ALL = """
    from numtile.ops_cuda import low_precision

    u32 = types.uint32[::1]
    signature = (u32, u32, types.uint32, types.uint32, types.uint32)
    cuda.compile_ptx(low_precision._round_kernel.py_func, signature, cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
