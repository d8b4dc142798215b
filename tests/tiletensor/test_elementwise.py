"""Tests for numtile/tiletensor/elementwise.py against NumPy formulas."""

import operator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numtile as nt

FLOATS = [np.float32, np.float64]
TILINGS = [((5, 7), (2, 3)), ((5, 7), (5, 7)), ((3, 4), (1, 1)), ((9,), (4,)), ((), ())]


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


# name -> (NumPy reference, input transform keeping the input in the function's domain)
UNARY = {
    "exp": (np.exp, None),
    "log": (np.log, np.abs),
    "sqrt": (np.sqrt, np.abs),
    "tanh": (np.tanh, None),
    "sin": (np.sin, None),
    "cos": (np.cos, None),
    "expm1": (np.expm1, None),
    "log1p": (np.log1p, np.abs),
    "floor": (np.floor, None),
    "ceil": (np.ceil, None),
    "sign": (np.sign, None),
    "square": (np.square, None),
    "reciprocal": (np.reciprocal, None),
    "relu": (lambda x: np.maximum(x, 0), None),
    "gelu_tanh": (_gelu_tanh, None),
    "silu": (lambda x: x * _sigmoid(x), None),
    "sigmoid": (_sigmoid, None),
    "negative": (np.negative, None),
    "abs": (np.abs, None),
}


def _input(shape, dtype, make_array, domain):
    x = make_array(shape, dtype, seed=3) * 3  # values in about [-9, 9], with fractions
    return x if domain is None else domain(x).astype(dtype)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, tile_shape", TILINGS)
def test_unary_matches_numpy(name, dtype, shape, tile_shape, make_array, check_tiles):
    reference, domain = UNARY[name]
    x = _input(shape, dtype, make_array, domain)
    out = getattr(nt, name)(nt.from_numpy(x, tile_shape=tile_shape))
    expected = reference(x.astype(np.float64)).astype(dtype)
    tolerance = 2e-6 if dtype == np.float32 else 1e-12
    check_tiles(out, expected, rtol=tolerance, atol=tolerance)


def test_unary_special_values_follow_numpy(check_tiles):
    x = np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan])
    t = nt.from_numpy(x, tile_shape=3)
    with np.errstate(all="ignore"):
        for name in ("sign", "relu", "abs", "exp", "tanh", "sigmoid", "floor", "negative"):
            reference = UNARY[name][0]
            check_tiles(getattr(nt, name)(t), reference(x), rtol=1e-15, atol=0)


def test_sigmoid_does_not_overflow(check_tiles):
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], np.float32)
    out = nt.sigmoid(nt.from_numpy(x, tile_shape=2))
    check_tiles(out, np.array([0.0, _sigmoid(-50.0), 0.5, 1.0, 1.0], np.float32), atol=1e-7)


@pytest.mark.parametrize("name", ["negative", "abs", "sign", "square", "floor", "ceil"])
def test_integer_preserving_unary_ops_stay_int64(name, make_array, check_tiles):
    x = make_array((5, 4), np.int64)
    out = getattr(nt, name)(nt.from_numpy(x, tile_shape=(2, 3)))
    check_tiles(out, getattr(np, name)(x))


@pytest.mark.parametrize("name", ["exp", "sqrt", "sin", "sigmoid"])
def test_float_unary_ops_promote_integers_to_float64(name, check_tiles):
    x = np.arange(1, 8)
    out = getattr(nt, name)(nt.from_numpy(x, tile_shape=3))
    check_tiles(out, UNARY[name][0](x.astype(np.float64)))


def test_empty_tensors(check_tiles):
    empty = np.zeros((0, 3))
    x = nt.zeros((0, 3), tile_shape=(2, 2))
    row = nt.from_numpy(np.arange(3.0), tile_shape=2)
    check_tiles(nt.exp(x), np.exp(empty))
    check_tiles(x + row, empty + np.arange(3.0))
    check_tiles(x * 2, empty * 2)
    check_tiles(x < row, empty < np.arange(3.0))
    check_tiles(x.astype(np.int64), empty.astype(np.int64))


def test_unary_of_a_non_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="TileTensor"):
        nt.exp(np.ones(3))


# --- binary operators -------------------------------------------------------------------------

ARITHMETIC = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}


def _binary_operands(symbol, dtype, shapes, make_array):
    a = make_array(shapes[0], dtype, seed=11)
    b = make_array(shapes[1], dtype, seed=12)
    if symbol in ("/", "//", "%"):  # no division by zero
        b = np.where(b == 0, 3, b).astype(dtype)
    if symbol == "**":
        if np.dtype(dtype).kind == "f":
            a = (np.abs(a) + 0.5).astype(dtype)
        else:
            b = np.abs(b) % 4
    return a, b


@pytest.mark.parametrize("symbol", sorted(ARITHMETIC))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize(
    "shapes, tiles",
    [
        (((5, 7), (5, 7)), ((2, 3), (2, 3))),  # same tiling
        (((5, 7), (5, 7)), ((2, 3), (3, 2))),  # different tilings: one side is retiled
        (((5, 7), (7,)), ((2, 3), (4,))),  # rank and tiling both differ
        (((7,), (5, 7)), ((4,), (2, 3))),
        (((5, 1), (1, 7)), ((2, 1), (1, 3))),  # both sides broadcast
        (((2, 1, 4), (3, 1)), ((1, 1, 3), (2, 1))),
        (((4, 3), ()), ((3, 2), ())),  # 0-d tensor operand
        (((6,), (6,)), ((1,), (6,))),
    ],
)
def test_binary_operators_broadcast_like_numpy(
    symbol, dtype, shapes, tiles, make_array, check_tiles
):
    a, b = _binary_operands(symbol, dtype, shapes, make_array)
    x, y = nt.from_numpy(a, tile_shape=tiles[0]), nt.from_numpy(b, tile_shape=tiles[1])
    function = ARITHMETIC[symbol]
    check_tiles(function(x, y), function(a, b))


@pytest.mark.parametrize(
    "name",
    [
        "add",
        "subtract",
        "multiply",
        "divide",
        "maximum",
        "minimum",
        "pow",
        "floor_divide",
        "remainder",
    ],
)
def test_binary_functions_match_numpy(name, make_array, check_tiles):
    a = make_array((6, 5), np.float64, seed=1)
    b = make_array((5,), np.float64, seed=2)
    if name == "pow":
        a = np.abs(a)
    reference = getattr(np, "power" if name == "pow" else name)
    check_tiles(
        getattr(nt, name)(nt.from_numpy(a, tile_shape=(4, 2)), nt.from_numpy(b, tile_shape=(3,))),
        reference(a, b),
    )


def test_maximum_and_minimum_propagate_nan(check_tiles):
    a = np.array([1.0, np.nan, 3.0, np.nan, -1.0])
    b = np.array([2.0, 0.0, np.nan, np.nan, -2.0])
    x, y = nt.from_numpy(a, tile_shape=2), nt.from_numpy(b, tile_shape=3)
    check_tiles(nt.maximum(x, y), np.maximum(a, b))
    check_tiles(nt.minimum(x, y), np.minimum(a, b))
    check_tiles(nt.maximum(x, 0.0), np.maximum(a, 0.0))
    check_tiles(nt.minimum(0.0, x), np.minimum(0.0, a))


def test_broadcasting_under_each_scheduler(scheduler, make_array, check_tiles):
    a, b = make_array((5, 7), np.float64, 1), make_array((7,), np.float64, 2)
    x, y = nt.from_numpy(a, tile_shape=(2, 3)), nt.from_numpy(b, tile_shape=(4,))
    check_tiles((x + y) * 2 - nt.exp(y), (a + b) * 2 - np.exp(b))
    check_tiles(x < y, a < b)


@pytest.mark.parametrize("symbol", ["//", "%"])
def test_floor_divide_and_remainder_signs_follow_numpy(symbol, check_tiles):
    function = ARITHMETIC[symbol]
    for dtype in (np.int64, np.float64):
        a = np.array([7, -7, 7, -7, 0, 6, -6], dtype)
        b = np.array([2, 2, -2, -2, 3, -3, 3], dtype)
        check_tiles(
            function(nt.from_numpy(a, tile_shape=3), nt.from_numpy(b, tile_shape=2)), function(a, b)
        )


@pytest.mark.parametrize("symbol", sorted(ARITHMETIC))
@pytest.mark.parametrize("scalar", [2, 2.5, -3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_python_scalars_on_either_side_follow_nep50(symbol, scalar, dtype, make_array, check_tiles):
    a = make_array((5, 3), dtype, seed=4)
    a = np.where(a == 0, 1, a).astype(dtype)
    if symbol == "**":
        a = (np.abs(a) % 3 + 1).astype(dtype)
        if isinstance(scalar, int) and scalar < 0 and a.dtype.kind == "i":
            scalar = 3  # NumPy refuses negative integer powers of integers
    x = nt.from_numpy(a, tile_shape=(2, 2))
    function = ARITHMETIC[symbol]
    with np.errstate(invalid="ignore"):  # (-3) ** 0.5 is nan on both sides
        check_tiles(function(x, scalar), function(a, scalar))
        check_tiles(function(scalar, x), function(scalar, a))


def test_nep50_scalar_promotion_examples(check_tiles):
    f32 = nt.from_numpy(np.arange(5, dtype=np.float32), tile_shape=2)
    i64 = nt.arange(5, tile_shape=3)
    assert (f32 + 1.0).dtype == np.float32
    assert (1.0 + f32).dtype == np.float32
    assert (f32 * 2).dtype == np.float32
    assert (i64 / 2).dtype == np.float64
    assert (i64 + 1).dtype == np.int64
    assert (i64 + 1.5).dtype == np.float64
    assert (i64 * np.float32(2)).dtype == np.float64  # NumPy 2: int64 with float32 -> float64
    assert (f32 + np.float64(1)).dtype == np.float64  # NumPy scalars are strong
    check_tiles(i64 / 2, np.arange(5) / 2)
    check_tiles(2 / (i64 + 1), 2 / (np.arange(5) + 1))


def test_tensor_dtypes_promote_like_numpy(check_tiles):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(3, dtype=np.int64)
    c = np.arange(3, dtype=np.float64)
    x = nt.from_numpy(a, tile_shape=(1, 2))
    check_tiles(x + nt.from_numpy(b, tile_shape=2), a + b)
    check_tiles(x * nt.from_numpy(c, tile_shape=3), a * c)
    check_tiles(nt.from_numpy(b, tile_shape=1) / nt.from_numpy(b + 1, tile_shape=2), b / (b + 1))


def test_matmul_operator(make_array, check_tiles):
    a, b = make_array((5, 4), np.float64, 1), make_array((4, 3), np.float64, 2)
    check_tiles(nt.from_numpy(a, tile_shape=(2, 3)) @ nt.from_numpy(b, tile_shape=(2, 2)), a @ b)


def test_unary_operators(make_array, check_tiles):
    a = make_array((4, 3), np.float64)
    x = nt.from_numpy(a, tile_shape=(3, 2))
    check_tiles(-x, -a)
    check_tiles(abs(x), np.abs(a))
    assert +x is x


# --- comparisons and logical ops ----------------------------------------------------------------

COMPARISONS = {
    "==": (operator.eq, "equal"),
    "!=": (operator.ne, "not_equal"),
    "<": (operator.lt, "less"),
    "<=": (operator.le, "less_equal"),
    ">": (operator.gt, "greater"),
    ">=": (operator.ge, "greater_equal"),
}


@pytest.mark.parametrize("symbol", sorted(COMPARISONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_comparisons_return_bool(symbol, dtype, make_array, check_tiles):
    a = make_array((5, 7), dtype, seed=5, low=-2, high=3)
    b = make_array((7,), dtype, seed=6, low=-2, high=3)
    x, y = nt.from_numpy(a, tile_shape=(2, 3)), nt.from_numpy(b, tile_shape=(4,))
    function, name = COMPARISONS[symbol]
    check_tiles(function(x, y), function(a, b))
    check_tiles(getattr(nt, name)(x, y), function(a, b))
    check_tiles(function(x, x), function(a, a))


@pytest.mark.parametrize("symbol", sorted(COMPARISONS))
def test_comparisons_with_scalars(symbol, check_tiles):
    a = np.arange(-3, 4, dtype=np.float64)
    x = nt.from_numpy(a, tile_shape=3)
    function = COMPARISONS[symbol][0]
    check_tiles(function(x, 0.5), function(a, 0.5))
    check_tiles(function(1, x), function(1, a))


def test_comparison_with_nan_is_false(check_tiles):
    a = np.array([1.0, np.nan, 3.0])
    x = nt.from_numpy(a, tile_shape=2)
    check_tiles(x == x, a == a)
    check_tiles(x != x, a != a)
    check_tiles(x < np.inf, a < np.inf)


@pytest.mark.parametrize(
    "name, reference", [("logical_and", np.logical_and), ("logical_or", np.logical_or)]
)
@pytest.mark.parametrize("dtype", [np.bool_, np.int64, np.float64])
def test_logical_ops(name, reference, dtype, make_array, check_tiles):
    a = make_array((4, 5), dtype, seed=7, low=-1, high=2)
    b = make_array((5,), dtype, seed=8, low=-1, high=2)
    x, y = nt.from_numpy(a, tile_shape=(3, 2)), nt.from_numpy(b, tile_shape=(3,))
    check_tiles(getattr(nt, name)(x, y), reference(a, b))


def test_bool_operators_are_logical(check_tiles):
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    x, y = nt.from_numpy(a, tile_shape=3), nt.from_numpy(b, tile_shape=2)
    check_tiles(x & y, a & b)
    check_tiles(x | y, a | b)


def test_arithmetic_on_bool_tensors_is_a_type_error():
    x = nt.from_numpy(np.array([True, False]))
    with pytest.raises(TypeError, match="logical_and"):
        x + x


# --- astype -------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", [np.float32, np.float64, np.int64, np.bool_])
@pytest.mark.parametrize("target", [np.float32, np.float64, np.int64, np.bool_])
def test_astype_matches_numpy(source, target, make_array, check_tiles):
    a = make_array((5, 3), source, seed=9)
    if np.dtype(source).kind == "f":
        a = (a * 4).astype(source)  # fractions of both signs: truncation toward zero matters
    x = nt.from_numpy(a, tile_shape=(2, 2))
    check_tiles(x.astype(target), a.astype(target))
    check_tiles(nt.astype(x, target), a.astype(target))


def test_astype_truncates_toward_zero(check_tiles):
    a = np.array([-2.7, -0.5, 0.5, 1.999, 3.0])
    check_tiles(nt.from_numpy(a, tile_shape=2).astype(np.int64), np.array([-2, 0, 0, 1, 3]))


def test_astype_copy_semantics(check_tiles):
    x = nt.arange(5, tile_shape=2)
    assert x.astype(np.int64, copy=False) is x
    copied = x.astype(np.int64)
    assert copied is not x and all(
        a is not b for a, b in zip(copied.handles, x.handles, strict=True)
    )
    check_tiles(copied, np.arange(5))


def test_astype_to_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="unsupported dtype"):
        nt.arange(3).astype(np.longdouble)


# --- property-based broadcasting -----------------------------------------------------------------


@st.composite
def broadcastable_pairs(draw):
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    rank_b = draw(st.integers(0, len(shape)))
    shape_b = list(shape[len(shape) - rank_b :])
    shape_a = list(shape)
    for axis in range(len(shape_a)):
        if draw(st.booleans()):
            shape_a[axis] = 1
    for axis in range(len(shape_b)):
        if draw(st.booleans()):
            shape_b[axis] = 1
    tiles_a = [draw(st.integers(1, s)) for s in shape_a]
    tiles_b = [draw(st.integers(1, s)) for s in shape_b]
    if draw(st.booleans()):
        shape_a, shape_b, tiles_a, tiles_b = shape_b, shape_a, tiles_b, tiles_a
    return tuple(shape_a), tuple(tiles_a), tuple(shape_b), tuple(tiles_b)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pair=broadcastable_pairs(), symbol=st.sampled_from(["+", "-", "*", "/"]))
def test_broadcasting_any_shapes_and_tilings(pair, symbol, make_array, check_tiles):
    shape_a, tiles_a, shape_b, tiles_b = pair
    a, b = make_array(shape_a, np.float64, 1), make_array(shape_b, np.float64, 2)
    if symbol == "/":
        b = np.abs(b) + 0.5
    function = ARITHMETIC[symbol]
    out = function(nt.from_numpy(a, tile_shape=tiles_a), nt.from_numpy(b, tile_shape=tiles_b))
    check_tiles(out, function(a, b))
