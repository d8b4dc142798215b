"""What only the CUDA elementwise kernels have (numtile.ops_cuda.elementwise): agreement with the
CPU twins on special values and integer paths, host scalar operands, any block size, argument
checks, streams and compilation for a real GPU. Their results against NumPy (and the CPU twins)
on ordinary inputs are tested, on both backends, by tests/ops_cpu/test_elementwise.py.

Sizes are not multiples of the test block (8) and exceed the simulator's 16 threads, so the
grid-stride loops wrap.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from numtile import opcodes, ops_cpu, ops_cuda
from tests.kernels import (
    CPU,
    CUDA,
    assert_twins,
    binary_operands,
    element_strides,
    run_broadcast,
)

# the simulator runs the kernels with NumPy scalars: x / 0 warns there as on the CPU's NumPy
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FLOATS = [np.float32, np.float64]
POSITIVE_DOMAIN = {"log", "sqrt", "reciprocal", "log1p"}
SIZE = 37  # not a multiple of the block, more than the simulator's threads


def on_device(*arrays):
    return [cuda.to_device(np.ascontiguousarray(a)) for a in arrays]


def unary_input(name, dtype):
    rng = np.random.default_rng(0)
    low = 0.05 if name in POSITIVE_DOMAIN else -4.0
    x = rng.uniform(low, 4.0, SIZE).astype(dtype)
    x[:3] = [0.5, 1.5, 2.0]
    if name not in POSITIVE_DOMAIN:
        x[3:7] = [-0.5, -2.5, 0.0, -1.0]
    return x


def run_unary(x, op, out_dtype=None):
    """(CUDA result, CPU result) of unary ``op`` on ``x``."""
    results = []
    for backend in (CUDA, CPU):
        out = np.full(x.shape, 7, out_dtype or x.dtype)
        backend.run("unary", x, out, op, twin=False)
        results.append(out)
    return results


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, -1e-30, 0.3, -0.5, 2.5, -2.5, 1e30]
SPECIAL += [-1e30, 700.0, 800.0, -800.0, 4503599627370497.0, -7.5, 88.0, -3.0, 1e-3]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(opcodes.UNARY_OPS))
def test_unary_special_values_match_cpu(name, dtype):
    x = np.array(SPECIAL, dtype)
    actual, expected = run_unary(x, opcodes.UNARY_OPS[name])
    if name in ("tanh", "gelu_tanh") and dtype == np.float32:
        # the CPU's float32 tanh clamps its input: tanh(NaN) is +-1 there, NaN on CUDA
        nan = np.isnan(x)
        assert np.isnan(actual[nan]).all()
        actual, expected = actual[~nan], expected[~nan]
    exact = name in ("negative", "abs", "relu", "square", "floor", "ceil", "sign", "trunc", "round")
    assert_twins(actual, expected, exact=exact)
    if exact:
        number = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(actual[number]), np.signbit(expected[number]))


@pytest.mark.parametrize("name", ["exp", "sqrt", "sigmoid", "reciprocal", "gelu_tanh"])
def test_unary_int64_float_ops_compute_in_float64(name):
    x = np.arange(1, 1 + SIZE, dtype=np.int64)
    CUDA.run("unary", x, np.zeros(SIZE), opcodes.UNARY_OPS[name])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(opcodes.UNARY_BACKWARD_OPS))
def test_unary_backward_matches_cpu(name, dtype):
    x = unary_input(name, dtype)
    x[x == 0] = 0.25
    grad_out = np.random.default_rng(1).normal(size=SIZE).astype(dtype)
    op = opcodes.UNARY_BACKWARD_OPS[name]
    CUDA.run("unary_backward", x, grad_out, np.empty_like(x), op)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_backward_special_values_match_cpu(dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf, 50.0, -50.0, 1e-30, 800.0, -800.0], dtype)
    grad_out = np.linspace(-2, 2, x.size).astype(dtype)
    for name in ("relu", "silu", "sigmoid", "exp", "log", "sqrt", "tanh", "gelu_tanh"):
        op = opcodes.UNARY_BACKWARD_OPS[name]
        CUDA.run("unary_backward", x, grad_out, np.empty_like(x), op)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(opcodes.BINARY_OPS))
def test_binary_float_edge_cases_match_cpu(name, dtype):
    inf, nan = np.inf, np.nan
    a = [1.0, -1.0, 7.5, -7.5, 0.0, -0.0, 5.0, -5.0, inf, nan, 1.0, -3.0, 2.0, -0.0, 0.0, -inf]
    b = [0.1, 0.1, -2.0, 2.0, 3.0, -3.0, inf, inf, 2.0, 1.0, 0.0, 0.0, nan, 0.0, -0.0, -inf]
    a += [1e30, -1e30, 3.0, -3.0, 0.0, -2.0, 2.0, 4.0, 1e-30]
    b += [1e-30, 7.0, -1.5, 1.5, -1.0, 0.5, -0.5, 1e30, 3.0]
    a, b = np.array(a, dtype), np.array(b, dtype)
    exact = name in ("add", "subtract", "multiply", "maximum", "minimum", "floor_divide")
    exact = exact or name in ("remainder", "copysign")
    kernel = "binary_math" if opcodes.BINARY_OPS[name] in opcodes.BINARY_MATH else "binary"
    expected = run_broadcast(CPU, kernel, a, b, opcodes.BINARY_OPS[name], dtype)
    actual = run_broadcast(CUDA, kernel, a, b, opcodes.BINARY_OPS[name], dtype, twin=False)
    assert_twins(actual, expected, exact=exact)
    number = ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(actual[number]), np.signbit(expected[number]))


def test_binary_int64_power_matches_cpu():
    # overflow wraps; negative exponents as Numba's integer power (the tiled op refuses them)
    a = np.array([5, -3, 2, 7, 0, 1, -1, -1, 2, -2, 3, 0, 1, -1], np.int64)
    b = np.array([40, 41, 63, 0, 0, 9, 3, 4, -1, -3, -2, -1, -5, -7], np.int64)
    run_broadcast(CUDA, "binary", a, b, opcodes.BINARY_OPS["power"], np.int64)


@pytest.mark.parametrize("threads", [1, 5])
def test_kernels_take_any_block_size(threads):
    previous = ops_cuda.configure(block=threads)
    try:
        a, b = binary_operands(
            "subtract", np.float64, (3, 1, 5), (1, 4, 5), np.random.default_rng(6)
        )
        run_broadcast(CUDA, "binary", a, b, opcodes.SUBTRACT, np.float64)
        CUDA.run("unary", a.reshape(-1), np.empty(a.size), opcodes.EXP)
    finally:
        ops_cuda.configure(*previous)


SCALARS = {
    "one-element array": lambda value, dtype: np.full(1, value, dtype),
    "0-d array": lambda value, dtype: np.array(value, dtype),
    "numpy scalar": lambda value, dtype: np.dtype(dtype).type(value),
    "python scalar": lambda value, dtype: value,
}


@pytest.mark.parametrize("form", list(SCALARS))
@pytest.mark.parametrize("scalar_first", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_binary_and_compare_with_a_host_scalar_operand(dtype, scalar_first, form):
    """As the tiled scalar ops call the kernels: the scalar stays a host value."""
    rng = np.random.default_rng(5)
    a = binary_operands("add", dtype, (3, 7), (), rng)[0]
    a[0, :3] = [0, 3, -3]
    shape = np.array(a.shape, np.int64)
    a_strides = element_strides(a.shape, a.shape)
    scalar_strides = element_strides((1, 1), a.shape)
    for value in (3, -2):
        scalar = SCALARS[form](value, dtype)
        host_scalar = np.full(1, value, dtype)
        for kernel, ops, out_dtype in (
            ("binary", opcodes.BINARY_OPS, dtype),
            ("compare", opcodes.COMPARE_OPS, np.bool_),
        ):
            for name, op in ops.items():
                if name == "divide" and out_dtype == np.int64:
                    continue  # a float quotient (the tiled op divides floats only)
                if kernel == "binary" and op in opcodes.BINARY_MATH:
                    continue  # binary_math's (tested in test_binary_float_edge_cases...)
                expected = np.zeros(a.shape, out_dtype)
                d_a, d_out = on_device(a.reshape(-1), expected.reshape(-1))
                host = (host_scalar, scalar_strides, a.reshape(-1), a_strides)
                device = (scalar, scalar_strides, d_a, a_strides)
                if not scalar_first:
                    host, device = host[2:] + host[:2], device[2:] + device[:2]
                getattr(ops_cpu, kernel)(*host, expected.reshape(-1), shape, op)
                getattr(ops_cuda, kernel)(*device, d_out, shape, op)
                actual = d_out.copy_to_host().reshape(a.shape)
                assert_twins(actual, expected)


@pytest.mark.parametrize("scalar", [np.array([0.5]), np.array(0.5)], ids=["1-d", "0-d"])
def test_binary_with_a_one_element_device_operand(scalar):
    a = np.linspace(-2, 2, SIZE)
    d_a, d_b, d_out = on_device(a, scalar, np.zeros(SIZE))
    strides = (np.array([1], np.int64), np.array([0], np.int64))
    ops_cuda.binary(d_a, strides[0], d_b, strides[1], d_out, np.array([SIZE]), opcodes.ADD)
    np.testing.assert_array_equal(d_out.copy_to_host(), a + 0.5)
    ops_cuda.compare(d_b, strides[1], d_a, strides[0], d_out, np.array([SIZE]), opcodes.LESS)
    np.testing.assert_array_equal(d_out.copy_to_host(), 0.5 < a)
    d_one = cuda.device_array(1)
    ops_cuda.binary(
        d_b, strides[1], np.float64(2.0), strides[1], d_one, np.array([1]), opcodes.MULTIPLY
    )
    np.testing.assert_array_equal(d_one.copy_to_host(), [1.0])


@pytest.mark.parametrize(
    ("launcher", "args"),
    [
        (ops_cuda.unary, lambda d: (d, d, len(opcodes.UNARY_OPS))),
        (ops_cuda.unary_backward, lambda d: (d, d, d, len(opcodes.UNARY_BACKWARD_OPS))),
        (ops_cuda.binary, lambda d: (d, [1], d, [1], d, [3], len(opcodes.BINARY_OPS))),
        (ops_cuda.compare, lambda d: (d, [1], d, [1], d, [3], -1)),
    ],
)
def test_unknown_op_raises(launcher, args):
    with pytest.raises(ValueError, match="unknown op code"):
        launcher(*args(cuda.to_device(np.ones(3))))


def test_device_strides_are_refused():
    d = cuda.to_device(np.ones(3))
    strides = cuda.to_device(np.array([1], np.int64))
    with pytest.raises(TypeError, match="host array"):
        ops_cuda.binary(d, strides, d, strides, d, np.array([3]), opcodes.ADD)


def test_two_host_operands_are_refused():
    d = cuda.to_device(np.ones(1))
    with pytest.raises(TypeError, match="device operand"):
        ops_cuda.binary(np.ones(1), [0], 2.0, [0], d, np.array([1]), opcodes.ADD)


def test_empty_outputs_launch_nothing():
    empty = cuda.to_device(np.ones(0))
    ops_cuda.unary(empty, empty, opcodes.EXP)
    ops_cuda.unary_backward(empty, empty, empty, opcodes.EXP_BACKWARD)
    ops_cuda.axpy(2.0, empty, empty)
    ops_cuda.binary(empty, [1], empty, [1], empty, np.array([0]), opcodes.ADD)


def test_launches_on_a_stream():
    x = np.linspace(-1, 1, SIZE)
    stream = cuda.stream()
    d_x = cuda.to_device(x, stream=stream)
    d_out = cuda.device_array_like(d_x, stream=stream)
    ops_cuda.unary(d_x, d_out, opcodes.EXP, stream=stream)
    ops_cuda.binary(d_x, [1], d_out, [1], d_out, np.array([SIZE]), opcodes.ADD, stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(d_out.copy_to_host(stream=stream), x + np.exp(x), rtol=1e-12)


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    import numpy as np

    from numtile.ops_cuda import elementwise

    i64, flag = types.int64, types.boolean
    numeric = {np.float32: types.float32, np.float64: types.float64, np.int64: i64}
    for dtype, t in numeric.items():
        a = t[::1]
        d = np.dtype(dtype)
        kernels = [
            (elementwise._unary_kernel(d), (a, a, i64)),
            (elementwise._unary_backward_kernel(d), (a, a, a, i64)),
            (elementwise._axpy_kernel, (t, a, a)),
        ]
        for rank in (1, 3):
            s = types.UniTuple(i64, rank)
            kernels.append((elementwise._binary_kernel(d), (a, t, i64, s, a, t, i64, s, a, s, i64)))
            if dtype != np.int64:
                kernel = elementwise._binary_math_kernel(d)
                kernels.append((kernel, (a, t, i64, s, a, t, i64, s, a, s, i64)))
        for kernel, signature in kernels:
            cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    for t in (types.float32, types.float64, i64, flag):
        for rank in (1, 2):
            s = types.UniTuple(i64, rank)
            signature = (t[::1], t, i64, s, t[::1], t, i64, s, flag[::1], s, i64)
            cuda.compile_ptx(elementwise._compare_kernel.py_func, signature, cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
