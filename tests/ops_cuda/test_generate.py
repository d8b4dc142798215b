"""numtile.ops_cuda.generate against its twins in numtile.ops_cpu.generate, under the CUDA
simulator.

Random tiles must be the CPU's numbers (same seed, same global positions): uniform draws bit
for bit, normal draws within float tolerance. The last test compiles every kernel
specialisation to PTX for a real GPU (sm_90) in a process without the simulator.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from numtile import opcodes, ops_cpu, ops_cuda

# the simulator hashes with NumPy uint64 scalars, whose wrapping arithmetic warns
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

FLOATS = [np.float32, np.float64]
SEED = np.uint64(0xD1B54A32D192ED03)

# (global shape, tile shape, tile start)
TILES = [
    ((), (), ()),
    ((50,), (37,), (13,)),
    ((9, 11), (5, 7), (4, 3)),
    ((9, 11), (9, 11), (0, 0)),
    ((3, 4, 10), (2, 1, 10), (1, 2, 0)),
    ((2, 3, 1, 7), (2, 2, 1, 5), (0, 1, 0, 2)),
]


def global_strides(shape):
    strides = np.ones(len(shape), np.int64)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    return strides


def draw(module, out, global_shape, tile_shape, start, seed, distribution, a, b, upper):
    """Run ``module.random_fill`` the way the tiled op calls it; return the filled tile."""
    args = (
        np.array(tile_shape, np.int64),
        np.array(start, np.int64),
        global_strides(global_shape),
        seed,
        distribution,
        a,
        b,
        upper,
    )
    module.random_fill(out, *args)
    return out if isinstance(out, np.ndarray) else out.copy_to_host()


def upper_of(dtype, a, b):
    high = np.dtype(dtype).type(b)
    return float(np.nextafter(high, np.dtype(dtype).type(a)) if high > a else high)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(("global_shape", "tile_shape", "start"), TILES, ids=str)
def test_uniform_is_the_cpus_bit_for_bit(global_shape, tile_shape, start, dtype):
    size = int(np.prod(tile_shape))
    args = (
        global_shape,
        tile_shape,
        start,
        SEED,
        opcodes.UNIFORM,
        -2.0,
        3.0,
        upper_of(dtype, -2, 3),
    )
    expected = draw(ops_cpu, np.empty(size, dtype), *args)
    actual = draw(ops_cuda, cuda.device_array(size, dtype), *args)
    np.testing.assert_array_equal(actual, expected)
    assert ((actual >= -2) & (actual < 3)).all()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(("global_shape", "tile_shape", "start"), TILES, ids=str)
def test_normal_matches_the_cpu(global_shape, tile_shape, start, dtype):
    size = int(np.prod(tile_shape))
    args = (global_shape, tile_shape, start, SEED, opcodes.NORMAL, 1.5, 0.5, np.inf)
    expected = draw(ops_cpu, np.empty(size, dtype), *args)
    actual = draw(ops_cuda, cuda.device_array(size, dtype), *args)
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("distribution", [opcodes.UNIFORM, opcodes.NORMAL])
def test_a_tile_is_its_slice_of_the_whole_tensor(distribution):
    global_shape = (6, 9)
    law = (SEED, distribution, 0.0, 1.0, upper_of(np.float64, 0, 1))
    whole = draw(ops_cuda, cuda.device_array(54), global_shape, global_shape, (0, 0), *law)
    tile = draw(ops_cuda, cuda.device_array(12), global_shape, (3, 4), (2, 5), *law)
    np.testing.assert_array_equal(tile.reshape(3, 4), whole.reshape(6, 9)[2:5, 5:9])


def test_uniform_clamps_below_upper_as_the_cpu():
    # an upper bound inside the range makes the clamp visible on about half the draws
    args = ((40,), (40,), (0,), SEED, opcodes.UNIFORM, 0.0, 1.0, 0.5)
    expected = draw(ops_cpu, np.empty(40, np.float32), *args)
    actual = draw(ops_cuda, cuda.device_array(40, np.float32), *args)
    np.testing.assert_array_equal(actual, expected)
    assert (actual == np.float32(0.5)).sum() > 5


@pytest.mark.parametrize("seed", [0, 7, 2**64 - 1, np.uint64(12345)])
def test_seeds_match_the_cpu(seed):
    args = ((20,), (20,), (0,), seed, opcodes.UNIFORM, 0.0, 1.0, upper_of(np.float64, 0, 1))
    expected = draw(ops_cpu, np.empty(20), *args[:3], np.uint64(seed), *args[4:])
    actual = draw(ops_cuda, cuda.device_array(20), *args)
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_arange_matches_cpu(dtype):
    for first, step in ((0, 1), (-3, 2), (0.5, 0.1), (10, -0.3), (-0.0, 0.5)):
        if dtype == np.int64 and isinstance(first + step, float):
            continue
        typed = np.dtype(dtype).type
        for args in ((typed(first), typed(step)), (first, step)):
            expected = np.empty(37, dtype)
            ops_cpu.arange_fill(expected, *args)
            d_out = cuda.device_array(37, dtype)
            ops_cuda.arange_fill(d_out, *args)
            np.testing.assert_array_equal(d_out.copy_to_host(), expected)
            # out[0] is first itself on both: -0.0 stays -0.0
            assert np.signbit(d_out.copy_to_host()[0]) == np.signbit(first)
            assert np.signbit(expected[0]) == np.signbit(first)


def test_empty_tiles_launch_nothing():
    empty = cuda.device_array(0)
    ops_cuda.arange_fill(empty, 0.0, 1.0)
    ops_cuda.random_fill(empty, [0], [0], [1], SEED, opcodes.UNIFORM, 0.0, 1.0, 0.5)


def test_launches_on_a_stream():
    stream = cuda.stream()
    d_out = cuda.device_array(19, stream=stream)
    ops_cuda.random_fill(
        d_out, [19], [0], [1], SEED, opcodes.NORMAL, 0.0, 1.0, np.inf, stream=stream
    )
    ops_cuda.arange_fill(d_out[:5], 1.0, 2.0, stream=stream)
    stream.synchronize()
    expected = draw(
        ops_cpu, np.empty(19), (19,), (19,), (0,), SEED, opcodes.NORMAL, 0.0, 1.0, np.inf
    )
    expected[:5] = [1, 3, 5, 7, 9]
    np.testing.assert_allclose(d_out.copy_to_host(stream=stream), expected, rtol=1e-12)


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    from numtile.ops_cuda import generate

    i64, f64 = types.int64, types.float64
    for t in (types.float32, f64):
        for rank in (1, 2):
            s = types.UniTuple(i64, rank)
            signature = (t[::1], s, s, i64, types.uint64, i64, f64, f64, f64)
            cuda.compile_ptx(generate._random_kernel.py_func, signature, cc=(9, 0))
    for t in (types.float32, f64, i64):
        for scalar in (t, i64, f64):
            cuda.compile_ptx(generate._arange_kernel.py_func, (t[::1], scalar, scalar), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
