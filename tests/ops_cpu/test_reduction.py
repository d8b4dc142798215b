"""numtile.ops_cpu.reduction against NumPy references."""

import numpy as np
import pytest

from numtile import opcodes
from numtile.ops_cpu import reduction

FLOAT_DTYPES = [np.float32, np.float64]
# Results are accumulated in float64 and rounded once to the output dtype.
TOLERANCE = {
    np.float32: {"rtol": 2e-6, "atol": 1e-6},
    np.float64: {"rtol": 1e-12, "atol": 1e-13},
}

# (reduce over axis 1, combine with the existing out) for each op.
REDUCE_REFERENCE = {
    "sum": (lambda x: np.sum(x, axis=1), np.add),
    "max": (lambda x: np.max(x, axis=1), np.maximum),
    "min": (lambda x: np.min(x, axis=1), np.minimum),
    "prod": (lambda x: np.prod(x, axis=1), np.multiply),
    "sumsq": (lambda x: np.sum(x * x, axis=1), np.add),
    "sumabs": (lambda x: np.sum(np.abs(x), axis=1), np.add),
    "maxabs": (lambda x: np.max(np.abs(x), axis=1), np.maximum),
}

# (pre, n, post): innermost axis (post == 1), outermost (pre == 1), middle, n == 1, and a
# post wider than the kernel's column block.
REDUCE_SHAPES = [(1, 7, 1), (3, 5, 1), (1, 6, 4), (2, 3, 5), (2, 1, 3), (4, 2, 1), (2, 3, 1030)]


def reduce_operands(op, dtype, shape, rng):
    """x of logical shape (pre, n, post) and a nonzero initial out of shape (pre, post)."""
    pre, n, post = shape
    if np.dtype(dtype).kind == "i":
        x = rng.integers(-5, 6, shape)
        out = rng.integers(-5, 6, (pre, post))
    elif op == "prod":
        x = rng.uniform(0.5, 1.5, shape)
        out = rng.uniform(0.5, 1.5, (pre, post))
    else:
        x = rng.normal(size=shape)
        out = rng.normal(size=(pre, post))
    return x.astype(dtype), out.astype(dtype)


def reference_softmax(x, axis):
    exponential = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return exponential / np.sum(exponential, axis=axis, keepdims=True)


def test_reference_table_covers_every_op():
    assert REDUCE_REFERENCE.keys() == opcodes.REDUCE_OPS.keys()
    assert sorted(opcodes.REDUCE_OPS.values()) == list(range(len(opcodes.REDUCE_OPS)))


@pytest.mark.parametrize("shape", REDUCE_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("name", list(REDUCE_REFERENCE))
def test_reduce_accumulate_matches_numpy(name, dtype, shape):
    x, out = reduce_operands(name, dtype, shape, np.random.default_rng(0))
    reduce, combine = REDUCE_REFERENCE[name]
    wide = np.int64 if dtype == np.int64 else np.float64
    expected = combine(out.astype(wide), reduce(x.astype(wide)))
    reduction.reduce_accumulate(x.reshape(-1), out.reshape(-1), *shape, opcodes.REDUCE_OPS[name])
    assert out.dtype == dtype
    if dtype == np.int64:
        np.testing.assert_array_equal(out, expected)
    else:
        np.testing.assert_allclose(out, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("shape", [(3, 4, 1), (2, 4, 3)], ids=str)
def test_reduce_accumulate_accumulates_across_calls(shape):
    x = np.arange(np.prod(shape), dtype=np.float64)
    out = np.full((shape[0], shape[2]), 10.0)
    for _ in range(3):
        reduction.reduce_accumulate(x, out.reshape(-1), *shape, opcodes.REDUCE_OPS["sum"])
    np.testing.assert_allclose(out, 10.0 + 3 * x.reshape(shape).sum(axis=1))


def test_reduce_accumulate_empty_axis_leaves_out_unchanged():
    out = np.array([1.5, -2.0])
    for op in opcodes.REDUCE_OPS.values():
        reduction.reduce_accumulate(np.empty(0), out, 2, 0, 1, op)
    np.testing.assert_array_equal(out, [1.5, -2.0])


@pytest.mark.parametrize("post", [1, 2])
def test_reduce_accumulate_float32_sums_in_float64(post):
    # 1 + 4096 * 2**-24 is exact in float32, but a float32 running sum stays at 1.
    x = np.full((4097, post), 2.0**-24, np.float32)
    x[0] = 1.0
    out = np.zeros(post, np.float32)
    reduction.reduce_accumulate(x.reshape(-1), out, 1, 4097, post, opcodes.REDUCE_OPS["sum"])
    np.testing.assert_array_equal(out, np.float32(1 + 4096 * 2.0**-24))


@pytest.mark.parametrize("post", [1, 3])
@pytest.mark.parametrize("name", ["max", "min", "maxabs", "sum"])
def test_reduce_accumulate_propagates_nan(name, post):
    x = np.arange(5 * post, dtype=np.float64).reshape(5, post)
    x[2, 0] = np.nan
    out = np.zeros(post)
    reduction.reduce_accumulate(x.reshape(-1), out, 1, 5, post, opcodes.REDUCE_OPS[name])
    assert np.isnan(out[0])
    assert not np.isnan(out[1:]).any()


@pytest.mark.parametrize("shape", REDUCE_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_matches_numpy(dtype, shape):
    x = np.random.default_rng(1).normal(scale=3.0, size=shape).astype(dtype)
    out = np.full_like(x, np.nan)
    reduction.softmax(x.reshape(-1), out.reshape(-1), *shape)
    expected = reference_softmax(x.astype(np.float64), axis=1)
    np.testing.assert_allclose(out, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("post", [1, 2])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_is_stable_for_large_inputs(dtype, post):
    # The first element is not the maximum: shifting by it would overflow exp.
    x = np.repeat(np.array([-1000.0, 999.0, 1000.0, 1000.0], dtype), post).reshape(1, 4, post)
    out = np.empty_like(x)
    reduction.softmax(x.reshape(-1), out.reshape(-1), 1, 4, post)
    expected = reference_softmax(np.array([-2000.0, -1.0, 0.0, 0.0]), axis=0)
    np.testing.assert_allclose(out[0], np.repeat(expected[:, None], post, axis=1), rtol=1e-6)


@pytest.mark.parametrize("shape", [(2, 6, 1), (1, 5, 3), (2, 4, 3)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_backward_matches_analytic(dtype, shape):
    rng = np.random.default_rng(2)
    y = reference_softmax(rng.normal(size=shape), axis=1).astype(dtype)
    grad_out = rng.normal(size=shape).astype(dtype)
    grad_in = np.full_like(y, np.nan)
    reduction.softmax_backward(y.reshape(-1), grad_out.reshape(-1), grad_in.reshape(-1), *shape)
    y64, grad64 = y.astype(np.float64), grad_out.astype(np.float64)
    expected = y64 * (grad64 - np.sum(grad64 * y64, axis=1, keepdims=True))
    np.testing.assert_allclose(grad_in, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("shape", [(2, 6, 1), (2, 4, 3)], ids=str)
def test_softmax_backward_matches_finite_differences(shape):
    # d/dt of loss(x + t * direction) at t = 0, where loss = sum(grad_out * softmax(x)).
    rng = np.random.default_rng(3)
    x, grad_out, direction = (rng.normal(size=shape) for _ in range(3))
    y = reference_softmax(x, axis=1)
    grad_in = np.empty_like(x)
    reduction.softmax_backward(y.reshape(-1), grad_out.reshape(-1), grad_in.reshape(-1), *shape)

    def loss(t):
        return np.sum(grad_out * reference_softmax(x + t * direction, axis=1))

    step = 1e-6
    slope = (loss(step) - loss(-step)) / (2 * step)
    np.testing.assert_allclose(np.sum(grad_in * direction), slope, rtol=1e-6)
