"""numtile.ops_cuda.reduction against its ops_cpu twins, under the CUDA simulator.

Every case runs the CPU kernel on host arrays and the CUDA launcher on device copies, then
compares the results. (pre, n, post) shapes cover the innermost, outermost and middle axis,
n == 1, and more output columns than the simulator's 16 threads. The last test compiles every
kernel specialisation to PTX for a real GPU (sm_90) in a process without the simulator.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from numba import cuda

from numtile import opcodes
from numtile.ops_cpu import reduction as cpu
from numtile.ops_cuda import reduction as gpu

# the simulator runs the kernels with NumPy scalars, which warn where int64 wraps or inf - inf
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FLOATS = [np.float32, np.float64]
# both sides accumulate in float64 and round once; only the summation order differs
TOLERANCE = {
    np.dtype(np.float32): {"rtol": 2e-6, "atol": 1e-6},
    np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-13},
}
SHAPES = [(1, 7, 1), (3, 5, 1), (1, 6, 4), (2, 3, 5), (2, 1, 3), (19, 2, 1), (2, 3, 11)]
SHAPES += [(3, 40, 1), (1, 37, 3)]  # long enough for a block per output by default


@pytest.fixture(autouse=True, scope="module")
def _quick_thread_switches():
    """The simulator's syncthreads waits on Python threads, each wait up to a GIL switch
    interval (5 ms): switching more often makes the block-per-output kernels quick here."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(previous)


@pytest.fixture(params=["default", "columns", "rows"])
def layout(request, monkeypatch):
    """Run the test with the launcher's choice of kernel, then forcing each kernel."""
    if request.param != "default":
        monkeypatch.setattr(gpu, "_by_rows", lambda pre, n, post: request.param == "rows")
    return request.param


def assert_same(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, equal_nan=True, **TOLERANCE[expected.dtype])
    else:
        np.testing.assert_array_equal(actual, expected)


def operands(name, dtype, shape, rng):
    """x of logical shape (pre, n, post) and a nonzero initial out of shape (pre, post)."""
    pre, n, post = shape
    if np.dtype(dtype).kind in "ib":
        x, out = rng.integers(-5, 6, shape), rng.integers(-5, 6, (pre, post))
    elif name == "prod":
        x, out = rng.uniform(0.5, 1.5, shape), rng.uniform(0.5, 1.5, (pre, post))
    else:
        x, out = rng.normal(size=shape), rng.normal(size=(pre, post))
    return x.astype(dtype), out.astype(dtype)


def run_reduce(x, out, shape, op):
    expected = out.copy()
    cpu.reduce_accumulate(x.reshape(-1), expected.reshape(-1), *shape, op)
    d_x, d_out = cuda.to_device(x.reshape(-1)), cuda.to_device(out.reshape(-1))
    gpu.reduce_accumulate(d_x, d_out, *shape, op)
    return d_out.copy_to_host().reshape(out.shape), expected


def test_op_table_is_the_cpu_one():
    assert gpu.REDUCE_OPS is opcodes.REDUCE_OPS


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("name", list(opcodes.REDUCE_OPS))
def test_reduce_accumulate_matches_cpu(name, dtype, shape, layout):
    x, out = operands(name, dtype, shape, np.random.default_rng(0))
    actual, expected = run_reduce(x, out, shape, opcodes.REDUCE_OPS[name])
    assert_same(actual, expected)


@pytest.mark.parametrize(
    ("x_dtype", "out_dtype"),
    [(np.bool_, np.int64), (np.float32, np.float64)],
)
@pytest.mark.parametrize("name", list(opcodes.REDUCE_OPS))
def test_reduce_accumulate_mixed_dtypes_match_cpu(name, x_dtype, out_dtype):
    shape = (3, 4, 5)
    x, _ = operands(name, x_dtype, shape, np.random.default_rng(1))
    out = operands(name, out_dtype, shape, np.random.default_rng(2))[1]
    actual, expected = run_reduce(x, out, shape, opcodes.REDUCE_OPS[name])
    assert_same(actual, expected)


def test_reduce_accumulate_int64_wraps_as_the_cpu(layout):
    big = np.iinfo(np.int64).max // 3
    x = np.array([big, big, big, 7, -big, 5, 3, 2**40, 2**30], np.int64)
    for name in ("sum", "prod", "sumsq", "max", "min", "sumabs", "maxabs"):
        actual, expected = run_reduce(
            x, np.ones((1, 1), np.int64), (1, 9, 1), opcodes.REDUCE_OPS[name]
        )
        assert_same(actual, expected)


@pytest.mark.parametrize("post", [1, 3])
@pytest.mark.parametrize("name", ["max", "min", "maxabs", "sum", "prod"])
def test_reduce_accumulate_propagates_nan_and_signed_zeros(name, post, layout):
    x = np.arange(5 * post, dtype=np.float64).reshape(5, post) - 2
    x[2, 0] = np.nan
    if post > 1:
        x[:, 1] = [-0.0, 0.0, -0.0, -0.0, 0.0]
        x[:, 2] = -0.0
    out = np.full((1, post), -0.0)
    actual, expected = run_reduce(x, out, (1, 5, post), opcodes.REDUCE_OPS[name])
    assert np.isnan(actual[0, 0])
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(np.signbit(actual[0, 1:]), np.signbit(expected[0, 1:]))


def test_reduce_accumulate_float32_sums_in_float64(layout):
    # 1 + 40 * 2**-24 is exact in float32, but a float32 running sum stays at 1
    x = np.full((41, 2), 2.0**-24, np.float32)
    x[0] = 1.0
    actual, expected = run_reduce(x, np.zeros((1, 2), np.float32), (1, 41, 2), opcodes.SUM)
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(actual, np.float32(1 + 40 * 2.0**-24))


def test_reduce_accumulate_accumulates_and_empty_axis_leaves_out():
    x = np.arange(24, dtype=np.float64)
    d_x, d_out = cuda.to_device(x), cuda.to_device(np.full(6, 10.0))
    for _ in range(3):
        gpu.reduce_accumulate(d_x, d_out, 2, 4, 3, opcodes.SUM)
    np.testing.assert_allclose(d_out.copy_to_host(), 10 + 3 * x.reshape(2, 4, 3).sum(1).ravel())
    for op in opcodes.REDUCE_OPS.values():
        gpu.reduce_accumulate(cuda.to_device(np.empty(0)), d_out, 2, 0, 3, op)
    np.testing.assert_allclose(d_out.copy_to_host(), 10 + 3 * x.reshape(2, 4, 3).sum(1).ravel())


@pytest.mark.parametrize("threads", [1, 5, 13])
def test_block_per_output_kernels_take_any_block_size(threads, monkeypatch):
    monkeypatch.setattr(gpu, "block", lambda: threads)
    monkeypatch.setattr(gpu, "_by_rows", lambda pre, n, post: True)
    shape = (2, 33, 2)
    x, out = operands("sum", np.float64, shape, np.random.default_rng(4))
    for name in ("sum", "max", "prod"):
        actual, expected = run_reduce(x, out, shape, opcodes.REDUCE_OPS[name])
        assert_same(actual, expected)
    actual, expected = run_softmax(x, shape)
    assert_same(actual, expected)
    grad_out = np.random.default_rng(5).normal(size=shape)
    expected = np.empty_like(x)
    cpu.softmax_backward(actual.reshape(-1), grad_out.reshape(-1), expected.reshape(-1), *shape)
    d_y, d_grad, d_in = (cuda.to_device(a.reshape(-1)) for a in (actual, grad_out, x))
    gpu.softmax_backward(d_y, d_grad, d_in, *shape)
    assert_same(d_in.copy_to_host().reshape(shape), expected)


def test_kernel_choice():
    assert not gpu._by_rows(1, 31, 1)  # short axis: a thread per output
    assert gpu._by_rows(1, 32, 1)  # long contiguous axis: a block per output
    assert gpu._by_rows(1, 1000, 4000)  # few outputs: a block each
    assert not gpu._by_rows(2, 1000, 4000)  # enough outputs for a thread each, coalesced


def test_reduce_accumulate_unknown_op_raises():
    d = cuda.to_device(np.ones(3))
    with pytest.raises(ValueError, match="unknown op code"):
        gpu.reduce_accumulate(d, d, 1, 3, 1, len(opcodes.REDUCE_OPS))


# --- softmax -------------------------------------------------------------------------------------


def run_softmax(x, shape):
    expected = np.full_like(x, np.nan)
    cpu.softmax(x.reshape(-1), expected.reshape(-1), *shape)
    d_x, d_out = cuda.to_device(x.reshape(-1)), cuda.to_device(np.full(x.size, np.nan, x.dtype))
    gpu.softmax(d_x, d_out, *shape)
    return d_out.copy_to_host().reshape(x.shape), expected


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_matches_cpu(dtype, shape, layout):
    x = np.random.default_rng(1).normal(scale=3.0, size=shape).astype(dtype)
    actual, expected = run_softmax(x, shape)
    assert_same(actual, expected)
    np.testing.assert_allclose(actual.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("post", [1, 2])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_special_values_match_cpu(dtype, post, layout):
    x = np.array([[1000.0, 999.0, -1000.0, -np.inf], [np.nan, 1.0, 2.0, 3.0]], dtype)
    x = np.repeat(x[..., None], post, axis=2)
    x[1, :, -1] = [-np.inf, 0.0, np.inf, 1.0]
    actual, expected = run_softmax(x, x.shape)
    assert_same(actual, expected)
    assert np.isfinite(actual[0]).all()


@pytest.mark.parametrize("shape", [(2, 6, 1), (1, 5, 3), (2, 4, 3), (19, 3, 1)], ids=str)
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_backward_matches_cpu(dtype, shape, layout):
    rng = np.random.default_rng(2)
    y = np.empty(shape, dtype)
    cpu.softmax(rng.normal(size=shape).astype(dtype).reshape(-1), y.reshape(-1), *shape)
    grad_out = rng.normal(size=shape).astype(dtype)
    expected = np.full_like(y, np.nan)
    cpu.softmax_backward(y.reshape(-1), grad_out.reshape(-1), expected.reshape(-1), *shape)
    d_y, d_grad, d_in = (cuda.to_device(a.reshape(-1)) for a in (y, grad_out, np.zeros_like(y)))
    gpu.softmax_backward(d_y, d_grad, d_in, *shape)
    assert_same(d_in.copy_to_host().reshape(shape), expected)


def test_softmax_empty_axis_launches_nothing():
    d_out = cuda.to_device(np.ones(4))
    gpu.softmax(cuda.to_device(np.empty(0)), d_out, 2, 0, 2)
    gpu.softmax_backward(d_out, d_out, d_out, 4, 0, 1)
    np.testing.assert_array_equal(d_out.copy_to_host(), np.ones(4))


def test_launches_on_a_stream():
    stream = cuda.stream()
    x = np.random.default_rng(3).normal(size=(3, 7, 2))
    d_x = cuda.to_device(x.reshape(-1), stream=stream)
    d_y = cuda.device_array(x.size, stream=stream)
    d_sum = cuda.to_device(np.zeros(6), stream=stream)
    gpu.softmax(d_x, d_y, 3, 7, 2, stream=stream)
    gpu.reduce_accumulate(d_y, d_sum, 3, 7, 2, opcodes.SUM, stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(d_sum.copy_to_host(stream=stream), 1.0, rtol=1e-12)


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    from numtile.ops_cuda import reduction as r

    i64 = types.int64
    scalars = (types.float32, types.float64, i64, types.boolean)
    for t in scalars:
        for o in scalars[:3]:
            signature = (t[::1], o[::1], i64, i64, i64, i64)
            for kernel in r._reduce_kernels(r._wide(str(t)), r._wide(str(o))):
                cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    for t in scalars[:2]:
        a = t[::1]
        for kernel in r._softmax_kernels(t):
            cuda.compile_ptx(kernel.py_func, (a, a, i64, i64, i64), cc=(9, 0))
        for kernel in (r._softmax_backward_columns, r._softmax_backward_rows):
            cuda.compile_ptx(kernel.py_func, (a, a, a, i64, i64, i64), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
