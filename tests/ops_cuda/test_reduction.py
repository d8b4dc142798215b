"""What only the CUDA reduction kernels have (numtile.ops_cuda.reduction): agreement with the
CPU twins on mixed dtypes, wrapping integers and special values, the choice between its two
layouts, any block size, streams and compilation for a real GPU. Results against NumPy (and
the CPU twins) in every layout are tested, on both backends, by tests/ops_cpu/test_reduction.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from numtile import opcodes, ops_cuda
from numtile.ops_cuda import reduction
from tests.kernels import CUDA, cuda_launches, reduce_operands

# the simulator runs the kernels with NumPy scalars, which warn where int64 wraps or inf - inf
pytestmark = [
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
    pytest.mark.usefixtures("quick_thread_switches"),
]

FLOATS = [np.float32, np.float64]


@pytest.fixture(params=["default", "columns", "rows"])
def layout(request, monkeypatch):
    """Run the test with the launcher's choice of kernel, then forcing each kernel."""
    if request.param != "default":
        monkeypatch.setattr(reduction, "_by_rows", lambda pre, n, post: request.param == "rows")
    return request.param


def run_reduce(x, out, shape, op):
    """Reduce on CUDA, checked against the CPU twin."""
    CUDA.run("reduce_accumulate", x.reshape(-1), out.reshape(-1), *shape, op)


@pytest.mark.parametrize(
    ("x_dtype", "out_dtype"),
    [(np.bool_, np.int64), (np.float32, np.float64)],
)
@pytest.mark.parametrize("name", list(opcodes.REDUCE_OPS))
def test_reduce_accumulate_mixed_dtypes_match_cpu(name, x_dtype, out_dtype):
    shape = (3, 4, 5)
    x, _ = reduce_operands(name, x_dtype, shape, np.random.default_rng(1))
    out = reduce_operands(name, out_dtype, shape, np.random.default_rng(2))[1]
    run_reduce(x, out, shape, opcodes.REDUCE_OPS[name])


def test_reduce_accumulate_int64_wraps_as_the_cpu(layout):
    big = np.iinfo(np.int64).max // 3
    x = np.array([big, big, big, 7, -big, 5, 3, 2**40, 2**30], np.int64)
    for name in ("sum", "prod", "sumsq", "max", "min", "sumabs", "maxabs"):
        run_reduce(x, np.ones((1, 1), np.int64), (1, 9, 1), opcodes.REDUCE_OPS[name])


@pytest.mark.parametrize("threads", [1, 5, 13])
def test_block_per_output_kernels_take_any_block_size(threads, monkeypatch):
    monkeypatch.setattr(reduction, "_by_rows", lambda pre, n, post: True)
    shape = (2, 33, 2)
    x, out = reduce_operands("sum", np.float64, shape, np.random.default_rng(4))
    grad_out = np.random.default_rng(5).normal(size=shape)
    y = np.empty_like(x)
    with cuda_launches(block=threads):
        for name in ("sum", "max", "prod"):
            run_reduce(x, out.copy(), shape, opcodes.REDUCE_OPS[name])
        CUDA.run("softmax", x.reshape(-1), y.reshape(-1), *shape)
        CUDA.run("softmax_backward", y.reshape(-1), grad_out.reshape(-1), np.empty(x.size), *shape)


def test_kernel_choice():
    assert not reduction._by_rows(1, 31, 1)  # short axis: a thread per output
    assert reduction._by_rows(1, 32, 1)  # long contiguous axis: a block per output
    assert reduction._by_rows(1, 1000, 4000)  # few outputs: a block each
    assert not reduction._by_rows(2, 1000, 4000)  # enough outputs for a thread each, coalesced


def test_reduce_accumulate_unknown_op_raises():
    d = cuda.to_device(np.ones(3))
    with pytest.raises(ValueError, match="unknown op code"):
        ops_cuda.reduce_accumulate(d, d, 1, 3, 1, len(opcodes.REDUCE_OPS))


# --- softmax -------------------------------------------------------------------------------------


@pytest.mark.parametrize("post", [1, 2])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_special_values_match_cpu(dtype, post, layout):
    x = np.array([[1000.0, 999.0, -1000.0, -np.inf], [np.nan, 1.0, 2.0, 3.0]], dtype)
    x = np.repeat(x[..., None], post, axis=2)
    x[1, :, -1] = [-np.inf, 0.0, np.inf, 1.0]
    out = np.full_like(x, np.nan)
    CUDA.run("softmax", x.reshape(-1), out.reshape(-1), *x.shape)
    assert np.isfinite(out[0]).all()


def test_softmax_empty_axis_launches_nothing():
    d_out = cuda.to_device(np.ones(4))
    ops_cuda.softmax(cuda.to_device(np.empty(0)), d_out, 2, 0, 2)
    ops_cuda.softmax_backward(d_out, d_out, d_out, 4, 0, 1)
    np.testing.assert_array_equal(d_out.copy_to_host(), np.ones(4))


def test_launches_on_a_stream():
    stream = cuda.stream()
    x = np.random.default_rng(3).normal(size=(3, 7, 2))
    d_x = cuda.to_device(x.reshape(-1), stream=stream)
    d_y = cuda.device_array(x.size, stream=stream)
    d_sum = cuda.to_device(np.zeros(6), stream=stream)
    ops_cuda.softmax(d_x, d_y, 3, 7, 2, stream=stream)
    ops_cuda.reduce_accumulate(d_y, d_sum, 3, 7, 2, opcodes.SUM, stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(d_sum.copy_to_host(stream=stream), 1.0, rtol=1e-12)


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    from numtile.ops_cuda import reduction

    i64 = types.int64
    scalars = (types.float32, types.float64, i64, types.boolean)
    for t in scalars:
        for o in scalars[:3]:
            signature = (t[::1], o[::1], i64, i64, i64, i64)
            kernels = reduction._reduce_kernels(reduction._wide(str(t)), reduction._wide(str(o)))
            for kernel in kernels:
                cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    for t, o in ((types.complex64, types.float32), (types.complex128, types.float64)):
        signature = (t[::1], o[::1], i64, i64, i64, i64)
        for read in (reduction._modulus, reduction._squared_modulus):
            for kernel in reduction._reduce_kernels(types.float64, types.float64, read):
                cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    for t in scalars[:2]:
        a = t[::1]
        for kernel in reduction._softmax_kernels(t):
            cuda.compile_ptx(kernel.py_func, (a, a, i64, i64, i64), cc=(9, 0))
        for kernel in (reduction._softmax_backward_columns, reduction._softmax_backward_rows):
            cuda.compile_ptx(kernel.py_func, (a, a, a, i64, i64, i64), cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
