"""The CUDA kernels on bfloat16 and float16 bits compile for a real GPU (sm_90); their results
are tested under the simulator in tests/tiletensor/test_bf16_kernels.py and test_f16_kernels.py.
The binary broadcasting kernel and the reductions are compiled (the widening, the rounding,
libdevice's bit casts and the local result); the unary and comparison kernels share those
device functions and the float32 chains that test_elementwise.py compiles (the unary chain
alone costs about a minute here). float16's binary kernel compiles its widening and rounding
(its reductions differ from bfloat16's in the widening only)."""

_COMPILE_ALL = """
    import numpy as np

    from numtile.ops_cuda import bf16_kernels as k
    from numtile.ops_cuda.f16_kernels import F16

    i64, bits, f32 = types.int64, types.uint16, types.float32
    u16, s = np.dtype(np.uint16), types.UniTuple(i64, 2)
    binary = k._broadcast_kernel(k._binary_function(0), f32, u16, u16, u16)
    f16_binary = k._broadcast_kernel(k._binary_function(0), f32, u16, u16, u16, F16)
    arrays = (bits[::1], bits, i64, s, bits[::1], bits, i64, s, bits[::1], s, i64)
    kernels = [(binary, arrays), (f16_binary, arrays)]
    kernels += [
        (kernel, (bits[::1], f32[::1], i64, i64, i64, i64))
        for kernel in k._reduce_kernels(types.float64, types.float64, k._widened)
    ]
    for kernel, signature in kernels:
        cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
"""


def test_bf16_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
