"""The array API foundation (numtile/tiletensor/dtypes.py, logic.py, info.py and the dtype,
complex, bitwise and in-place paths of elementwise.py and tensor.py) against NumPy."""

import array_api_strict as xs
import numpy as np
import pytest

import numtile as nt

INTEGERS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
ALL = [np.bool_, *INTEGERS, np.float32, np.float64, np.complex64, np.complex128]


# --- dtypes and promotion ----------------------------------------------------------------------


def test_every_array_api_dtype_is_exported_and_round_trips():
    names = [np.dtype(d).name for d in ALL]
    assert sorted(nt.__array_namespace_info__().dtypes()) == sorted(names)
    for dtype in ALL:
        name = "bool" if dtype is np.bool_ else np.dtype(dtype).name
        assert getattr(nt, name) == np.dtype(dtype)
        data = (np.arange(5) % 2).astype(dtype)
        np.testing.assert_array_equal(nt.asarray(data, tile_shape=2).to_numpy(), data)


@pytest.mark.parametrize("first", ALL)
@pytest.mark.parametrize("second", ALL)
def test_result_type_is_numpys_promotion_and_can_cast_the_standards(first, second):
    assert nt.result_type(first, second) == np.result_type(first, second)
    name = "bool" if first is np.bool_ else np.dtype(first).name
    other = "bool" if second is np.bool_ else np.dtype(second).name
    expected = xs.can_cast(getattr(xs, name), getattr(xs, other))
    assert nt.can_cast(first, second) == expected


@pytest.mark.parametrize("scalar", [True, 1, 1.5, 1j])
def test_can_cast_refuses_a_python_scalar_by_name(scalar):
    # the standard's from_ is a dtype or an array (array_api_strict raises TypeError too)
    with pytest.raises(TypeError, match="Python scalar"):
        nt.can_cast(scalar, nt.float32)
    with pytest.raises(TypeError):
        xs.can_cast(scalar, xs.float32)


def test_the_array_api_table_and_the_documented_mixed_kinds():
    assert nt.result_type(nt.int8, nt.uint8) == nt.int16
    assert nt.result_type(nt.uint32, nt.int32) == nt.int64
    assert nt.result_type(nt.float32, nt.complex64) == nt.complex64
    assert nt.result_type(nt.float64, nt.complex64) == nt.complex128
    assert nt.result_type(nt.int64, nt.uint64) == nt.float64  # NumPy, not the standard
    assert nt.result_type(nt.int32, nt.float32) == nt.float64  # NumPy, not the standard
    assert nt.result_type(nt.int8, 1) == nt.int8 and nt.result_type(nt.float32, 1.0) == nt.float32
    assert nt.result_type(nt.float32, 1j) == nt.complex64
    with pytest.raises(ValueError, match="at least one"):
        nt.result_type(1, 2.0)


def test_isdtype_kinds():
    assert nt.isdtype(nt.int8, "signed integer") and not nt.isdtype(nt.uint8, "signed integer")
    assert nt.isdtype(nt.uint64, "integral") and nt.isdtype(nt.complex64, "numeric")
    assert nt.isdtype(nt.float32, ("bool", "real floating")) and nt.isdtype(nt.bool, nt.bool)
    assert not nt.isdtype(nt.bool, "numeric")
    with pytest.raises(ValueError, match="unknown dtype kind 'float'"):
        nt.isdtype(nt.float32, "float")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_finfo_matches_numpy(dtype):
    ours, theirs = nt.finfo(dtype), np.finfo(dtype)
    assert (ours.bits, ours.eps, ours.max, ours.min) == (
        theirs.bits,
        theirs.eps,
        theirs.max,
        theirs.min,
    )
    assert ours.smallest_normal == theirs.smallest_normal and ours.dtype == theirs.dtype
    assert nt.finfo(nt.zeros((2,), dtype=dtype)).bits == theirs.bits


@pytest.mark.parametrize("dtype", INTEGERS)
def test_iinfo_matches_numpy(dtype):
    ours, theirs = nt.iinfo(dtype), np.iinfo(dtype)
    assert (ours.bits, ours.min, ours.max, ours.dtype) == (
        theirs.bits,
        theirs.min,
        theirs.max,
        theirs.dtype,
    )


def test_info_of_the_wrong_kind_is_a_value_error():
    with pytest.raises(ValueError, match="finfo needs a floating dtype, got int8"):
        nt.finfo(nt.int8)
    with pytest.raises(ValueError, match="iinfo needs an integer dtype, got float32"):
        nt.iinfo(nt.float32)
    with pytest.raises(TypeError, match=f"unsupported dtype {np.dtype(np.longdouble).name}"):
        nt.finfo(np.longdouble)


def test_mixed_integer_arithmetic_promotes_like_numpy():
    a, b = np.arange(-3, 4, dtype=np.int8), np.arange(7, dtype=np.uint8)
    x, y = nt.asarray(a, tile_shape=3), nt.asarray(b, tile_shape=2)
    for op in ("add", "multiply", "subtract", "maximum"):
        result = getattr(nt, op)(x, y)
        expected = getattr(np, op)(a, b)
        assert result.dtype == expected.dtype
        np.testing.assert_array_equal(result.to_numpy(), expected)
    assert (x + 1).dtype == nt.int8 and (y * 2).dtype == nt.uint8


def test_astype_copy_and_complex_to_real():
    x = nt.asarray(np.arange(4, dtype=np.int16), tile_shape=3)
    assert nt.astype(x, nt.int16, copy=False) is x and x.astype("int16") is not x
    np.testing.assert_array_equal(x.astype(nt.uint8).to_numpy(), np.arange(4, dtype=np.uint8))
    z = nt.astype(x, nt.complex64)
    assert z.dtype == nt.complex64
    with pytest.raises(TypeError, match="complex64 to float32 would drop the imaginary part"):
        nt.astype(z, nt.float32)
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        nt.astype(x, nt.int8, device="gpu")


# --- complex -----------------------------------------------------------------------------------


def _complex(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_arithmetic_and_unary_math(dtype):
    a, b = _complex((5, 3), dtype, 0), _complex((3,), dtype, 1)
    x, y = nt.asarray(a, tile_shape=(2, 2)), nt.asarray(b, tile_shape=2)
    tolerance = dict(rtol=1e-5 if dtype == np.complex64 else 1e-12)
    for op in ("add", "subtract", "multiply", "divide", "power"):
        result = getattr(nt, op)(x, y)
        assert result.dtype == dtype
        np.testing.assert_allclose(result.to_numpy(), getattr(np, op)(a, b), **tolerance)
    np.testing.assert_allclose((x * 2.5 - 1j).to_numpy(), a * 2.5 - 1j, **tolerance)
    for op in ("negative", "exp", "log", "sqrt", "square", "reciprocal", "conj", "abs"):
        np.testing.assert_allclose(getattr(nt, op)(x).to_numpy(), getattr(np, op)(a), **tolerance)
    assert nt.abs(x).dtype == nt.real(x).dtype == nt.imag(x).dtype == np.finfo(dtype).dtype
    np.testing.assert_array_equal(nt.real(x).to_numpy(), a.real)
    np.testing.assert_array_equal(nt.imag(x).to_numpy(), a.imag)
    np.testing.assert_array_equal((x == x).to_numpy(), np.ones(a.shape, bool))
    np.testing.assert_array_equal((x != y).to_numpy(), a != b)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_sum_and_prod(dtype):
    a = _complex((4, 5), dtype) * 0.5
    x = nt.asarray(a, tile_shape=(3, 2))
    tolerance = dict(rtol=1e-5 if dtype == np.complex64 else 1e-12)
    np.testing.assert_allclose(nt.sum(x).item(), a.sum(), **tolerance)
    np.testing.assert_allclose(nt.sum(x, axis=0).to_numpy(), a.sum(axis=0), **tolerance)
    np.testing.assert_allclose(nt.prod(x, axis=1).to_numpy(), a.prod(axis=1), **tolerance)
    np.testing.assert_allclose(nt.mean(x).item(), a.mean(), **tolerance)
    assert nt.sum(x).dtype == dtype


def test_real_inputs_of_conj_real_imag():
    a = np.array([1.5, -2.0, np.nan])
    x = nt.asarray(a, tile_shape=2)
    np.testing.assert_array_equal(nt.conj(x).to_numpy(), a)
    np.testing.assert_array_equal(nt.real(x).to_numpy(), a)
    np.testing.assert_array_equal(nt.imag(x).to_numpy(), np.zeros(3))


@pytest.mark.parametrize(
    "call, op",
    [
        (lambda z: nt.trunc(z), "trunc"),  # sin has complex kernels now (complex_math.py)
        (lambda z: nt.floor(z), "floor"),
        (lambda z: nt.maximum(z, z), "maximum"),
        (lambda z: z < z, "less"),
        (lambda z: nt.max(z), "max"),
        (lambda z: nt.signbit(z), "signbit"),
    ],
)
def test_ops_without_complex_kernels_name_the_op_and_dtype(call, op):
    z = nt.asarray(np.array([1 + 1j, 2j]))
    with pytest.raises(TypeError, match=f"{op}.*complex128"):
        call(z)


@pytest.mark.parametrize("ord", [2, 1, np.inf, -np.inf, 0, 3])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_vector_norm_of_complex_is_the_norm_of_the_moduli(ord, dtype):
    a = (np.arange(1.0, 8.0) - 3.0 + 1j * np.linspace(-2.0, 2.0, 7)).astype(dtype)
    actual = nt.linalg.vector_norm(nt.asarray(a, tile_shape=3), ord=ord)
    expected = np.linalg.norm(a, ord=ord)
    assert actual.dtype == np.abs(a).dtype
    np.testing.assert_allclose(actual.item(), expected, rtol=1e-5)


# --- predicates, where, all/any ------------------------------------------------------------------

SPECIALS = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-310, -np.nan])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128, np.int16, np.bool_])
@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite"])
def test_predicates_on_special_values(name, dtype):
    if np.dtype(dtype).kind in "fc":
        a = SPECIALS.astype(dtype)
        if dtype == np.complex128:
            a.imag = SPECIALS[::-1]
    else:
        a = np.arange(9).astype(dtype)
    result = getattr(nt, name)(nt.asarray(a, tile_shape=4))
    assert result.dtype == nt.bool
    np.testing.assert_array_equal(result.to_numpy(), getattr(np, name)(a))


def test_signbit_sees_negative_zero_and_nan_signs():
    a = SPECIALS.astype(np.float32)
    np.testing.assert_array_equal(nt.signbit(nt.asarray(a, tile_shape=4)).to_numpy(), np.signbit(a))


@pytest.mark.parametrize(
    "shapes, tiles",
    [
        (((4, 5), (4, 5), (4, 5)), ((3, 2), (2, 3), (4, 1))),
        (((4, 1), (1, 5), (5,)), ((3, 1), (1, 2), (4,))),
        (((), (3, 2), ()), ((), (2, 1), ())),
        (((1, 3), (2, 1), (0, 1, 1)), ((1, 2), (1, 1), (1, 1, 1))),
    ],
)
def test_where_broadcasts_three_operands_over_any_tiling(shapes, tiles):
    rng = np.random.default_rng(0)
    c = rng.integers(0, 2, shapes[0]).astype(bool)
    a = rng.standard_normal(shapes[1]).astype(np.float32)
    b = rng.integers(-5, 5, shapes[2]).astype(np.int16)
    args = [nt.asarray(v, tile_shape=t) for v, t in zip((c, a, b), tiles)]
    result = nt.where(*args)
    expected = np.where(c, a, b)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    np.testing.assert_array_equal(result.to_numpy(), expected)


def test_where_with_scalars_and_a_numeric_condition():
    a = np.array([[1.0, -2.0, 3.0], [np.nan, 0.0, -0.0]])
    x = nt.asarray(a, tile_shape=(1, 2))
    np.testing.assert_array_equal(nt.where(x > 0, x, 0.0).to_numpy(), np.where(a > 0, a, 0.0))
    np.testing.assert_array_equal(nt.where(x, 1, x).to_numpy(), np.where(a, 1, a))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        nt.where(x > 0, x, nt.ones((4,)))


def test_where_gradient_flows_to_the_branch_taken():
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, -2.0, 3.0], [4.0, -5.0, 0.5]])
    b = np.array([10.0, 20.0, 30.0])
    x = nt.asarray(a, tile_shape=(1, 2)).requires_grad_()
    y = nt.asarray(b, tile_shape=2).requires_grad_()
    nt.sum(nt.where(x > 0, x * x, y)).backward()
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    torch.where(ta > 0, ta * ta, tb).sum().backward()
    np.testing.assert_allclose(x.grad.to_numpy(), ta.grad.numpy())
    np.testing.assert_allclose(y.grad.to_numpy(), tb.grad.numpy())


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_all_and_any_match_numpy(axis, keepdims):
    a = np.array([[0.0, 1.0, np.nan], [0.0, 0.0, 0.0], [2.0, -0.0, 3.0], [1.0, 1.0, 1.0]])
    x = nt.asarray(a, tile_shape=(3, 2))
    for name in ("all", "any"):
        result = getattr(nt, name)(x, axis=axis, keepdims=keepdims)
        expected = getattr(np, name)(a, axis=axis, keepdims=keepdims)
        assert result.dtype == nt.bool
        np.testing.assert_array_equal(result.to_numpy(), expected)


def test_all_and_any_of_empty_axes():
    x = nt.zeros((0, 3), dtype=nt.int8)
    assert nt.all(x).item() is True and nt.any(x).item() is False
    np.testing.assert_array_equal(nt.any(x, axis=0).to_numpy(), np.zeros(3, bool))


# --- bitwise -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.bool_])
def test_bitwise_ops_and_operators(dtype):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 100, (5, 4)).astype(dtype)
    b = rng.integers(0, 7, (4,)).astype(dtype)
    x, y = nt.asarray(a, tile_shape=(2, 3)), nt.asarray(b, tile_shape=3)
    pairs = [("bitwise_and", "__and__"), ("bitwise_or", "__or__"), ("bitwise_xor", "__xor__")]
    if dtype != np.bool_:
        pairs += [("bitwise_left_shift", "__lshift__"), ("bitwise_right_shift", "__rshift__")]
    for name, dunder in pairs:
        expected = getattr(np, name)(a, b)
        np.testing.assert_array_equal(getattr(nt, name)(x, y).to_numpy(), expected)
        np.testing.assert_array_equal(getattr(x, dunder)(y).to_numpy(), expected)
    np.testing.assert_array_equal((~x).to_numpy(), ~a)
    np.testing.assert_array_equal(nt.bitwise_invert(x).to_numpy(), np.invert(a))
    scalar = True if dtype == np.bool_ else 3
    np.testing.assert_array_equal((scalar & x).to_numpy(), scalar & a)


def test_bitwise_of_floats_and_shifts_of_booleans_are_type_errors():
    with pytest.raises(
        TypeError, match="bitwise_and needs integer or boolean tensors, got float64"
    ):
        nt.ones((2,)) & nt.ones((2,))
    with pytest.raises(TypeError, match="bitwise_left_shift needs integer tensors, got bool"):
        nt.asarray([True]) << nt.asarray([True])


def test_logical_not():
    a = np.array([0, 3, -1, 0], np.int32)
    np.testing.assert_array_equal(nt.logical_not(nt.asarray(a)).to_numpy(), np.logical_not(a))
    np.testing.assert_array_equal(nt.logical_not(nt.asarray(a != 0)).to_numpy(), a == 0)


# --- in-place operators --------------------------------------------------------------------------


def test_in_place_operators_write_the_tensors_own_tiles():
    a = np.arange(12.0).reshape(3, 4)
    x = nt.asarray(a, tile_shape=(2, 3))
    handles = list(x.handles)
    y = nt.asarray(np.arange(4.0), tile_shape=(2,))
    x += y
    x *= 2
    x -= 1.5
    x /= nt.full((3, 1), 4.0)
    x **= 2
    x //= 1.0
    x %= 7.0
    expected = (((((a + np.arange(4.0)) * 2 - 1.5) / 4.0) ** 2) // 1.0) % 7.0
    assert x.handles == handles
    np.testing.assert_allclose(x.to_numpy(), expected)
    x += x  # reads its own tiles: computed aside, then copied in
    np.testing.assert_allclose(x.to_numpy(), 2 * expected)


def test_in_place_bitwise_and_integer_operators():
    a = np.arange(10, dtype=np.uint8)
    x = nt.asarray(a, tile_shape=3)
    x &= 6
    x |= nt.asarray(np.full(10, 1, np.uint8), tile_shape=4)
    x ^= 2
    x <<= 1
    x >>= 1
    np.testing.assert_array_equal(x.to_numpy(), (((a & 6) | 1) ^ 2))


def test_in_place_ops_order_after_earlier_readers():
    x = nt.asarray(np.ones(6), tile_shape=4)
    before = x * 1.0
    x += 5.0
    after = x * 1.0
    np.testing.assert_array_equal(before.to_numpy(), np.ones(6))
    np.testing.assert_array_equal(after.to_numpy(), np.full(6, 6.0))


def test_in_place_ops_that_change_dtype_or_shape_are_refused():
    x = nt.arange(4)
    with pytest.raises(TypeError, match="in-place divide would change the dtype of a int64"):
        x /= 2
    with pytest.raises(TypeError, match="in-place add would change the dtype"):
        x += 1.5
    with pytest.raises(ValueError, match=r"result's shape \(2, 4\) is not the tensor's \(4,\)"):
        x += nt.zeros((2, 4), dtype=nt.int64)


def test_in_place_on_a_tensor_that_requires_grad_is_refused():
    w = nt.ones((3,)).requires_grad_()
    with pytest.raises(nt.NoGradientError, match="in-place"):
        w += 1.0
    h = w * 2.0
    with pytest.raises(nt.NoGradientError, match="in-place"):
        h *= 2.0
    with nt.no_grad():
        w += 1.0
    np.testing.assert_array_equal(w.to_numpy(), np.full(3, 2.0))


# --- scalars, device, namespace info -------------------------------------------------------------


def test_python_scalar_conversions():
    assert int(nt.asarray([7], dtype=nt.int8)) == 7 and float(nt.asarray(2.5)) == 2.5
    assert complex(nt.asarray(1 + 2j)) == 1 + 2j and bool(nt.asarray([[True]])) is True
    assert [10, 20, 30][nt.asarray(1, dtype=nt.uint8)] == 20
    with pytest.raises(ValueError, match="ambiguous"):
        bool(nt.ones((2,)))
    with pytest.raises(TypeError, match="size 1"):
        int(nt.ones((2,), dtype=nt.int64))
    with pytest.raises(TypeError, match="size 1"):
        float(nt.ones((0,)))
    with pytest.raises(TypeError, match="only integer tensors can be an index"):
        [1, 2][nt.asarray(1.0)]
    with pytest.raises(TypeError, match="float.*complex128"):
        float(nt.asarray(1j))


def test_device_and_to_device():
    x = nt.ones((2,))
    assert x.device == "cpu" and x.device == nt.Device() and str(x.device) == "cpu"
    assert x.to_device("cpu") is x and x.to_device(x.device) is x and x.size == 2
    with pytest.raises(ValueError, match="unknown device 'cuda:0'"):
        x.to_device("cuda:0")


def test_namespace_info():
    info = nt.__array_namespace_info__()
    assert info.capabilities() == {"boolean indexing": False, "data-dependent shapes": False}
    assert info.devices() == [info.default_device()] and info.default_device() == "cpu"
    assert info.default_dtypes() == {
        "real floating": nt.float64,
        "complex floating": nt.complex128,
        "integral": nt.int64,
        "indexing": nt.int64,
    }
    assert set(info.dtypes(kind="integral")) == {np.dtype(d).name for d in INTEGERS}
    assert set(info.dtypes(kind=("bool", "complex floating"))) == {
        "bool",
        "complex64",
        "complex128",
    }
