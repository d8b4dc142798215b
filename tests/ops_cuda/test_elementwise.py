"""numtile.ops_cuda.elementwise against its ops_cpu twins, under the CUDA simulator.

Every case runs the CPU kernel on host arrays and the CUDA launcher on device copies, then
compares the outputs. Sizes are not multiples of the test block (8) and exceed the
simulator's 16 threads, so the grid-stride loops wrap. The last test compiles every kernel
specialisation to PTX for a real GPU (sm_90) in a process without the simulator.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from numtile import opcodes, ops_cpu
from numtile.ops_cpu import elementwise as cpu
from numtile.ops_cuda import elementwise as gpu

# the simulator runs the kernels with NumPy scalars: x / 0 warns there as on the CPU's NumPy
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FLOATS = [np.float32, np.float64]
# float32: the CPU's tanh is a rational approximation (a few ulp), CUDA's is libdevice's
TOLERANCE = {
    np.dtype(np.float32): {"rtol": 2e-5, "atol": 1e-6},
    np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-13},
}
POSITIVE_DOMAIN = {"log", "sqrt", "reciprocal", "log1p"}
SIZE = 37  # not a multiple of the block, more than the simulator's threads


def assert_same(actual, expected, exact=False, signs=False):
    """CUDA result ``actual`` equals the CPU's ``expected`` (floats within tolerance, NaNs in
    the same places; bit-for-bit for integers, bools and ``exact``)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.kind != "f" or exact:
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, equal_nan=True, **TOLERANCE[expected.dtype])
    if signs:
        number = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(actual[number]), np.signbit(expected[number]))


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
    expected = np.full(x.shape, 7, out_dtype or x.dtype)
    cpu.unary(x, expected, op)
    d_x, d_out = on_device(x, np.full(x.shape, 7, out_dtype or x.dtype))
    gpu.unary(d_x, d_out, op)
    return d_out.copy_to_host(), expected


def test_op_tables_are_the_cpu_ones():
    assert gpu.UNARY_OPS is ops_cpu.UNARY_OPS
    assert gpu.UNARY_BACKWARD_OPS is ops_cpu.UNARY_BACKWARD_OPS
    assert gpu.BINARY_OPS is ops_cpu.BINARY_OPS
    assert gpu.COMPARE_OPS is ops_cpu.COMPARE_OPS


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(opcodes.UNARY_OPS))
def test_unary_matches_cpu(name, dtype):
    actual, expected = run_unary(unary_input(name, dtype), opcodes.UNARY_OPS[name])
    assert_same(actual, expected)


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
    exact = name in ("negative", "abs", "relu", "square", "floor", "ceil", "sign")
    assert_same(actual, expected, exact=exact, signs=exact)


@pytest.mark.parametrize("name", ["negative", "abs", "square", "sign", "relu", "floor", "ceil"])
def test_unary_int64_matches_cpu(name):
    x = np.arange(-18, 19, dtype=np.int64)
    x[0] = np.iinfo(np.int64).min
    if name not in ("floor", "ceil"):  # through float64, INT64_MAX would round out of range
        x[-1] = np.iinfo(np.int64).max
    actual, expected = run_unary(x, opcodes.UNARY_OPS[name])
    assert_same(actual, expected)


@pytest.mark.parametrize("name", ["exp", "sqrt", "sigmoid", "reciprocal", "gelu_tanh"])
def test_unary_int64_float_ops_compute_in_float64(name):
    x = np.arange(1, 1 + SIZE, dtype=np.int64)
    actual, expected = run_unary(x, opcodes.UNARY_OPS[name], np.float64)
    assert_same(actual, expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(opcodes.UNARY_BACKWARD_OPS))
def test_unary_backward_matches_cpu(name, dtype):
    x = unary_input(name, dtype)
    x[x == 0] = 0.25
    grad_out = np.random.default_rng(1).normal(size=SIZE).astype(dtype)
    expected = np.empty_like(x)
    op = opcodes.UNARY_BACKWARD_OPS[name]
    cpu.unary_backward(x, grad_out, expected, op)
    d_x, d_grad, d_in = on_device(x, grad_out, np.empty_like(x))
    gpu.unary_backward(d_x, d_grad, d_in, op)
    assert_same(d_in.copy_to_host(), expected)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_backward_special_values_match_cpu(dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf, 50.0, -50.0, 1e-30, 800.0, -800.0], dtype)
    grad_out = np.linspace(-2, 2, x.size).astype(dtype)
    for name in ("relu", "silu", "sigmoid", "exp", "log", "sqrt", "tanh", "gelu_tanh"):
        op = opcodes.UNARY_BACKWARD_OPS[name]
        expected = np.empty_like(x)
        cpu.unary_backward(x, grad_out, expected, op)
        d_x, d_grad, d_in = on_device(x, grad_out, np.empty_like(x))
        gpu.unary_backward(d_x, d_grad, d_in, op)
        assert_same(d_in.copy_to_host(), expected)


# --- binary and compare --------------------------------------------------------------------------

# (a shape, b shape): equal shapes, size-1 operands, broadcast axes in a, in b, in both, an empty
# result, and ranks up to 4.
BROADCAST_CASES = [
    ((), ()),
    ((SIZE,), (SIZE,)),
    ((SIZE,), (1,)),
    ((1,), (SIZE,)),
    ((3, 13), (13,)),
    ((3, 13), (3, 1)),
    ((3, 1), (1, 13)),
    ((2, 1, 9), (1, 3, 1)),
    ((2, 3, 4, 5), (2, 1, 4, 1)),
    ((0, 3), (3,)),
]


def element_strides(shape, out_shape):
    """Element strides of a C-contiguous array of ``shape`` broadcast to ``out_shape``."""
    broadcast = np.broadcast_to(np.empty(shape, np.int8), out_shape)
    return np.array(broadcast.strides, dtype=np.int64)


def run_broadcast(name, a, b, op, out_dtype):
    """The CPU and CUDA results of kernel ``name`` on C-contiguous a and b, called the way the
    tiled ops call it (host strides and shape)."""
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    args = (element_strides(a.shape, out_shape), element_strides(b.shape, out_shape))
    shape = np.array(out_shape, dtype=np.int64)
    expected = np.zeros(out_shape, out_dtype)
    getattr(cpu, name)(
        a.reshape(-1), args[0], b.reshape(-1), args[1], expected.reshape(-1), shape, op
    )
    d_a, d_b, d_out = on_device(a.reshape(-1), b.reshape(-1), np.zeros(out_shape, out_dtype))
    getattr(gpu, name)(d_a, args[0], d_b, args[1], d_out.reshape(-1), shape, op)
    return d_out.copy_to_host().reshape(out_shape), expected


def binary_operands(name, dtype, a_shape, b_shape, rng):
    """Operands covering signs, zero divisors and (for power) a safe range."""
    if np.dtype(dtype).kind == "i":
        a = rng.integers(-9, 10, a_shape)
        b = rng.integers(0, 5, b_shape) if name == "power" else rng.integers(-4, 5, b_shape)
    elif name == "power":
        a = rng.uniform(0.1, 3, a_shape)
        b = rng.uniform(-3, 3, b_shape)
    else:
        a = rng.uniform(-5, 5, a_shape)
        b = rng.uniform(-5, 5, b_shape)
        b.reshape(-1)[::3] = np.round(b.reshape(-1)[::3])
    return np.asarray(a, dtype), np.asarray(b, dtype)


BINARY_CASES = [
    (name, dtype)
    for name in opcodes.BINARY_OPS
    for dtype in (np.float32, np.float64, np.int64)
    if not (name == "divide" and dtype == np.int64)
]


@pytest.mark.parametrize("shapes", BROADCAST_CASES, ids=str)
@pytest.mark.parametrize(("name", "dtype"), BINARY_CASES)
def test_binary_matches_cpu(name, dtype, shapes):
    a, b = binary_operands(name, dtype, *shapes, np.random.default_rng(3))
    actual, expected = run_broadcast("binary", a, b, opcodes.BINARY_OPS[name], dtype)
    assert_same(actual, expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(opcodes.BINARY_OPS))
def test_binary_float_edge_cases_match_cpu(name, dtype):
    inf, nan = np.inf, np.nan
    a = [1.0, -1.0, 7.5, -7.5, 0.0, -0.0, 5.0, -5.0, inf, nan, 1.0, -3.0, 2.0, -0.0, 0.0, -inf]
    b = [0.1, 0.1, -2.0, 2.0, 3.0, -3.0, inf, inf, 2.0, 1.0, 0.0, 0.0, nan, 0.0, -0.0, -inf]
    a += [1e30, -1e30, 3.0, -3.0, 0.0, -2.0, 2.0, 4.0, 1e-30]
    b += [1e-30, 7.0, -1.5, 1.5, -1.0, 0.5, -0.5, 1e30, 3.0]
    a, b = np.array(a, dtype), np.array(b, dtype)
    actual, expected = run_broadcast("binary", a, b, opcodes.BINARY_OPS[name], dtype)
    exact = name not in ("power", "divide")
    assert_same(actual, expected, exact=exact, signs=True)


def test_binary_int64_edge_cases_match_cpu():
    smallest, largest = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    a = np.array([7, -7, 7, -7, 5, smallest, smallest, 0, largest, 3, -3, 0, -5], np.int64)
    b = np.array([2, 2, -2, -2, 0, -1, 1, -3, -1, 0, 7, 0, -7], np.int64)
    for name in ("add", "subtract", "multiply", "maximum", "minimum", "floor_divide", "remainder"):
        actual, expected = run_broadcast("binary", a, b, opcodes.BINARY_OPS[name], np.int64)
        assert_same(actual, expected)


def test_binary_int64_power_matches_cpu():
    # overflow wraps; negative exponents as Numba's integer power (the tiled op refuses them)
    a = np.array([5, -3, 2, 7, 0, 1, -1, -1, 2, -2, 3, 0, 1, -1], np.int64)
    b = np.array([40, 41, 63, 0, 0, 9, 3, 4, -1, -3, -2, -1, -5, -7], np.int64)
    actual, expected = run_broadcast("binary", a, b, opcodes.BINARY_OPS["power"], np.int64)
    assert_same(actual, expected)


@pytest.mark.parametrize("threads", [1, 5])
def test_kernels_take_any_block_size(threads, monkeypatch):
    monkeypatch.setattr(gpu, "block", lambda: threads)
    a, b = binary_operands("subtract", np.float64, (3, 1, 5), (1, 4, 5), np.random.default_rng(6))
    actual, expected = run_broadcast("binary", a, b, opcodes.SUBTRACT, np.float64)
    assert_same(actual, expected)
    actual, expected = run_unary(a.reshape(-1), opcodes.EXP)
    assert_same(actual, expected)


def test_binary_full_size_operand_with_permuted_strides():
    # a has as many elements as out but is a transposed view: the flat fast path must not run
    base = np.arange(15.0).reshape(5, 3)
    b = np.linspace(0.0, 1.0, 15).reshape(3, 5)
    d_base, d_b, d_out = on_device(base.reshape(-1), b.reshape(-1), np.zeros(15))
    strides = (np.array([1, 3], np.int64), np.array([5, 1], np.int64))
    shape = np.array([3, 5], np.int64)
    subtract = opcodes.BINARY_OPS["subtract"]
    gpu.binary(d_base, strides[0], d_b, strides[1], d_out, shape, subtract)
    np.testing.assert_array_equal(d_out.copy_to_host().reshape(3, 5), base.T - b)


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
                expected = np.zeros(a.shape, out_dtype)
                d_a, d_out = on_device(a.reshape(-1), expected.reshape(-1))
                host = (host_scalar, scalar_strides, a.reshape(-1), a_strides)
                device = (scalar, scalar_strides, d_a, a_strides)
                if not scalar_first:
                    host, device = host[2:] + host[:2], device[2:] + device[:2]
                getattr(cpu, kernel)(*host, expected.reshape(-1), shape, op)
                getattr(gpu, kernel)(*device, d_out, shape, op)
                actual = d_out.copy_to_host().reshape(a.shape)
                assert_same(actual, expected)


@pytest.mark.parametrize("scalar", [np.array([0.5]), np.array(0.5)], ids=["1-d", "0-d"])
def test_binary_with_a_one_element_device_operand(scalar):
    a = np.linspace(-2, 2, SIZE)
    d_a, d_b, d_out = on_device(a, scalar, np.zeros(SIZE))
    strides = (np.array([1], np.int64), np.array([0], np.int64))
    gpu.binary(d_a, strides[0], d_b, strides[1], d_out, np.array([SIZE]), opcodes.ADD)
    np.testing.assert_array_equal(d_out.copy_to_host(), a + 0.5)
    gpu.compare(d_b, strides[1], d_a, strides[0], d_out, np.array([SIZE]), opcodes.LESS)
    np.testing.assert_array_equal(d_out.copy_to_host(), 0.5 < a)
    d_one = cuda.device_array(1)
    gpu.binary(d_b, strides[1], np.float64(2.0), strides[1], d_one, np.array([1]), opcodes.MULTIPLY)
    np.testing.assert_array_equal(d_one.copy_to_host(), [1.0])


@pytest.mark.parametrize("shapes", BROADCAST_CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
@pytest.mark.parametrize("name", list(opcodes.COMPARE_OPS))
def test_compare_matches_cpu(name, dtype, shapes):
    rng = np.random.default_rng(4)
    # few distinct values, so that equal elements occur; zeros matter for the logical ops
    a = rng.integers(-2, 3, shapes[0]).astype(dtype)
    b = rng.integers(-2, 3, shapes[1]).astype(dtype)
    if np.dtype(dtype).kind == "f" and a.size > 1:
        a.reshape(-1)[1] = np.nan
        b.reshape(-1)[-1] = -0.0
    actual, expected = run_broadcast("compare", a, b, opcodes.COMPARE_OPS[name], np.bool_)
    assert_same(actual, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_scale_and_axpy_match_cpu(dtype):
    rng = np.random.default_rng(5)
    x, y = binary_operands("add", dtype, (SIZE,), (SIZE,), rng)
    for alpha in (-2.5, 3, np.float32(0.75)):
        expected = np.zeros_like(x)
        cpu.scale(x, alpha, expected)
        d_x, d_out = on_device(x, np.zeros_like(x))
        gpu.scale(d_x, alpha, d_out)
        assert_same(d_out.copy_to_host(), expected)
        d_y = cuda.to_device(y)
        cpu.axpy(alpha, x, y)
        gpu.axpy(alpha, d_x, d_y)
        assert_same(d_y.copy_to_host(), y)


@pytest.mark.parametrize(
    ("launcher", "args"),
    [
        (gpu.unary, lambda d: (d, d, len(opcodes.UNARY_OPS))),
        (gpu.unary_backward, lambda d: (d, d, d, len(opcodes.UNARY_BACKWARD_OPS))),
        (gpu.binary, lambda d: (d, [1], d, [1], d, [3], len(opcodes.BINARY_OPS))),
        (gpu.compare, lambda d: (d, [1], d, [1], d, [3], -1)),
    ],
)
def test_unknown_op_raises(launcher, args):
    with pytest.raises(ValueError, match="unknown op code"):
        launcher(*args(cuda.to_device(np.ones(3))))


def test_device_strides_are_refused():
    d = cuda.to_device(np.ones(3))
    strides = cuda.to_device(np.array([1], np.int64))
    with pytest.raises(TypeError, match="host array"):
        gpu.binary(d, strides, d, strides, d, np.array([3]), opcodes.ADD)


def test_two_host_operands_are_refused():
    d = cuda.to_device(np.ones(1))
    with pytest.raises(TypeError, match="device operand"):
        gpu.binary(np.ones(1), [0], 2.0, [0], d, np.array([1]), opcodes.ADD)


def test_empty_outputs_launch_nothing():
    empty = cuda.to_device(np.ones(0))
    gpu.unary(empty, empty, opcodes.EXP)
    gpu.unary_backward(empty, empty, empty, opcodes.EXP_BACKWARD)
    gpu.scale(empty, 2.0, empty)
    gpu.axpy(2.0, empty, empty)
    gpu.binary(empty, [1], empty, [1], empty, np.array([0]), opcodes.ADD)


def test_launches_on_a_stream():
    x = np.linspace(-1, 1, SIZE)
    stream = cuda.stream()
    d_x = cuda.to_device(x, stream=stream)
    d_out = cuda.device_array_like(d_x, stream=stream)
    gpu.unary(d_x, d_out, opcodes.EXP, stream=stream)
    gpu.binary(d_x, [1], d_out, [1], d_out, np.array([SIZE]), opcodes.ADD, stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(d_out.copy_to_host(stream=stream), x + np.exp(x), rtol=1e-12)


# --- real-GPU compilation ------------------------------------------------------------------------

_COMPILE_ALL = """
    import numpy as np

    from numtile.ops_cuda import elementwise as e

    i64, flag = types.int64, types.boolean
    numeric = {np.float32: types.float32, np.float64: types.float64, np.int64: i64}
    for dtype, t in numeric.items():
        a = t[::1]
        d = np.dtype(dtype)
        kernels = [
            (e._unary_kernel(d), (a, a, i64)),
            (e._unary_backward_kernel(d), (a, a, a, i64)),
            (e._scale_kernel, (a, t, a)),
            (e._axpy_kernel, (t, a, a)),
        ]
        for rank in (1, 3):
            s = types.UniTuple(i64, rank)
            kernels.append((e._binary_kernel(d), (a, t, i64, s, a, t, i64, s, a, s, i64)))
        for kernel, signature in kernels:
            cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    for t in (types.float32, types.float64, i64, flag):
        for rank in (1, 2):
            s = types.UniTuple(i64, rank)
            signature = (t[::1], t, i64, s, t[::1], t, i64, s, flag[::1], s, i64)
            cuda.compile_ptx(e._compare_kernel.py_func, signature, cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
