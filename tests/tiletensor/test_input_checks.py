"""Input checks of public tensor functions (issue 9, item 8): clear errors, no wrong answers."""

from __future__ import annotations

import inspect
import operator

import numpy as np
import pytest
import scipy.linalg

import numtile as nt


@pytest.mark.parametrize("dtype", [">f8", ">f4", ">i8", "<f8", "=f4"])
def test_arrays_of_either_byte_order_are_accepted(dtype):
    values = np.arange(10).reshape(2, 5).astype(dtype)
    tensor = nt.from_numpy(values, tile_shape=(1, 2))
    assert tensor.dtype == values.dtype.newbyteorder("=") and tensor.dtype.isnative
    np.testing.assert_array_equal(tensor.to_numpy(), values)
    np.testing.assert_array_equal((tensor + 1).to_numpy(), values + 1)
    assert nt.zeros((3,), dtype=dtype).dtype == np.dtype(dtype).newbyteorder("=")


@pytest.mark.parametrize(
    "reduce",
    [nt.sum, nt.mean, nt.max, nt.min, nt.prod, nt.linalg.vector_norm],
    ids=lambda f: f.__name__,
)
def test_reductions_reject_lists_as_clearly_as_elementwise_ops(reduce):
    with pytest.raises(TypeError, match="exp expects a TileTensor, got list"):
        nt.exp([1.0, 2.0])
    with pytest.raises(TypeError, match=f"{reduce.__name__} expects a TileTensor, got list"):
        reduce([1, 2, 3])
    with pytest.raises(TypeError, match="matrix_norm expects a TileTensor, got list"):
        nt.linalg.matrix_norm([[1.0, 2.0]])


def _lower(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.tril(rng.standard_normal((n, n))) + 3 * np.eye(n)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("zero_at", [0, 4, 6])
def test_solve_triangular_with_a_zero_on_the_diagonal_raises_like_scipy(lower, zero_at):
    a = _lower(7) if lower else _lower(7).T
    a[zero_at, zero_at] = 0.0
    b = np.random.default_rng(1).standard_normal((7, 3))
    with pytest.raises(np.linalg.LinAlgError):
        scipy.linalg.solve_triangular(a, b, lower=lower)
    x = nt.linalg.solve_triangular(
        nt.from_numpy(a, tile_shape=(3, 3)), nt.from_numpy(b, tile_shape=(3, 2)), lower=lower
    )
    with pytest.raises(np.linalg.LinAlgError, match=f"zero on its diagonal at row {zero_at}"):
        x.to_numpy()


def test_solve_triangular_with_unit_diagonal_ignores_the_stored_diagonal():
    a = _lower(5)
    a[2, 2] = 0.0
    b = np.arange(5.0)
    x = nt.linalg.solve_triangular(
        nt.from_numpy(a, tile_shape=(2, 2)), nt.from_numpy(b, tile_shape=2), unit_diagonal=True
    )
    expected = scipy.linalg.solve_triangular(a, b, lower=True, unit_diagonal=True)
    np.testing.assert_allclose(x.to_numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("b_shape", [(7,), (7, 3)])
def test_solve_of_a_non_symmetric_matrix_as_spd_raises_instead_of_a_wrong_answer(b_shape):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((7, 7)) + 7 * np.eye(7)  # well-conditioned, not symmetric
    b = rng.standard_normal(b_shape)
    b_tensor = nt.from_numpy(b, tile_shape=(2,) * b.ndim)
    x = nt.linalg.solve(nt.from_numpy(a, tile_shape=(3, 3)), b_tensor, assume_a="pos")
    with pytest.raises(np.linalg.LinAlgError, match="not symmetric.*assume_a='gen'"):
        x.to_numpy()
    general = nt.linalg.solve(nt.from_numpy(a, tile_shape=(3, 3)), b_tensor)  # the default: LU
    np.testing.assert_allclose(general.to_numpy(), np.linalg.solve(a, b), rtol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_solve_of_symmetric_matrices_still_matches_numpy(dtype):
    rng = np.random.default_rng(3)
    m = rng.standard_normal((9, 9))
    a = (m @ m.T + 9 * np.eye(9)).astype(dtype)
    b = rng.standard_normal((9, 2)).astype(dtype)
    a_tensor = nt.from_numpy(m, tile_shape=(4, 4))
    product = a_tensor @ a_tensor.T + nt.from_numpy(9 * np.eye(9), tile_shape=(4, 4))
    for matrix in (nt.from_numpy(a, tile_shape=(4, 4)), product.astype(dtype)):
        x = nt.linalg.solve(matrix, nt.from_numpy(b, tile_shape=(3, 2))).to_numpy()
        rtol = 1e-4 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=rtol, atol=rtol)


def test_a_tensor_of_too_many_tiles_is_a_memory_error_with_count_and_bytes():
    for make in (nt.empty, nt.zeros):
        with pytest.raises(MemoryError, match=r"1,000,000,000,000 tiles.*bytes.*tile_shape"):
            make((10**6, 10**6), tile_shape=(1, 1))


def _ops_taking_a_tensor_first():
    """Every public op (numtile and numtile.linalg) whose first parameter is a TileTensor."""
    found = {}
    for prefix, namespace in (("nt.", nt), ("nt.linalg.", nt.linalg)):
        for name in dir(namespace):
            function = getattr(namespace, name)
            if nt.tiletensor.dispatch.dispatch_name(function) is None:
                continue
            first = next(iter(inspect.signature(function).parameters.values()), None)
            if first is not None and first.annotation == "TileTensor":
                found[prefix + name] = function
    return found


TENSOR_FIRST = _ops_taking_a_tensor_first()


@pytest.mark.parametrize("bad", [None, [1.0, 2.0], "ab"], ids=["None", "list", "str"])
@pytest.mark.parametrize("name", sorted(TENSOR_FIRST))
def test_every_op_refuses_a_non_tensor_first_argument_with_a_type_error(name, bad):
    # real, conj, imag, logical_not, flip, squeeze, take, repeat, roll, moveaxis,
    # broadcast_to, matrix_transpose and the unique_* functions raised AttributeError
    with pytest.raises(TypeError, match=f"expects a TileTensor, got {type(bad).__name__}"):
        TENSOR_FIRST[name](bad)


def test_the_sweep_of_non_tensor_arguments_covers_the_namespace():
    assert len(TENSOR_FIRST) > 100
    assert {"nt.real", "nt.unique_values", "nt.take", "nt.linalg.matrix_transpose"} <= set(
        TENSOR_FIRST
    )


BOOLS = np.array([[True, False, True]] * 5)


@pytest.mark.parametrize(
    "call",
    [nt.negative, nt.positive, nt.abs, nt.sign, operator.neg, operator.pos, abs],
    ids=["negative", "positive", "abs", "sign", "-x", "+x", "abs()"],
)
def test_arithmetic_on_booleans_is_a_type_error(call):
    # negative and abs gave int64, positive and +x a bool copy (NumPy refuses -, + and sign)
    with pytest.raises(TypeError, match="needs a numeric tensor, got bool"):
        call(nt.from_numpy(BOOLS, tile_shape=(2, 2)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("call", [nt.bitwise_invert, operator.invert], ids=["function", "~x"])
def test_bitwise_invert_of_a_non_integer_is_a_type_error(call, dtype):
    # it was NumPy's ValueError "Invalid integer data type" from inside np.iinfo
    with pytest.raises(TypeError, match=f"bitwise_invert needs integer or boolean.*{dtype}"):
        call(nt.ones((5, 3), dtype=dtype, tile_shape=(2, 2)))


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc"])
def test_rounding_booleans_gives_booleans_as_numpy_does(name, check_tiles):
    # floor and ceil of a boolean tensor raised AssertionError (the deferred form's dtype)
    x = nt.from_numpy(BOOLS, tile_shape=(2, 2))
    check_tiles(getattr(nt, name)(x), getattr(np, name)(BOOLS))


AXIS_CALLS = {
    "sum": lambda x: nt.sum(x, axis=2),
    "mean": lambda x: nt.mean(x, axis=(0, -3)),
    "var": lambda x: nt.var(x, axis=-3),
    "any": lambda x: nt.any(x, axis=2),
    "vector_norm": lambda x: nt.linalg.vector_norm(x, axis=2),
    "cumulative_sum": lambda x: nt.cumulative_sum(x, axis=2),
    "argmax": lambda x: nt.argmax(x, axis=2),
    "argmin": lambda x: nt.argmin(x, axis=-3),
    "sort": lambda x: nt.sort(x, axis=2),
    "argsort": lambda x: nt.argsort(x, axis=-3),
    "take": lambda x: nt.take(x, nt.asarray([0]), axis=2),
    "expand_dims": lambda x: nt.expand_dims(x, axis=3),
    "squeeze": lambda x: nt.squeeze(x, axis=2),
    "cross": lambda x: nt.linalg.cross(x, x, axis=-3),
    "vecdot": lambda x: nt.vecdot(x, x, axis=-3),
    "tensordot int": lambda x: nt.tensordot(x, x, axes=3),
    "tensordot pairs": lambda x: nt.tensordot(x, x, axes=((5,), (0,))),
}


@pytest.mark.parametrize("name", sorted(AXIS_CALLS))
def test_an_axis_out_of_range_is_numpys_axis_error(name):
    # AxisError is a ValueError and an IndexError: what NumPy and array_api_strict raise
    # (reductions, argmax, sort, take, expand_dims, squeeze raised a plain ValueError)
    x = nt.ones((5, 3), tile_shape=(2, 2))
    with pytest.raises(np.exceptions.AxisError, match=r"-3|\b2\b|\b3\b|\b5\b"):
        AXIS_CALLS[name](x)


def test_squeeze_refuses_a_repeated_or_non_integer_axis():
    x = nt.ones((5, 1), tile_shape=(2, 1))
    with pytest.raises(ValueError, match=r"repeated axis in \(1, -1\)"):  # was accepted
        nt.squeeze(x, axis=(1, -1))
    with pytest.raises(TypeError, match="axis must be an integer, got 1.0"):  # 'not iterable'
        nt.squeeze(x, axis=1.0)


def test_tensordot_axes_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="axes must be an int or a pair of sequences.*1.5"):
        nt.tensordot(nt.ones((2, 2)), nt.ones((2, 2)), axes=1.5)


@pytest.mark.parametrize("value", [None, "a", [1, 2]], ids=["None", "str", "list"])
def test_full_refuses_a_fill_value_that_is_no_scalar(value):
    # None filled the tensor with NaN
    kind = type(value).__name__
    with pytest.raises(TypeError, match=f"fill_value must be .* scalar, got {kind}"):
        nt.full((2, 3), value)


def test_full_of_a_python_integer_beyond_int64_is_an_overflow_error():
    # it said "unsupported dtype object" (a TypeError), array_api_strict raises OverflowError
    with pytest.raises(OverflowError, match=str(2**70)):
        nt.full((2,), 2**70)
    np.testing.assert_array_equal(nt.full((2,), -(2**63)).to_numpy(), np.full(2, -(2**63)))


@pytest.mark.parametrize("like", [nt.empty_like, nt.zeros_like, nt.ones_like])
def test_a_like_function_refuses_a_tile_shape_of_zero(like):
    # tile_shape=0 was taken for "not given" (x's tiling)
    with pytest.raises(ValueError, match="tile_shape 0 has rank 1"):
        like(nt.ones((5, 3), tile_shape=(2, 2)), tile_shape=0)
    with pytest.raises(ValueError, match="tile sizes must be positive"):
        like(nt.ones((4,)), tile_shape=0)


def test_arange_refuses_booleans_and_bounds_that_are_not_finite_or_real():
    with pytest.raises(TypeError, match="numeric dtype, got bool"):  # was [False, True, True]
        nt.arange(3, dtype=nt.bool)
    for stop in (float("inf"), float("nan")):  # OverflowError / ValueError from math.ceil
        with pytest.raises(ValueError, match=f"finite bounds, got start=0, stop={stop}"):
            nt.arange(0, stop)
    with pytest.raises(TypeError, match="real numbers, got start=0, stop=1j"):
        nt.arange(1j)


@pytest.mark.parametrize(
    "make",
    [
        lambda ts: nt.from_numpy(np.ones((5, 3)), tile_shape=ts),
        lambda ts: nt.ones((5, 3), tile_shape=ts),
        lambda ts: nt.ones((5, 3)).retile(ts),
        lambda ts: nt.broadcast_to(nt.ones((3,)), (5, 3), tile_shape=ts),
    ],
    ids=["from_numpy", "ones", "retile", "broadcast_to"],
)
def test_a_bad_tile_shape_is_named_as_given(make):
    # 2.0 said "'float' object is not iterable"; -1 (the whole axis) was shown as 5
    with pytest.raises(TypeError, match="tile_shape must be a sequence of integers, got 2.0"):
        make(2.0)
    with pytest.raises(ValueError, match=r"tile_shape \(-1,\) has rank 1 but shape \(5, 3\)"):
        make((-1,))
    with pytest.raises(ValueError, match=r"tile_shape 0 has rank 1 but shape \(5, 3\)"):
        make(0)


@pytest.mark.parametrize(
    "key", [1.5, "a", np.float64(1.0), object()], ids=["float", "str", "np.float64", "object"]
)
def test_a_key_of_no_index_type_is_an_index_error_as_in_numpy(key):
    x = nt.ones((5, 3), tile_shape=(2, 2))
    with pytest.raises(IndexError, match="invalid index .*valid indices"):  # was TypeError
        x[key]
    with pytest.raises(IndexError, match="invalid index"):
        x[key] = 1.0


def test_take_refuses_non_integer_indices_with_a_type_error_and_2d_ones_with_a_value_error():
    x = nt.ones((5, 3), tile_shape=(2, 2))
    with pytest.raises(TypeError, match="take needs integer indices, got float64"):  # IndexError
        nt.take(x, nt.asarray([0.0, 1.0]), axis=0)
    with pytest.raises(ValueError, match=r"take needs 1-D indices, got shape \(1, 1\)"):
        nt.take(x, nt.asarray([[0]]), axis=0)
    assert nt.take(x, [], axis=0).shape == (0, 3)


def test_searchsorted_checks_its_sorter():
    x1 = nt.from_numpy(np.arange(5.0), tile_shape=2)
    with pytest.raises(ValueError, match=r"sorter has shape \(3,\), x1 has shape \(5,\)"):
        nt.searchsorted(x1, nt.asarray([1.0]), sorter=nt.asarray([0, 1, 2]))  # was accepted
    with pytest.raises(TypeError, match="sorter must be an integer TileTensor, got float64"):
        nt.searchsorted(x1, nt.asarray([1.0]), sorter=x1)


@pytest.mark.parametrize(
    "call",
    [
        lambda: nt.linalg.cholesky(nt.ones((5, 3))),
        lambda: nt.linalg.eigh(nt.ones(3)),
        lambda: nt.linalg.svd(nt.ones(3)),
        lambda: nt.linalg.svdvals(nt.asarray(2.0)),
        lambda: nt.linalg.pinv(nt.ones(3)),
        lambda: nt.linalg.matrix_rank(nt.ones(3)),
        lambda: nt.linalg.qr(nt.ones(3)),
        lambda: nt.linalg.matrix_power(nt.ones((5, 3)), 2),
    ],
    ids=["cholesky", "eigh", "svd", "svdvals", "pinv", "matrix_rank", "qr", "matrix_power"],
)
def test_linalg_of_no_matrix_or_a_non_square_one_is_numpys_lin_alg_error(call):
    # LinAlgError is a ValueError (what these raised); inv, det and solve raised it already
    with pytest.raises(np.linalg.LinAlgError, match=r"shape \((5, 3|3,|)\)"):
        call()


@pytest.mark.parametrize("shape", [(0, 0), (3, 0), (0, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_of_an_empty_matrix_has_numpys_shapes(shape, mode, check_tiles):
    # (0, 0) raised IndexError from inside tsqr
    q, r = nt.linalg.qr(nt.zeros(shape), mode=mode)
    expected_q, expected_r = np.linalg.qr(np.zeros(shape), mode=mode)
    check_tiles(q, np.eye(*expected_q.shape))  # NumPy's complete Q of (3, 0) is the identity
    check_tiles(r, expected_r)


@pytest.mark.parametrize("ord", ["fro", "nuc", "x"])
def test_vector_norm_of_an_ord_that_is_no_number_is_a_value_error(ord):
    # it was "power: unsupported operand type str", a TypeError
    with pytest.raises(ValueError, match=f"ord must be a real number, inf or -inf, got '{ord}'"):
        nt.linalg.vector_norm(nt.ones((5, 3), tile_shape=(2, 2)), ord=ord)
    assert nt.linalg.vector_norm(nt.full((4,), 3.0), ord=None).item() == 6.0  # NumPy's 2


def test_dtype_functions_refuse_none_for_a_dtype():
    with pytest.raises(TypeError, match="can_cast takes dtypes or arrays, got None"):
        nt.can_cast(None, nt.float32)  # was False (None read as float64)
    with pytest.raises(TypeError, match="isdtype takes a dtype, got None"):
        nt.isdtype(None, "integral")


@pytest.mark.parametrize("repeats", [1.5, None, [1.0, 2.0]], ids=["float", "None", "floats"])
def test_repeat_counts_that_are_not_integers_are_a_type_error(repeats):
    with pytest.raises(TypeError, match="repeats must be an int or integers"):  # ValueError
        nt.repeat(nt.ones((2, 3)), repeats, axis=0)


@pytest.mark.parametrize("call", [nt.bitwise_and, nt.bitwise_left_shift, operator.xor])
def test_a_bitwise_dtype_error_names_the_operands_dtypes(call):
    # it named their promoted dtype, float64, which neither operand has
    x, y = nt.ones((3,), dtype=nt.int64), nt.ones((3,), dtype=nt.uint64)
    with pytest.raises(TypeError, match="needs integer.* tensors, got int64 and uint64"):
        call(x, y)


def test_iterating_a_0d_tensor_is_a_type_error_and_a_1d_one_gives_its_elements():
    # Python iterated through __getitem__ until IndexError: a 0-d tensor looked empty
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        list(nt.asarray(1.0))
    assert [t.item() for t in nt.arange(5, tile_shape=2)] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("reduce", [nt.var, nt.std])
def test_a_correction_that_is_no_number_is_named(reduce):
    # it was "'>' not supported between instances of 'int' and 'str'"
    with pytest.raises(TypeError, match="correction must be a real number, got 'a'"):
        reduce(nt.ones((5, 3), tile_shape=(2, 2)), correction="a")


@pytest.mark.parametrize(
    "call",
    [
        lambda copy: nt.asarray([1.0, 2.0], copy=copy),
        lambda copy: nt.reshape(nt.ones((2, 3), tile_shape=(1, 3)), (6,), copy=copy),
    ],
    ids=["asarray", "reshape"],
)
def test_a_copy_keyword_that_is_no_bool_is_refused_as_numpy_does(call):
    # "x" was read as True; NumPy raises ValueError for it
    with pytest.raises(ValueError) as expected:
        np.asarray([1.0], copy="x")
    with pytest.raises(ValueError, match="copy must be True, False or None, got 'x'"):
        call("x")
    assert expected.type is ValueError
    np.testing.assert_array_equal(call(np.True_).to_numpy(), call(True).to_numpy())


@pytest.mark.parametrize("make", [np.zeros, lambda n: nt.asarray(np.zeros(n))])
def test_an_empty_float_index_array_is_refused_but_an_empty_list_is_a_key(make):
    # NumPy refuses x[np.zeros(0)] and takes x[[]]; numtile took both
    values = np.arange(12.0).reshape(4, 3)
    x = nt.from_numpy(values, tile_shape=(2, 2))
    with pytest.raises(IndexError):
        values[np.zeros(0)]
    with pytest.raises(IndexError, match="integer or boolean type, got float64"):
        x[make(0)]
    with pytest.raises(TypeError, match="take needs integer indices, got float64"):
        nt.take(x, make(0), axis=0)  # NumPy's take: TypeError (cannot cast float64)
    assert nt.take(x, [], axis=0).shape == (0, 3)
    for key in ([], [[]]):
        assert x[key].shape == values[key].shape
