"""The reduction kernels (numtile.ops_cpu.reduction, and its CUDA twin under the simulator)
against NumPy references, the reductions of complex moduli into real tiles included.

Every body runs on the CPU and on CUDA three times: with the launcher's choice of kernel, then
forcing each of its two layouts (a thread per output, a block per output); on cuda each call
is also checked against the CPU twin. CUDA-only behaviour is tested in
tests/ops_cuda/test_reduction.py.
"""

import numpy as np
import pytest

from numtile import opcodes
from numtile.ops_cuda import reduction
from tests import reference
from tests.kernels import BACKENDS, CPU, reduce_operands

# the simulator runs the kernels with NumPy scalars, which warn where int64 wraps or inf - inf
pytestmark = [
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
    pytest.mark.usefixtures("quick_thread_switches"),
]

FLOAT_DTYPES = [np.float32, np.float64]
# Results are accumulated in float64 and rounded once to the output dtype.
TOLERANCE = {
    np.float32: {"rtol": 2e-6, "atol": 1e-6},
    np.float64: {"rtol": 1e-12, "atol": 1e-13},
}

# (pre, n, post): innermost axis (post == 1), outermost (pre == 1), middle, n == 1, more output
# columns than the simulator's 16 threads, and axes long enough for a CUDA block per output by
# default.
SHAPES = [(1, 7, 1), (3, 5, 1), (1, 6, 4), (2, 3, 5), (2, 1, 3), (19, 2, 1), (2, 3, 11)]
SHAPES += [(3, 40, 1), (1, 37, 3)]
# a post wider than the CPU kernel's column block (too slow for the simulator)
WIDE = (2, 7, 2050)


@pytest.fixture(params=["cpu", "cuda", "cuda-columns", "cuda-rows"])
def backend(request, monkeypatch):
    """The CPU kernels, then the CUDA ones with the launcher's choice of layout, then forcing
    each layout."""
    name, _, layout = request.param.partition("-")
    if layout:
        monkeypatch.setattr(reduction, "_by_rows", lambda pre, n, post: layout == "rows")
    return BACKENDS[name]


def test_reference_table_covers_every_op():
    assert reference.REDUCE.keys() == opcodes.REDUCE_OPS.keys()
    assert sorted(opcodes.REDUCE_OPS.values()) == list(range(len(opcodes.REDUCE_OPS)))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("name", list(reference.REDUCE))
def test_reduce_accumulate_matches_numpy(backend, name, dtype, shape):
    check_reduce_accumulate(backend, name, dtype, shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("name", list(reference.REDUCE))
def test_reduce_accumulate_wider_than_a_column_block_matches_numpy(name, dtype):
    check_reduce_accumulate(CPU, name, dtype, WIDE)


def check_reduce_accumulate(backend, name, dtype, shape):
    x, out = reduce_operands(name, dtype, shape, np.random.default_rng(0))
    reduce, combine = reference.REDUCE[name]
    wide = np.int64 if dtype == np.int64 else np.float64
    with np.errstate(over="ignore"):
        expected = combine(out.astype(wide), reduce(x.astype(wide)))
    backend.run(
        "reduce_accumulate", x.reshape(-1), out.reshape(-1), *shape, opcodes.REDUCE_OPS[name]
    )
    assert out.dtype == dtype
    if dtype == np.int64:
        np.testing.assert_array_equal(out, expected)
    else:
        np.testing.assert_allclose(out, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("shape", [(3, 37, 1), (2, 11, 3), (1, 6, 4)], ids=str)
def test_max_and_min_of_bools_are_any_and_all(backend, shape):
    # (the CPU kernel keeps the partials of bools in uint8: True must stay True)
    x = np.random.default_rng(1).random(shape) < 0.2
    x[0, :, 0] = True  # a column all True, for all
    for name, op, reference_fn, start in (
        ("max", opcodes.MAX, np.any, False),
        ("min", opcodes.MIN, np.all, True),
    ):
        out = np.full((shape[0], shape[2]), start)
        backend.run("reduce_accumulate", x.reshape(-1), out.reshape(-1), *shape, op)
        np.testing.assert_array_equal(out, reference_fn(x, axis=1), err_msg=name)


@pytest.mark.parametrize("shape", [(3, 4, 1), (2, 4, 3)], ids=str)
def test_reduce_accumulate_accumulates_across_calls(backend, shape):
    x = np.arange(np.prod(shape), dtype=np.float64)
    out = np.full((shape[0], shape[2]), 10.0)
    for _ in range(3):
        backend.run("reduce_accumulate", x, out.reshape(-1), *shape, opcodes.REDUCE_OPS["sum"])
    np.testing.assert_allclose(out, 10.0 + 3 * x.reshape(shape).sum(axis=1))


def test_reduce_accumulate_empty_axis_leaves_out_unchanged(backend):
    out = np.array([1.5, -2.0, 4.0, 0.5, -0.0, 7.0])
    for op in opcodes.REDUCE_OPS.values():
        backend.run("reduce_accumulate", np.empty(0), out[:2], 2, 0, 1, op)
        backend.run("reduce_accumulate", np.empty(0), out, 2, 0, 3, op)
    np.testing.assert_array_equal(out, [1.5, -2.0, 4.0, 0.5, -0.0, 7.0])


@pytest.mark.parametrize("post", [1, 2])
def test_reduce_accumulate_float32_sums_in_float64(backend, post):
    # 1 + 40 * 2**-24 is exact in float32, but a float32 running sum stays at 1.
    x = np.full((41, post), 2.0**-24, np.float32)
    x[0] = 1.0
    out = np.zeros(post, np.float32)
    backend.run("reduce_accumulate", x.reshape(-1), out, 1, 41, post, opcodes.SUM, exact=True)
    np.testing.assert_array_equal(out, np.float32(1 + 40 * 2.0**-24))


@pytest.mark.parametrize("post", [1, 3])
@pytest.mark.parametrize("name", ["max", "min", "maxabs", "sum", "prod"])
def test_reduce_accumulate_propagates_nan(backend, name, post):
    x = np.arange(5 * post, dtype=np.float64).reshape(5, post) - 2
    x[2, 0] = np.nan
    if post > 1:  # and keeps the sign of zeros as the CPU does
        x[:, 1] = [-0.0, 0.0, -0.0, -0.0, 0.0]
        x[:, 2] = -0.0
    out = np.full(post, -0.0)
    backend.run(
        "reduce_accumulate", x.reshape(-1), out, 1, 5, post, opcodes.REDUCE_OPS[name], exact=True
    )
    assert np.isnan(out[0])
    assert not np.isnan(out[1:]).any()


def _special_slices(n):
    """Slices of length n for max and min: a NaN at each position (the first and last rows, the
    rows after the four bands or quarters), all NaN, NaN beside inf, zeros of both signs in
    both orders, zeros beside negatives and positives, and infinities."""
    rng = np.random.default_rng(5)
    slices = []
    for k in range(n):
        values = rng.normal(size=n)
        values[k] = np.nan
        slices.append(values)
    zeros = np.zeros(n)
    zeros[::2] = -0.0  # -0.0 first
    slices += [np.full(n, np.nan), np.where(np.arange(n) % 2, np.inf, np.nan), zeros, -zeros]
    slices += [np.full(n, -0.0), np.full(n, 0.0), np.full(n, np.inf), np.full(n, -np.inf)]
    negatives, positives = -np.abs(rng.normal(size=n)), np.abs(rng.normal(size=n))
    negatives[n // 2], positives[n // 2] = -0.0, 0.0
    ends = rng.normal(size=n)
    ends[0], ends[-1] = np.inf, -np.inf
    return slices + [negatives, positives, -negatives, -positives, ends]


def _with_special_slices(pre, n, post, dtype):
    """x of shape (pre, n, post) whose slices x[p, :, q] hold ``_special_slices`` spread over
    every p and q (and both column blocks of a wide x), random values elsewhere."""
    x = np.random.default_rng(6).normal(size=(pre * post, n))
    slices = _special_slices(n)
    assert len(slices) <= pre * post
    for at, values in zip(np.linspace(0, pre * post - 1, len(slices)).astype(int), slices):
        x[at] = values
    return x.reshape(pre, post, n).transpose(0, 2, 1).astype(dtype)


@pytest.mark.parametrize("layout", ["rows", "rows-alone", "columns", "columns-wide"])
@pytest.mark.parametrize("n", [3, 11, 37])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_propagate_nan_and_order_zeros(name, dtype, n, layout):
    # NaN anywhere in a slice gives NaN (as NumPy); +0.0 beats -0.0 for max and -0.0 wins for
    # min (as llvm.maximum and llvm.minimum order them), whichever loop reads the slice: the
    # rows four at a time and their leftovers, a row alone as its quarters, the columns
    # narrower or wider than a column block.
    count = len(_special_slices(n))
    pre, post = {"rows": (count + 3, 1), "rows-alone": (count, 1)}.get(layout, (1, count))
    if layout == "columns-wide":
        pre, post = 2, 2050
    x = _with_special_slices(pre, n, post, dtype)
    out = np.full((pre, post), -np.inf if name == "max" else np.inf, dtype)
    code = opcodes.REDUCE_OPS[name]
    if layout == "rows-alone":
        for p in range(pre):
            CPU.run("reduce_accumulate", x[p].reshape(-1), out[p], 1, n, 1, code)
    else:
        CPU.run("reduce_accumulate", x.reshape(-1), out.reshape(-1), pre, n, post, code)
    expected = (np.max if name == "max" else np.min)(x, axis=1)
    np.testing.assert_array_equal(out, expected)
    zero, negative = x == 0, np.signbit(x)
    if name == "max":  # a zero maximum is -0.0 only where no +0.0 is in the slice
        negative_zero = ~np.any(zero & ~negative, axis=1)
    else:
        negative_zero = np.any(zero & negative, axis=1)
    zeros = expected == 0
    assert zeros.sum() >= 4  # the zero slices are there
    np.testing.assert_array_equal(np.signbit(out[zeros]), negative_zero[zeros])


# --- the moduli of complex tiles (the vector norms) ------------------------------------------

REAL_OF = {np.complex64: np.float32, np.complex128: np.float64}
MODULUS_REFERENCE = {  # (reduction over the middle axis of |x|, combination with out)
    "sumsq": (lambda m: (m * m).sum(axis=1), np.add),
    "sumabs": (lambda m: m.sum(axis=1), np.add),
    "maxabs": (lambda m: m.max(axis=1), np.maximum),
}


def _modulus_reduce(backend, x, out, shape, name):
    code = opcodes.MODULUS_REDUCE_OPS[name]
    backend.run("modulus_reduce_accumulate", x.reshape(-1), out.reshape(-1), *shape, code)


@pytest.mark.parametrize(
    "shape", [(1, 7, 1), (2, 3, 5), (19, 2, 1), (3, 40, 1), (1, 37, 3)], ids=str
)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name", list(opcodes.MODULUS_REDUCE_OPS))
def test_modulus_reduce_accumulate_matches_numpy(backend, name, dtype, shape):
    rng = np.random.default_rng(4)
    x = (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    x.reshape(-1)[::4] = x.reshape(-1)[::4].real  # purely real entries too
    out = rng.uniform(0, 2, size=(shape[0], shape[2])).astype(REAL_OF[dtype])
    reduce, combine = MODULUS_REFERENCE[name]
    expected = combine(out.astype(np.float64), reduce(np.abs(x.astype(np.complex128))))
    _modulus_reduce(backend, x, out, shape, name)
    assert out.dtype == REAL_OF[dtype]
    np.testing.assert_allclose(out, expected, **TOLERANCE[REAL_OF[dtype]])


@pytest.mark.parametrize("name", list(opcodes.MODULUS_REDUCE_OPS))
def test_modulus_reduce_accumulate_special_values(backend, name):
    # per row: |z| inf beside a NaN part (annex G), NaN, under- and overflowing squares
    special = [complex(np.inf, np.nan), complex(np.nan, 0), 1e-300 + 1e-300j, 1e300 - 1e300j]
    x = np.array([[z, 3 + 4j] for z in special + [-2e-170 + 0j]])
    out = np.zeros(len(x))
    reduce, combine = MODULUS_REFERENCE[name]
    with np.errstate(over="ignore", under="ignore"):
        expected = combine(out, reduce(np.abs(x)[:, :, None])[:, 0])
    _modulus_reduce(backend, x, out, (len(x), 2, 1), name)
    np.testing.assert_allclose(out, expected, rtol=1e-15, atol=0)
    assert out[0] == np.inf and np.isnan(out[1])


def test_modulus_reduce_accumulate_unknown_op_raises(backend):
    with pytest.raises(ValueError, match="unknown op code"):
        backend.run("modulus_reduce_accumulate", np.ones(3, complex), np.zeros(1), 1, 3, 1, 0)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_matches_numpy(backend, dtype, shape):
    check_softmax(backend, dtype, shape)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_wider_than_a_column_block_matches_numpy(dtype):
    check_softmax(CPU, dtype, WIDE)


def check_softmax(backend, dtype, shape):
    x = np.random.default_rng(1).normal(scale=3.0, size=shape).astype(dtype)
    out = np.full_like(x, np.nan)
    backend.run("softmax", x.reshape(-1), out.reshape(-1), *shape)
    expected = reference.softmax(x.astype(np.float64), axis=1)
    np.testing.assert_allclose(out, expected, **TOLERANCE[dtype])
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("post", [1, 2])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_is_stable_for_large_inputs(backend, dtype, post):
    # The first element is not the maximum: shifting by it would overflow exp.
    x = np.repeat(np.array([-1000.0, 999.0, 1000.0, 1000.0], dtype), post).reshape(1, 4, post)
    out = np.empty_like(x)
    backend.run("softmax", x.reshape(-1), out.reshape(-1), 1, 4, post)
    expected = reference.softmax(np.array([-2000.0, -1.0, 0.0, 0.0]), axis=0)
    np.testing.assert_allclose(out[0], np.repeat(expected[:, None], post, axis=1), rtol=1e-6)


@pytest.mark.parametrize("shape", [(2, 6, 1), (1, 5, 3), (2, 4, 3), (19, 3, 1)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_backward_matches_analytic(backend, dtype, shape):
    rng = np.random.default_rng(2)
    y = reference.softmax(rng.normal(size=shape), axis=1).astype(dtype)
    grad_out = rng.normal(size=shape).astype(dtype)
    grad_in = np.full_like(y, np.nan)
    backend.run(
        "softmax_backward", y.reshape(-1), grad_out.reshape(-1), grad_in.reshape(-1), *shape
    )
    y64, grad64 = y.astype(np.float64), grad_out.astype(np.float64)
    expected = reference.softmax_backward(y64, grad64, axis=1)
    np.testing.assert_allclose(grad_in, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("shape", [(2, 6, 1), (2, 4, 3)], ids=str)
def test_softmax_backward_matches_finite_differences(backend, shape):
    # d/dt of loss(x + t * direction) at t = 0, where loss = sum(grad_out * softmax(x)).
    rng = np.random.default_rng(3)
    x, grad_out, direction = (rng.normal(size=shape) for _ in range(3))
    y = reference.softmax(x, axis=1)
    grad_in = np.empty_like(x)
    backend.run(
        "softmax_backward", y.reshape(-1), grad_out.reshape(-1), grad_in.reshape(-1), *shape
    )

    def loss(t):
        return np.sum(grad_out * reference.softmax(x + t * direction, axis=1))

    step = 1e-6
    slope = (loss(step) - loss(-step)) / (2 * step)
    np.testing.assert_allclose(np.sum(grad_in * direction), slope, rtol=1e-6)
