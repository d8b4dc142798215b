"""Kernels that read and write bfloat16 tiles themselves (``ops_cpu.bf16_kernels`` and their
CUDA twins under the simulator): bit for bit the float32 kernel of the same backend run on
widened copies and rounded once (the float32 scratch path they replace), and ml_dtypes where
float32 rounds correctly; the tiled ops on bfloat16 run them with no scratch tile."""

import ml_dtypes
import numpy as np
import pytest

import numtile as nt
from numtile import opcodes, ops_cpu
from numtile.tiletensor.codelets import elementwise, reduction
from numtile.tiletensor.elementwise_core import element_strides, shape_array

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
# every class of input: NaNs of both signs, infinities, signed zeros, the largest and smallest
# normal, a subnormal, ties of the rounding
SPECIAL = np.array(
    [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 3.3895314e38, 1.1754944e-38, 9.2e-41, 1.0],
    np.float32,
)


def values(shape, seed=0):
    """bfloat16 values of ``shape``: random ones of mixed scales and every special value."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 4.0 ** rng.integers(-3, 4, shape)).astype(BFLOAT16)
    x.reshape(-1)[: SPECIAL.size] = SPECIAL.astype(BFLOAT16)[: x.size]
    return x


def bits(array):
    return np.ascontiguousarray(array).reshape(-1).view(np.uint16)


def device(backend, array):
    """``array`` where ``backend``'s kernels read it (a device copy on cuda)."""
    if backend.name == "cpu":
        return array
    from numba import cuda

    return cuda.to_device(array)


def host(array):
    return array if isinstance(array, np.ndarray) else array.copy_to_host()


def unary_through_float32(backend, x, code):
    """What the float32 scratch path computes on ``backend``: the float32 unary kernel on the
    widened values, its result rounded to bfloat16 (as bits)."""
    out = device(backend, np.zeros(x.size, np.float32))
    backend.kernel("unary")(device(backend, x.astype(np.float32)), out, code)
    return bits(host(out).astype(BFLOAT16))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
# (the tiled tests of test_bfloat16_ops.py run every unary op through these kernels on a CPU)
@pytest.mark.parametrize("name", ["sqrt", "exp", "gelu_tanh"])
def test_unary_ops_round_the_float32_result_once(backend, name):
    if backend.name == "cpu" and name != "sqrt":
        pytest.skip("one CPU signature is enough here (compile time)")
    x = values((41,))
    out = device(backend, np.zeros(41, np.uint16))
    backend.kernel("bf16_unary")(device(backend, bits(x)), out, opcodes.UNARY_OPS[name])
    expected = unary_through_float32(backend, x, opcodes.UNARY_OPS[name])
    np.testing.assert_array_equal(host(out), expected)
    if name == "sqrt":  # correctly rounded in float32: ml_dtypes' rounding of NumPy's sqrt
        expected = np.sqrt(x.astype(np.float32)).astype(BFLOAT16)
        number = ~np.isnan(expected)  # (the sign of a NaN is the hardware's)
        np.testing.assert_array_equal(host(out)[number], bits(expected)[number])
        np.testing.assert_array_equal(np.isnan(host(out).view(BFLOAT16)), ~number)


def read_only(values):
    """Strides as the tiled ops pass them (read-only: one signature with theirs)."""
    array = np.array(values, np.int64)
    array.flags.writeable = False
    return array


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_binary_ops_broadcast_with_scalars_and_strides(backend):
    a, b = values((5, 9)), values((1, 9), seed=1)
    shape = shape_array((5, 9))
    a_strides, b_strides = element_strides((5, 9), (5, 9)), element_strides((1, 9), (5, 9))
    for name in ("add", "divide"):
        out = device(backend, np.zeros(45, np.uint16))
        a_bits, b_bits = device(backend, bits(a)), device(backend, bits(b))
        code = opcodes.BINARY_OPS[name]
        backend.kernel("bf16_binary")(a_bits, a_strides, b_bits, b_strides, out, shape, code)
        wide = getattr(np, name)(a.astype(np.float32), b.astype(np.float32))
        np.testing.assert_array_equal(host(out), bits(wide.astype(BFLOAT16)), err_msg=name)
    # a scalar first (a float32 holding a bfloat16) and a transposed operand
    scalar = np.array([np.float32(BFLOAT16.type(0.3))], np.float32)
    out = device(backend, np.zeros(45, np.uint16))
    c = values((9, 5), seed=2)
    transposed = read_only([1, 5])  # the (9, 5) tile c read as (5, 9)
    scalar_strides, code = element_strides((1, 1), (5, 9)), opcodes.BINARY_OPS["subtract"]
    c_bits = device(backend, bits(c))
    backend.kernel("bf16_binary")(scalar, scalar_strides, c_bits, transposed, out, shape, code)
    expected = (scalar[0] - c.T.astype(np.float32)).astype(BFLOAT16)
    np.testing.assert_array_equal(host(out), bits(expected))


def test_comparisons_of_bits_are_those_of_the_values(backend):
    a, b = values((33,)), values((33,), seed=3)
    b[:4] = a[:4]  # equal pairs, NaN < NaN is false
    strides, shape = element_strides((33,), (33,)), shape_array((33,))
    out = device(backend, np.zeros(33, bool))
    a_bits, b_bits = device(backend, bits(a)), device(backend, bits(b))
    code = opcodes.COMPARE_OPS["less"]
    backend.kernel("bf16_compare")(a_bits, strides, b_bits, strides, out, shape, code)
    np.testing.assert_array_equal(host(out), a.astype(np.float32) < b.astype(np.float32))


@pytest.mark.parametrize("plan", [(3, 20, 1), (2, 5, 6)], ids=["inner axis", "middle axis"])
def test_reductions_accumulate_bits_as_the_float32_kernel(backend, plan, quick_thread_switches):
    pre, n, post = plan
    x = values((pre * n * post,))
    x[:10] = x[10:20]  # no NaN or infinity: sums of finite values
    for name in ("sum", "min", "prod"):
        code = opcodes.REDUCE_OPS[name]
        start = np.full(pre * post, 1.0 if name == "prod" else 0.5, np.float32)
        out = device(backend, start.copy())
        backend.kernel("bf16_reduce_accumulate")(device(backend, bits(x)), out, pre, n, post, code)
        expected = device(backend, start.copy())
        wide = device(backend, x.astype(np.float32))
        backend.kernel("reduce_accumulate")(wide, expected, pre, n, post, code)
        if name == "prod":  # float64 products round: the order of a vectorised loop shows
            np.testing.assert_allclose(host(out), host(expected), rtol=2e-7)
        else:  # float64 sums of these bfloat16 values are exact: the same bits in any order
            np.testing.assert_array_equal(host(out).view(np.uint32), host(expected).view(np.uint32))


# --- the tiled ops run them: no float32 scratch, the same bits --------------------------------


@pytest.fixture
def no_widening(monkeypatch):
    """Make the float32 scratch path fail: a task that widens a bfloat16 tile raises."""

    def refuse(*args):
        raise AssertionError("a bfloat16 tile was widened to a float32 scratch tile")

    monkeypatch.setattr(ops_cpu, "bf16_widen", refuse)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_tiled_ops_read_bfloat16_tiles_without_scratch(no_widening):
    a, b = values((7, 10)), values((1, 10), seed=4)
    x, y = nt.from_numpy(a, tile_shape=(4, 4)), nt.from_numpy(b, tile_shape=(1, 3))
    wide_a, wide_b = a.astype(np.float32), b.astype(np.float32)
    checks = {
        "sqrt": (nt.sqrt(x), np.sqrt(wide_a)),
        "x / y": (x / y, wide_a / wide_b),
        "2 - x": (2.0 - x, np.float32(2) - wide_a),
    }
    for name, (tensor, wide) in checks.items():
        expected = wide.astype(BFLOAT16)
        result, number = tensor.to_numpy(), ~np.isnan(expected).reshape(-1)
        np.testing.assert_array_equal(bits(result)[number], bits(expected)[number], err_msg=name)
        np.testing.assert_array_equal(np.isnan(result).reshape(-1), ~number, err_msg=name)
    np.testing.assert_array_equal((x < y).to_numpy(), wide_a < wide_b)
    x += y
    np.testing.assert_array_equal(bits(x.to_numpy()), bits((wide_a + wide_b).astype(BFLOAT16)))
    finite = nt.from_numpy(a[:, 3:], tile_shape=(3, 4))  # no NaN or infinity in these columns
    exact = a[:, 3:].astype(np.float64)
    for axis in (0, 1, None):
        total = nt.sum(finite, axis=axis).to_numpy()
        np.testing.assert_array_equal(
            bits(total), bits(exact.sum(axis).astype(np.float32).astype(BFLOAT16))
        )
    np.testing.assert_array_equal(bits(nt.min(finite, axis=0).to_numpy()), bits(a[:, 3:].min(0)))


def test_where_keeps_the_bit_patterns():
    a = values((6, 5))
    payloads = np.array([0x7F81, 0xFF85, 0x7FC3], np.uint16)  # signalling NaNs, a payload
    bits(a)[:3] = payloads
    b, condition = values((6, 5), seed=5), np.random.default_rng(6).random((6, 5)) < 0.5
    condition.reshape(-1)[:3] = True
    out = nt.where(
        nt.from_numpy(condition, tile_shape=(4, 2)),
        nt.from_numpy(a, tile_shape=(4, 2)),
        nt.from_numpy(b, tile_shape=(4, 2)),
    )
    np.testing.assert_array_equal(bits(out.to_numpy()), bits(np.where(condition, a, b)))


def test_tasks_declare_no_scratch_for_bfloat16_tiles():
    from numtile.runtime import DataHandle

    tile, f16, out = (
        DataHandle((4, 8), BFLOAT16),
        DataHandle((4, 8), np.float16),
        DataHandle((8,), np.float32),
    )
    unary = elementwise.unary["exp"]
    assert unary.scratch(tile, tile) == 0
    assert unary.scratch(f16, f16) == 0  # float16 has kernels of its bits too
    # a task mixing the two formats takes the float32 scratch path
    assert elementwise.binary["add"].scratch(tile, f16, out) == 2 * (tile.nbytes + f16.nbytes)
    reduce = reduction.reduce["sum"]
    assert reduce.scratch(tile, out, None, 1, 4, 8) == 0
    assert reduce.scratch(f16, out, None, 1, 4, 8) == 0
    # reduced axes that are not adjacent are gathered as bits: 2 bytes an element
    assert (
        reduce.scratch(
            DataHandle((2, 3, 4), BFLOAT16), DataHandle((3,), np.float32), (0, 2), 3, 8, 1
        )
        == 2 * 24
    )
