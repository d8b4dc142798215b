"""The generated CUDA kernels of ``nt.fuse`` (ops_cuda/fusion.py) compile for a real GPU
(sm_90). Their values are tested under the simulator in tests/tiletensor/test_fusion.py."""

_COMPILE_FUSED = """
    from numtile.ops_cuda import fusion

    # where(x * c0 > y, maximum(x * c0, float64(n)), y): operators, a device function
    # (maximum), compare, cast and where steps, a scalar argument, inputs of three dtypes
    # (the unary device function, 32 ops, is the elementwise PTX test's)
    expression = (
        ("input", "float32", 0),
        ("input", "float64", 1),
        ("input", "int32", 2),
        ("scalar", "float32", 0),
        ("binary", "float32", "multiply", 0, 3),
        ("cast", "float64", 4),
        ("cast", "float64", 2),
        ("binary", "float64", "maximum", 5, 6),
        ("compare", "bool", "greater", 5, 1),
        ("where", "float64", 8, 7, 1),
    )
    i64 = types.int64
    two = types.UniTuple(i64, 2)
    signature = (types.float64[::1], two, types.float32[::1], two, types.float64[::1], two)
    signature += (types.int32[::1], two, types.float32)
    kernel = fusion.kernel(expression, 3, 1)
    cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
"""


def test_fused_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_FUSED)
