"""numtile.ops_cuda.memory against its ops_cpu twins, under the CUDA simulator.

Every case runs the CPU kernel on host arrays and the CUDA launcher on device copies, then
compares the results. The last test compiles every kernel specialisation to PTX for a real
GPU (sm_90) in a process without the simulator.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from numtile.ops_cpu import memory as cpu
from numtile.ops_cuda import memory as gpu

DTYPES = [np.float32, np.float64, np.int64, np.bool_]


def view_arguments(view, base):
    """(offset, element strides) of a NumPy view into the C-contiguous array ``base``."""
    start = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return start // base.itemsize, np.array(view.strides, dtype=np.int64) // base.itemsize


# (source base shape, source view, destination base shape, destination view)
COPY_CASES = {
    "contiguous rows with offsets": ((6, 7), lambda a: a[2:5], (5, 7), lambda a: a[1:4]),
    "transpose 2-d": ((3, 13), lambda a: a.T, (13, 3), lambda a: a),
    "transpose 3-d": ((2, 3, 5), lambda a: a.transpose(2, 0, 1), (5, 2, 3), lambda a: a),
    "reversed 2-d": ((4, 5), lambda a: a[::-1, ::-1], (4, 5), lambda a: a),
    "reversed step 1-d": ((39,), lambda a: a[::-2], (20,), lambda a: a),
    "block into larger": ((3, 7), lambda a: a, (5, 9), lambda a: a[1:4, 2:9]),
    "strided to reversed": ((4, 6), lambda a: a[:, ::2].T, (6, 4), lambda a: a[::-2, ::-1]),
    "broadcast source": ((9,), lambda a: np.broadcast_to(a, (3, 9)), (3, 9), lambda a: a),
    "inner extent 1": ((19, 3), lambda a: a[:, 1:2], (19, 1), lambda a: a),
    "0-d": ((3, 4), lambda a: a[1, 2, ...], (2,), lambda a: a[1, ...]),
    "empty": ((3, 4), lambda a: a[:, :0], (3, 2), lambda a: a[:, :0]),
    "4-d sliced transpose": (
        (2, 3, 4, 5),
        lambda a: a[:, ::2, 1:, ::-1].transpose(3, 0, 2, 1),
        (5, 2, 3, 2),
        lambda a: a,
    ),
}


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_matches_cpu(dtype):
    expected = np.zeros(37, dtype)
    d_out = cuda.to_device(expected)
    for value, part in ((3, slice(None)), (-0.5, slice(2, 25)), (True, slice(30, 31))):
        value = -1 if dtype == np.int64 and value == -0.5 else value
        cpu.fill(expected[part], value)
        gpu.fill(d_out[part], value)
        np.testing.assert_array_equal(d_out.copy_to_host(), expected)
    gpu.fill(d_out[:0], 5)  # nothing to fill
    cpu.fill(expected, np.dtype(dtype).type(2))
    gpu.fill(d_out, np.dtype(dtype).type(2))
    np.testing.assert_array_equal(d_out.copy_to_host(), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(COPY_CASES))
def test_copy_strided_matches_cpu(case, dtype):
    src_shape, src_view, dst_shape, dst_view = COPY_CASES[case]
    src = (np.arange(np.prod(src_shape)).reshape(src_shape) % 7 + 1).astype(dtype)
    expected = np.zeros(dst_shape, dtype)
    source, target = src_view(src), dst_view(expected)
    assert source.shape == target.shape
    src_offset, src_strides = view_arguments(source, src)
    dst_offset, dst_strides = view_arguments(target, expected)
    shape = np.array(source.shape, dtype=np.int64)
    d_src, d_dst = cuda.to_device(src.reshape(-1)), cuda.to_device(expected.reshape(-1))
    cpu.copy_strided(
        src.reshape(-1),
        src_offset,
        src_strides,
        expected.reshape(-1),
        dst_offset,
        dst_strides,
        shape,
    )
    gpu.copy_strided(d_src, src_offset, src_strides, d_dst, dst_offset, dst_strides, shape)
    actual = d_dst.copy_to_host().reshape(dst_shape)
    np.testing.assert_array_equal(actual, expected)
    if case != "empty" and dtype == np.float64:
        np.testing.assert_array_equal(dst_view(actual), source)  # the CPU twin is no oracle alone


CAST_VALUES = np.array([-2.7, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.9, 1000.25, 7.0, -3e9])


@pytest.mark.parametrize("target", DTYPES)
@pytest.mark.parametrize("source", DTYPES)
def test_cast_matches_cpu(source, target):
    x = np.resize(CAST_VALUES, 37).astype(source)
    expected = np.empty(x.shape, target)
    cpu.cast(x, expected)
    d_out = cuda.device_array(x.shape, target)
    gpu.cast(cuda.to_device(x), d_out)
    actual = d_out.copy_to_host()
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(actual, x.astype(target))
    if target != np.bool_:
        np.testing.assert_array_equal(np.signbit(actual), np.signbit(expected))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("target", [np.float32, np.float64, np.bool_])
def test_cast_special_floats_match_cpu(target):
    x = np.array([np.nan, np.inf, -np.inf, 1e300, -1e300, -0.0, 1e-300])
    expected = np.empty(x.shape, target)
    with np.errstate(over="ignore"):
        cpu.cast(x, expected)
    d_out = cuda.device_array(x.shape, target)
    gpu.cast(cuda.to_device(x), d_out)
    actual = d_out.copy_to_host()
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(np.signbit(actual), np.signbit(expected))


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
    merged_shape, merged_strides = gpu.coalesce(shape, *strides)
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
        gpu.copy_strided(d, 0, device_strides, d, 0, [1], [4])
    assert gpu.host_ints(np.array([3, -2], np.int64), "x") == (3, -2)
    assert gpu.host_ints((), "x") == ()


def test_launches_on_a_stream():
    stream = cuda.stream()
    d_src = cuda.to_device(np.arange(40.0), stream=stream)
    d_dst = cuda.device_array(40, np.int64, stream=stream)
    gpu.copy_strided(d_src, 39, [-1], d_src, 0, [1], [20], stream=stream)  # overlap-free half
    gpu.cast(d_src, d_dst, stream=stream)
    gpu.fill(d_src[:3], 9.0, stream=stream)
    stream.synchronize()
    expected = np.arange(40)
    expected[:20] = np.arange(39, 19, -1)
    np.testing.assert_array_equal(d_dst.copy_to_host(stream=stream), expected)
    np.testing.assert_array_equal(d_src.copy_to_host(stream=stream)[:4], [9, 9, 9, 36])


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    from numtile.ops_cuda import memory as m

    i64 = types.int64
    scalars = (types.float32, types.float64, i64, types.boolean)
    for t in scalars:
        a = t[::1]
        for value in scalars:
            cuda.compile_ptx(m._fill_kernel.py_func, (a, value), cc=(9, 0))
        for rank in (1, 2, 4):
            s = types.UniTuple(i64, rank)
            signature = (a, i64, s, a, i64, s, s, i64)
            cuda.compile_ptx(m._copy_kernel.py_func, signature, cc=(9, 0))
        for target in scalars:
            cuda.compile_ptx(m._cast_kernel.py_func, (a, target[::1]), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
