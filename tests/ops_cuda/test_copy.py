"""What only the CUDA copy kernels have (numtile.ops_cuda.copy and the launch helpers it uses):
coalesced launch parameters, host-only shapes and strides, streams, and compilation for a real
GPU. Their results against NumPy and the CPU twins are tested, on both backends, by
tests/ops_cpu/test_copy.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from numtile import ops_cuda
from numtile.ops_cuda import launch


@pytest.mark.parametrize(
    ("shape", "strides", "expected"),
    [
        ((), [()], ((1,), [(0,)])),
        ((1, 1), [(5, 1), (0, 0)], ((1,), [(0,), (0,)])),
        ((3, 4), [(4, 1), (4, 1)], ((12,), [(1,), (1,)])),
        ((3, 4), [(1, 3), (4, 1)], ((3, 4), [(1, 3), (4, 1)])),
        ((2, 1, 3, 4), [(12, 99, 4, 1), (0, 7, 0, 0)], ((24,), [(1,), (0,)])),
        ((2, 3, 4), [(-12, -4, -1), (24, 8, 2)], ((24,), [(-1,), (2,)])),
        ((2, 3, 4), [(12, 4, 1), (0, 4, 1)], ((2, 12), [(12, 1), (0, 1)])),
        ((0, 3), [(3, 1)], ((0,), [(1,)])),
    ],
)
def test_coalesce_keeps_the_addressed_elements(shape, strides, expected):
    merged_shape, merged_strides = launch.coalesce(shape, *strides)
    assert (merged_shape, list(merged_strides)) == expected
    # the same offsets in the same order
    for original, merged in zip(strides, merged_strides):
        offsets = [np.dot(i, original) for i in np.ndindex(*shape)] if shape else [0]
        coalesced = [np.dot(i, merged) for i in np.ndindex(*merged_shape)]
        assert offsets == coalesced


def test_launch_parameters_must_be_on_the_host():
    d = cuda.to_device(np.ones(4))
    device_strides = cuda.to_device(np.array([1], np.int64))
    with pytest.raises(TypeError, match="host array"):
        ops_cuda.copy_strided(d, 0, device_strides, d, 0, [1], [4])
    assert launch.host_ints(np.array([3, -2], np.int64), "x") == (3, -2)
    assert launch.host_ints((), "x") == ()


def test_launches_on_a_stream():
    stream = cuda.stream()
    d_src = cuda.to_device(np.arange(40.0), stream=stream)
    d_dst = cuda.device_array(40, np.int64, stream=stream)
    ops_cuda.copy_strided(d_src, 39, [-1], d_src, 0, [1], [20], stream=stream)  # no overlap
    ops_cuda.cast(d_src, d_dst, stream=stream)
    ops_cuda.fill(d_src[:3], 9.0, stream=stream)
    stream.synchronize()
    expected = np.arange(40)
    expected[:20] = np.arange(39, 19, -1)
    np.testing.assert_array_equal(d_dst.copy_to_host(stream=stream), expected)
    np.testing.assert_array_equal(d_src.copy_to_host(stream=stream)[:4], [9, 9, 9, 36])


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    from numtile.ops_cuda import copy

    i64 = types.int64
    scalars = (types.float32, types.float64, i64, types.boolean)
    for t in scalars:
        a = t[::1]
        for value in scalars:
            cuda.compile_ptx(copy._fill_kernel.py_func, (a, value), cc=(9, 0))
        for rank in (1, 2, 4):
            s = types.UniTuple(i64, rank)
            signature = (a, i64, s, a, i64, s, s, i64)
            cuda.compile_ptx(copy._copy_kernel.py_func, signature, cc=(9, 0))
        for target in scalars:
            cuda.compile_ptx(copy._cast_kernel.py_func, (a, target[::1]), cc=(9, 0))

    # bfloat16 tiles: the bit conversions, and the fill and copy of their uint16 patterns
    from numtile.ops_cuda import bf16

    u16, u32 = types.uint16[::1], types.uint32[::1]
    cuda.compile_ptx(bf16._widen_kernel.py_func, (u16, u32), cc=(9, 0))
    cuda.compile_ptx(bf16._narrow_kernel.py_func, (u32, u16), cc=(9, 0))
    for t in (types.float64, i64, types.boolean):
        cuda.compile_ptx(bf16._from_kernel.py_func, (t[::1], u16), cc=(9, 0))
    f2, u2 = types.float32[:, :], types.uint16[:, :]
    signature = (f2, f2, types.float32[:], u2, types.boolean, types.boolean)
    cuda.compile_ptx(bf16._narrow_sum_kernel.py_func, signature, cc=(9, 0))
    cuda.compile_ptx(copy._fill_kernel.py_func, (u16, types.uint16), cc=(9, 0))
    s = types.UniTuple(i64, 2)
    cuda.compile_ptx(copy._copy_kernel.py_func, (u16, i64, s, u16, i64, s, s, i64), cc=(9, 0))

    # float16 tiles: widened exactly, narrowed from float32, float64 and integers
    cuda.compile_ptx(bf16._f16_widen_kernel.py_func, (u16, types.float32[::1]), cc=(9, 0))
    for t in (types.float32, types.float64, i64):
        cuda.compile_ptx(bf16._f16_from_kernel.py_func, (t[::1], u16), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
