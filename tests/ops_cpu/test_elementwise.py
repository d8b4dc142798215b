"""The elementwise kernels (numtile.ops_cpu.elementwise, and its CUDA twin under the simulator)
against NumPy references.

Every body parametrized over ``backend`` runs on both; on cuda each call is also checked
against the CPU twin. CUDA-only behaviour (special values against the CPU, host scalar
operands, streams, compilation) is tested in tests/ops_cuda/test_elementwise.py.
"""

import numba
import numpy as np
import pytest
from llvmlite import binding as llvm

from numtile import opcodes, ops_cpu
from tests import reference
from tests.kernels import Host, binary_operands, run_broadcast

# the CUDA simulator runs the kernels with NumPy scalars: x / 0 warns there as NumPy does
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FLOAT_DTYPES = [np.float32, np.float64]
# float32 kernels compute in float32 (a few ulp from the float64 reference); float64 kernels
# call libm where NumPy uses its own SIMD functions, which differ in the last ulp or two.
TOLERANCE = {
    np.float32: {"rtol": 2e-6, "atol": 1e-6},
    np.float64: {"rtol": 1e-12, "atol": 1e-14},
}
POSITIVE_DOMAIN = {"log", "sqrt", "reciprocal", "log1p"}
SIZE = 37  # not a multiple of the CUDA test block (8), more than the simulator's 16 threads

# (a shape, b shape): equal shapes, scalars and size-1 operands on either side, broadcast axes
# in a, in b, in both, inner extent 1, an empty result, and ranks up to 4.
BROADCAST_CASES = [
    ((), ()),
    ((SIZE,), (SIZE,)),
    ((SIZE,), ()),
    ((), (SIZE,)),
    ((SIZE,), (1,)),
    ((1,), (SIZE,)),
    ((3, 13), (13,)),
    ((3, 1), (1, 13)),
    ((4, 1), (4, 1)),
    ((2, 1, 9), (1, 3, 1)),
    ((2, 3, 4, 5), (2, 1, 4, 1)),
    ((1, 3, 1, 5), (2, 1, 4, 1)),
    ((0, 3), (3,)),
]


def run_unary(backend, x, op, out_dtype=None):
    out = np.full(x.shape, 7, out_dtype or x.dtype)
    backend.run("unary", x.reshape(-1), out.reshape(-1), op)
    return out


def test_reference_tables_cover_every_op():
    assert reference.UNARY.keys() == opcodes.UNARY_OPS.keys()
    assert reference.BINARY.keys() == opcodes.BINARY_OPS.keys()
    assert reference.COMPARE.keys() == opcodes.COMPARE_OPS.keys()
    for table in (
        opcodes.UNARY_OPS,
        opcodes.UNARY_BACKWARD_OPS,
        opcodes.BINARY_OPS,
        opcodes.COMPARE_OPS,
    ):
        assert sorted(table.values()) == list(range(len(table)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", list(reference.UNARY))
def test_unary_matches_numpy(backend, name, dtype):
    rng = np.random.default_rng(0)
    low = 0.05 if name in POSITIVE_DOMAIN else -4.0
    x = rng.uniform(low, 4.0, size=(3, 13)).astype(dtype)
    x[0, :3] = [0.5, 1.5, 2.0]
    if name not in POSITIVE_DOMAIN:
        x[1, :4] = [-0.5, -2.5, 0.0, -1.0]
    out = run_unary(backend, x, opcodes.UNARY_OPS[name])
    expected = reference.UNARY[name](x.astype(np.float64))
    np.testing.assert_allclose(out, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("name", ["negative", "abs", "square", "sign", "relu", "floor", "ceil"])
def test_unary_int64_matches_numpy(backend, name):
    x = np.arange(-18, 19, dtype=np.int64)
    x[0] = np.iinfo(np.int64).min
    if name not in ("floor", "ceil"):  # through float64, INT64_MAX would round out of range
        x[-1] = np.iinfo(np.int64).max
    out = run_unary(backend, x, opcodes.UNARY_OPS[name])
    np.testing.assert_array_equal(out, reference.UNARY[name](x))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_unary_special_values(backend, dtype):
    # Large magnitudes: the stable sigmoid never forms exp(+1000) (inf / inf would be NaN).
    x = np.array([-1000.0, -60.0, 60.0, 1000.0, np.nan, -0.0], dtype)
    out = run_unary(backend, x, opcodes.UNARY_OPS["sigmoid"])
    np.testing.assert_array_equal(out[[0, 2, 3]], [0.0, 1.0, 1.0])
    np.testing.assert_allclose(out[1], np.exp(-60.0), rtol=1e-5)
    assert np.isnan(out[4])
    out = run_unary(backend, x, opcodes.UNARY_OPS["silu"])
    np.testing.assert_array_equal(out[[0, 2, 3]], [-0.0, 60.0, 1000.0])
    out = run_unary(backend, x, opcodes.UNARY_OPS["relu"])
    assert np.isnan(out[4]) and out[0] == 0 and out[3] == 1000
    out = run_unary(backend, x, opcodes.UNARY_OPS["sign"])
    np.testing.assert_array_equal(out, np.sign(x))


def test_unary_unknown_op_raises():
    x = np.ones(3)
    with pytest.raises(ValueError, match="unknown op"):
        ops_cpu.unary(x, np.empty_like(x), len(opcodes.UNARY_OPS))


@pytest.mark.parametrize("name", list(opcodes.UNARY_BACKWARD_OPS))
def test_unary_backward_matches_finite_differences(backend, name):
    rng = np.random.default_rng(1)
    low = 0.2 if name in POSITIVE_DOMAIN else -3.0
    x = rng.uniform(low, 3.0, size=40)
    x[np.abs(x) < 1e-3] = 0.5  # keep away from relu's kink
    grad_out = rng.normal(size=x.shape)
    grad_in = np.empty_like(x)
    backend.run("unary_backward", x, grad_out, grad_in, opcodes.UNARY_BACKWARD_OPS[name])
    forward = reference.UNARY[name]
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
    ops_cpu.unary_backward(x, grad_out, grad_in, op)
    expected = np.empty(x.shape)
    ops_cpu.unary_backward(x.astype(np.float64), grad_out.astype(np.float64), expected, op)
    np.testing.assert_allclose(grad_in, expected, rtol=1e-5, atol=1e-6)


# NumPy's int64 divide returns float64, while binary keeps one dtype: not tested for int64.
# the functions of BINARY_MATH (atan2, hypot...) take floats, through their own kernel
BINARY_MATH = {opcodes.op_name(opcodes.BINARY_OPS, code) for code in opcodes.BINARY_MATH}
BINARY_CASES = [
    (name, dtype)
    for name in reference.BINARY
    for dtype in (np.float32, np.float64, np.int64)
    if not ((name == "divide" or name in BINARY_MATH) and dtype == np.int64)
]


def binary_kernel(name: str) -> str:
    return "binary_math" if name in BINARY_MATH else "binary"


@pytest.mark.parametrize("shapes", BROADCAST_CASES, ids=str)
@pytest.mark.parametrize(("name", "dtype"), BINARY_CASES)
def test_binary_matches_numpy(backend, name, dtype, shapes):
    a, b = binary_operands(name, dtype, *shapes, np.random.default_rng(3))
    out = run_broadcast(backend, binary_kernel(name), a, b, opcodes.BINARY_OPS[name], dtype)
    with np.errstate(all="ignore"):
        expected = reference.BINARY[name](a, b)
    if dtype == np.int64:
        np.testing.assert_array_equal(out, expected)
    else:
        np.testing.assert_allclose(out, expected, equal_nan=True, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ["floor_divide", "remainder", "divide", "maximum", "minimum"])
def test_binary_float_edge_cases_match_numpy(backend, name, dtype):
    inf, nan = np.inf, np.nan
    a = np.array([1.0, -1.0, 7.5, -7.5, 0.0, -0.0, 5.0, -5.0, inf, nan, 1.0, -3.0, 2.0], dtype)
    b = np.array([0.1, 0.1, -2.0, 2.0, 3.0, -3.0, inf, inf, 2.0, 1.0, 0.0, 0.0, nan], dtype)
    out = run_broadcast(backend, "binary", a, b, opcodes.BINARY_OPS[name], dtype, exact=True)
    with np.errstate(all="ignore"):
        expected = reference.BINARY[name](a, b)
    np.testing.assert_array_equal(out, expected)
    number = ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(out[number]), np.signbit(expected[number]))


@pytest.mark.parametrize(
    "name", ["add", "subtract", "multiply", "maximum", "minimum", "floor_divide", "remainder"]
)
def test_binary_int64_edge_cases_match_numpy(backend, name):
    smallest, largest = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    a = np.array([7, -7, 7, -7, 5, smallest, smallest, 0, largest, 3, -3, 0, -5], np.int64)
    b = np.array([2, 2, -2, -2, 0, -1, 1, -3, -1, 0, 7, 0, -7], np.int64)
    out = run_broadcast(backend, "binary", a, b, opcodes.BINARY_OPS[name], np.int64)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out, reference.BINARY[name](a, b))


def test_binary_full_size_operand_with_permuted_strides(backend):
    # a has as many elements as out but is a transposed view: the flat fast path must not run.
    base = np.arange(15.0).reshape(5, 3)
    b = np.linspace(0.0, 1.0, 15).reshape(3, 5)
    out = np.empty((3, 5))
    backend.run(
        "binary",
        base.reshape(-1),
        Host(np.array([1, 3], np.int64)),
        b.reshape(-1),
        Host(np.array([5, 1], np.int64)),
        out.reshape(-1),
        Host(np.array([3, 5], np.int64)),
        opcodes.BINARY_OPS["subtract"],
    )
    np.testing.assert_array_equal(out, base.T - b)


@pytest.mark.parametrize("shapes", BROADCAST_CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
@pytest.mark.parametrize("name", list(reference.COMPARE))
def test_compare_matches_numpy(backend, name, dtype, shapes):
    rng = np.random.default_rng(4)
    # Few distinct values, so that equal elements occur; zeros matter for the logical ops.
    a = rng.integers(-2, 3, shapes[0]).astype(dtype)
    b = rng.integers(-2, 3, shapes[1]).astype(dtype)
    if np.dtype(dtype).kind == "f" and a.size > 1:
        a.reshape(-1)[1] = np.nan
        b.reshape(-1)[-1] = -0.0
    out = run_broadcast(backend, "compare", a, b, opcodes.COMPARE_OPS[name], np.bool_)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, reference.COMPARE[name](a, b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_axpy(backend, dtype):
    rng = np.random.default_rng(5)
    x, y = binary_operands("add", dtype, (SIZE,), (SIZE,), rng)
    typed = np.dtype(dtype).type
    for alpha in (-2.5, 3, np.float32(0.75)):
        expected = y + typed(alpha) * x
        backend.run("axpy", alpha, x, y)
        if dtype == np.int64:
            np.testing.assert_array_equal(y, expected)
        else:
            np.testing.assert_allclose(y, expected, **TOLERANCE[dtype])
        assert y.dtype == dtype


@pytest.mark.skipif(
    not llvm.get_host_cpu_features().get("avx512f", False)  # flatten() also lists "-avx512f"
    or numba.config.CPU_NAME is not None,
    reason="needs a host CPU with AVX-512 (and no NUMBA_CPU_NAME override)",
)
def test_element_wise_loops_use_512_bit_vectors_on_avx512():
    # LLVM prefers 256-bit vectors on these CPUs unless a kernel asks for more (wide_vectors)
    cached = ops_cpu.unary._kernel_of(opcodes.UNARY_OPS["exp"])
    kernel = numba.njit(nogil=True, error_model="numpy")(cached.py_func)  # compiled, not cached
    x = np.linspace(-3.0, 3.0, 64, dtype=np.float32)
    out = np.empty_like(x)
    kernel(x, out)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)
    assert "zmm" in kernel.inspect_asm(kernel.signatures[0])
