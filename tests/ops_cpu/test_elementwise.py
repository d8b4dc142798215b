"""numtile.ops_cpu.elementwise against NumPy references."""

import numpy as np
import pytest

from numtile import opcodes
from numtile.ops_cpu import elementwise

FLOAT_DTYPES = [np.float32, np.float64]
# float32 kernels compute in float32 (a few ulp from the float64 reference); float64 kernels
# call libm where NumPy uses its own SIMD functions, which differ in the last ulp or two.
TOLERANCE = {
    np.float32: {"rtol": 2e-6, "atol": 1e-6},
    np.float64: {"rtol": 1e-12, "atol": 1e-14},
}


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


UNARY_REFERENCE = {
    "negative": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0),
    "gelu_tanh": _gelu_tanh,
    "silu": lambda x: x * _sigmoid(x),
    "sin": np.sin,
    "cos": np.cos,
    "square": np.square,
    "reciprocal": np.reciprocal,
    "sigmoid": _sigmoid,
    "expm1": np.expm1,
    "log1p": np.log1p,
    "floor": np.floor,
    "ceil": np.ceil,
    "sign": np.sign,
}
POSITIVE_DOMAIN = {"log", "sqrt", "reciprocal", "log1p"}
INTEGER_UNARY_OPS = ["negative", "abs", "square", "sign"]

BINARY_REFERENCE = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "floor_divide": np.floor_divide,
    "remainder": np.remainder,
}
COMPARE_REFERENCE = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
}

# (a shape, b shape): equal shapes, scalars on either side, broadcast axes in a, in b, in both.
BROADCAST_CASES = [
    ((), ()),
    ((1,), (1,)),
    ((7,), (7,)),
    ((7,), ()),
    ((), (7,)),
    ((7,), (1,)),
    ((1,), (7,)),
    ((3, 5), (5,)),
    ((3, 5), (3, 1)),
    ((1, 5), (3, 5)),
    ((3, 1), (1, 5)),
    ((4, 1), (4, 1)),
    ((2, 3, 4), (3, 1)),
    ((2, 1, 4), (1, 3, 1)),
    ((2, 3, 4, 1), (5,)),
    ((2, 3, 4, 5), (2, 1, 4, 1)),
    ((1, 3, 1, 5), (2, 1, 4, 1)),
    ((0, 3), (3,)),
]


def element_strides(shape, out_shape):
    """Element strides of a C-contiguous array of ``shape`` broadcast to ``out_shape``."""
    broadcast = np.broadcast_to(np.empty(shape, np.int8), out_shape)
    return np.array(broadcast.strides, dtype=np.int64)


def run_broadcast(kernel, a, b, op, out_dtype):
    """Run a broadcasting kernel on C-contiguous a and b the way tiled ops call it."""
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    out = np.empty(out_shape, out_dtype)
    kernel(
        a.reshape(-1),
        element_strides(a.shape, out_shape),
        b.reshape(-1),
        element_strides(b.shape, out_shape),
        out.reshape(-1),
        np.array(out_shape, dtype=np.int64),
        op,
    )
    return out


def binary_operands(op, dtype, a_shape, b_shape, rng):
    """Operands covering signs, zero divisors and (for power) a safe range."""
    if np.dtype(dtype).kind == "i":
        a = rng.integers(-9, 10, a_shape)
        b = rng.integers(0, 5, b_shape) if op == "power" else rng.integers(-4, 5, b_shape)
    elif op == "power":
        a = rng.uniform(0.1, 3, a_shape)
        b = rng.uniform(-3, 3, b_shape)
    else:
        a = rng.uniform(-5, 5, a_shape)
        b = rng.uniform(-5, 5, b_shape)
        if b.size > 2:
            b.reshape(-1)[::3] = np.round(b.reshape(-1)[::3])
    return np.asarray(a, dtype), np.asarray(b, dtype)


def test_reference_tables_cover_every_op():
    assert UNARY_REFERENCE.keys() == opcodes.UNARY_OPS.keys()
    assert BINARY_REFERENCE.keys() == opcodes.BINARY_OPS.keys()
    assert COMPARE_REFERENCE.keys() == opcodes.COMPARE_OPS.keys()
    for table in (
        opcodes.UNARY_OPS,
        opcodes.UNARY_BACKWARD_OPS,
        opcodes.BINARY_OPS,
        opcodes.COMPARE_OPS,
    ):
        assert sorted(table.values()) == list(range(len(table)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", list(UNARY_REFERENCE))
def test_unary_matches_numpy(name, dtype):
    rng = np.random.default_rng(0)
    low = 0.05 if name in POSITIVE_DOMAIN else -4.0
    x = rng.uniform(low, 4.0, size=(5, 13)).astype(dtype)
    x[0, :3] = [0.5, 1.5, 2.0]
    if name not in POSITIVE_DOMAIN:
        x[1, :4] = [-0.5, -2.5, 0.0, -1.0]
    out = np.full_like(x, np.nan)
    elementwise.unary(x.reshape(-1), out.reshape(-1), opcodes.UNARY_OPS[name])
    expected = UNARY_REFERENCE[name](x.astype(np.float64))
    np.testing.assert_allclose(out, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("name", INTEGER_UNARY_OPS)
def test_unary_int64_matches_numpy(name):
    x = np.arange(-6, 7, dtype=np.int64)
    out = np.zeros_like(x)
    elementwise.unary(x, out, opcodes.UNARY_OPS[name])
    np.testing.assert_array_equal(out, UNARY_REFERENCE[name](x))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_unary_special_values(dtype):
    # Large magnitudes: the stable sigmoid never forms exp(+1000) (inf / inf would be NaN).
    x = np.array([-1000.0, -60.0, 60.0, 1000.0, np.nan, -0.0], dtype)
    out = np.empty_like(x)
    elementwise.unary(x, out, opcodes.UNARY_OPS["sigmoid"])
    np.testing.assert_array_equal(out[[0, 2, 3]], [0.0, 1.0, 1.0])
    np.testing.assert_allclose(out[1], np.exp(-60.0), rtol=1e-5)
    assert np.isnan(out[4])
    elementwise.unary(x, out, opcodes.UNARY_OPS["silu"])
    np.testing.assert_array_equal(out[[0, 2, 3]], [-0.0, 60.0, 1000.0])
    elementwise.unary(x, out, opcodes.UNARY_OPS["relu"])
    assert np.isnan(out[4]) and out[0] == 0 and out[3] == 1000
    elementwise.unary(x, out, opcodes.UNARY_OPS["sign"])
    np.testing.assert_array_equal(out, np.sign(x))


def test_unary_unknown_op_raises():
    x = np.ones(3)
    with pytest.raises(ValueError, match="unknown op"):
        elementwise.unary(x, np.empty_like(x), len(opcodes.UNARY_OPS))


@pytest.mark.parametrize("name", list(opcodes.UNARY_BACKWARD_OPS))
def test_unary_backward_matches_finite_differences(name):
    rng = np.random.default_rng(1)
    low = 0.2 if name in POSITIVE_DOMAIN else -3.0
    x = rng.uniform(low, 3.0, size=40)
    x[np.abs(x) < 1e-3] = 0.5  # keep away from relu's kink
    grad_out = rng.normal(size=x.shape)
    grad_in = np.empty_like(x)
    elementwise.unary_backward(x, grad_out, grad_in, opcodes.UNARY_BACKWARD_OPS[name])
    forward = UNARY_REFERENCE[name]
    step = 1e-6
    slope = (forward(x + step) - forward(x - step)) / (2 * step)
    np.testing.assert_allclose(grad_in, grad_out * slope, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", list(opcodes.UNARY_BACKWARD_OPS))
def test_unary_backward_float32_matches_float64(name):
    rng = np.random.default_rng(2)
    low = 0.2 if name in POSITIVE_DOMAIN else -3.0
    x = rng.uniform(low, 3.0, size=40).astype(np.float32)
    grad_out = rng.normal(size=x.shape).astype(np.float32)
    op = opcodes.UNARY_BACKWARD_OPS[name]
    grad_in = np.empty_like(x)
    elementwise.unary_backward(x, grad_out, grad_in, op)
    expected = np.empty(x.shape)
    elementwise.unary_backward(x.astype(np.float64), grad_out.astype(np.float64), expected, op)
    np.testing.assert_allclose(grad_in, expected, rtol=1e-5, atol=1e-6)


# NumPy's int64 divide returns float64, while binary keeps one dtype: not tested for int64.
BINARY_CASES = [
    (name, dtype)
    for name in BINARY_REFERENCE
    for dtype in (np.float32, np.float64, np.int64)
    if not (name == "divide" and dtype == np.int64)
]


@pytest.mark.parametrize("shapes", BROADCAST_CASES, ids=str)
@pytest.mark.parametrize(("name", "dtype"), BINARY_CASES)
def test_binary_matches_numpy(name, dtype, shapes):
    a, b = binary_operands(name, dtype, *shapes, np.random.default_rng(3))
    out = run_broadcast(elementwise.binary, a, b, opcodes.BINARY_OPS[name], dtype)
    with np.errstate(all="ignore"):
        expected = BINARY_REFERENCE[name](a, b)
    if dtype == np.int64:
        np.testing.assert_array_equal(out, expected)
    else:
        np.testing.assert_allclose(out, expected, equal_nan=True, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ["floor_divide", "remainder", "divide", "maximum", "minimum"])
def test_binary_float_edge_cases_match_numpy(name, dtype):
    inf, nan = np.inf, np.nan
    a = np.array([1.0, -1.0, 7.5, -7.5, 0.0, -0.0, 5.0, -5.0, inf, nan, 1.0, -3.0, 2.0], dtype)
    b = np.array([0.1, 0.1, -2.0, 2.0, 3.0, -3.0, inf, inf, 2.0, 1.0, 0.0, 0.0, nan], dtype)
    out = run_broadcast(elementwise.binary, a, b, opcodes.BINARY_OPS[name], dtype)
    with np.errstate(all="ignore"):
        expected = BINARY_REFERENCE[name](a, b)
    np.testing.assert_array_equal(out, expected)
    number = ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(out[number]), np.signbit(expected[number]))


@pytest.mark.parametrize("name", ["floor_divide", "remainder"])
def test_binary_int64_edge_cases_match_numpy(name):
    smallest = np.iinfo(np.int64).min
    a = np.array([7, -7, 7, -7, 5, smallest, smallest, 0], np.int64)
    b = np.array([2, 2, -2, -2, 0, -1, 1, -3], np.int64)
    out = run_broadcast(elementwise.binary, a, b, opcodes.BINARY_OPS[name], np.int64)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out, BINARY_REFERENCE[name](a, b))


def test_binary_full_size_operand_with_permuted_strides():
    # a has as many elements as out but is a transposed view: the flat fast path must not run.
    base = np.arange(15.0).reshape(5, 3)
    b = np.linspace(0.0, 1.0, 15).reshape(3, 5)
    out = np.empty((3, 5))
    elementwise.binary(
        base.reshape(-1),
        np.array([1, 3], np.int64),
        b.reshape(-1),
        np.array([5, 1], np.int64),
        out.reshape(-1),
        np.array([3, 5], np.int64),
        opcodes.BINARY_OPS["subtract"],
    )
    np.testing.assert_array_equal(out, base.T - b)


@pytest.mark.parametrize("shapes", BROADCAST_CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("name", list(COMPARE_REFERENCE))
def test_compare_matches_numpy(name, dtype, shapes):
    rng = np.random.default_rng(4)
    # Few distinct values, so that equal elements occur; zeros matter for the logical ops.
    a = rng.integers(-2, 3, shapes[0]).astype(dtype)
    b = rng.integers(-2, 3, shapes[1]).astype(dtype)
    if dtype != np.int64 and a.size > 1:
        a.reshape(-1)[1] = np.nan
    out = run_broadcast(elementwise.compare, a, b, opcodes.COMPARE_OPS[name], np.bool_)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, COMPARE_REFERENCE[name](a, b))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_scale_and_axpy(dtype):
    rng = np.random.default_rng(5)
    x = rng.normal(size=17).astype(dtype)
    y = rng.normal(size=17).astype(dtype)
    out = np.empty_like(x)
    elementwise.scale(x, -2.5, out)
    np.testing.assert_allclose(out, dtype(-2.5) * x, **TOLERANCE[dtype])
    expected = y + dtype(0.75) * x
    elementwise.axpy(0.75, x, y)
    np.testing.assert_allclose(y, expected, **TOLERANCE[dtype])
    assert out.dtype == dtype and y.dtype == dtype


def test_scale_and_axpy_int64():
    x = np.arange(-3, 4, dtype=np.int64)
    y = np.ones_like(x)
    out = np.empty_like(x)
    elementwise.scale(x, 3, out)
    np.testing.assert_array_equal(out, 3 * x)
    elementwise.axpy(-2, x, y)
    np.testing.assert_array_equal(y, 1 - 2 * x)
