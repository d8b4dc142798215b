"""Kernels that read and write float16 tiles themselves (the ``f16_*`` kernels of
``ops_cpu.bf16_kernels`` and their CUDA twins under the simulator): the conversions in
registers are NumPy's bit for bit (every float16 widened; float32 ties, subnormals, overflow,
NaN payloads narrowed), the kernels equal the float32 scratch path they replace, predicates
of bits (float16 and bfloat16) are NumPy's of the values, and the tiled ops on float16 run
them with no scratch tile."""

import numba
import numpy as np
import pytest

import numtile as nt
from numtile import opcodes, ops_cpu
from numtile.ops_cpu.f16_kernels import f16_rounded, f16_value
from numtile.tiletensor.elementwise_core import element_strides, shape_array
from tests.kernels import cuda_launches
from tests.tiletensor.test_bf16_kernels import device as _device
from tests.tiletensor.test_bf16_kernels import host as _host

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ALL_HALVES = np.arange(65536, dtype=np.uint32).astype(np.uint16)
_WIDE = ALL_HALVES.view(np.float16).astype(np.float32).view(np.uint32)
RNG = np.random.default_rng(0)
# float32 patterns around every float16: the half itself, one float32 ulp either side, the ties
# between neighbours (normal and subnormal), signalling NaNs with and without kept payload bits
FLOAT32_PATTERNS = np.concatenate(
    [
        _WIDE,
        _WIDE + 1,
        _WIDE - 1,
        _WIDE + (1 << 12),
        _WIDE + (1 << 12) + 1,
        (np.arange(4096, dtype=np.float32) * np.float32(2.0**-25)).view(np.uint32),
        RNG.integers(0, 2**32, 50000, dtype=np.uint64).astype(np.uint32),
        np.array([0x7F800001, 0xFF802001, 0x7FC00000, 0x477FF000, 0x477FEFFF], np.uint32),
    ]
).view(np.float32)


@numba.njit(error_model="numpy")
def _convert(halves, wide, floats, narrow):
    for i in range(halves.size):
        wide[i] = f16_value(halves[i])
    for i in range(floats.size):
        narrow[i] = f16_rounded(floats[i])


def test_conversions_in_registers_are_numpys_bit_for_bit():
    wide, narrow = np.empty(65536, np.float32), np.empty(FLOAT32_PATTERNS.size, np.uint16)
    _convert(ALL_HALVES, wide, FLOAT32_PATTERNS, narrow)
    np.testing.assert_array_equal(wide.view(np.uint32), _WIDE)
    with np.errstate(over="ignore"):
        expected = FLOAT32_PATTERNS.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(narrow, expected)


def _values(size, seed=0):
    """float16 bits: random values of mixed scales, then every class of special value."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(size) * 8.0 ** rng.integers(-5, 5, size)).astype(np.float16)
    special = [np.nan, -np.inf, np.inf, 0.0, -0.0, 65504, 6e-8, -3e-5, 6.1e-5, 1.0]
    x[: len(special)] = np.array(special, np.float16)[:size]
    return x.view(np.uint16)


def _float32_path(backend, x, code):
    """The scratch path of a unary op: the float32 kernel on widened bits, rounded by NumPy."""
    out = _device(backend, np.zeros(x.size, np.float32))
    backend.kernel("unary")(_device(backend, x.view(np.float16).astype(np.float32)), out, code)
    return _host(out).astype(np.float16).view(np.uint16)


def _wide(bits):
    return bits.view(np.float16).astype(np.float32)


def test_cuda_twins_equal_the_cpu_kernels_and_the_scratch_path(backend):
    if backend.name == "cpu":
        pytest.skip("the CPU kernels run through the tiled ops below (compile time)")
    x = _values(37)
    for name in ("negative", "sqrt", "exp", "gelu_tanh"):
        code, out = opcodes.UNARY_OPS[name], _device(backend, np.zeros(37, np.uint16))
        # one simulated thread: the first warning of a module (exp's overflow) adds
        # ``__warningregistry__`` to its globals, which the simulator iterates in other threads
        with cuda_launches(block=1):
            backend.kernel("f16_unary")(_device(backend, x), out, code)
            expected = _float32_path(backend, x, code)
        np.testing.assert_array_equal(_host(out), expected, err_msg=name)
    # the rounding of any float32 (a float32 operand times 1, stored as float16)
    patterns = np.ascontiguousarray(FLOAT32_PATTERNS[::97])
    one, n = np.ones(1, np.float32), patterns.size
    out = _device(backend, np.zeros(n, np.uint16))
    strides, scalar = element_strides((n,), (n,)), element_strides((1,), (n,))
    code, shape = opcodes.BINARY_OPS["multiply"], shape_array((n,))
    backend.kernel("f16_binary")(_device(backend, patterns), strides, one, scalar, out, shape, code)
    with np.errstate(over="ignore"):
        expected = (patterns * one).astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(_host(out), expected)
    # broadcasting, a comparison and a reduction of bits
    a, b = _values(45, seed=2), _values(9, seed=3)
    shape, a_strides = shape_array((5, 9)), element_strides((5, 9), (5, 9))
    b_strides, wide_a, wide_b = element_strides((1, 9), (5, 9)), _wide(a).reshape(5, 9), _wide(b)
    for family, name, dtype in (("binary", "divide", np.uint16), ("compare", "less", bool)):
        code = (opcodes.BINARY_OPS if family == "binary" else opcodes.COMPARE_OPS)[name]
        out, a_device, b_device = (_device(backend, t) for t in (np.zeros(45, dtype), a, b))
        backend.kernel(f"f16_{family}")(a_device, a_strides, b_device, b_strides, out, shape, code)
        wide = getattr(np, name)(wide_a, wide_b).reshape(-1)
        expected = wide if dtype is bool else wide.astype(np.float16).view(np.uint16)
        np.testing.assert_array_equal(_host(out), expected, err_msg=name)
    finite, code = a[10:40], opcodes.REDUCE_OPS["sum"]
    out = _device(backend, np.full(3, 0.5, np.float32))
    backend.kernel("f16_reduce_accumulate")(_device(backend, finite), out, 3, 10, 1, code)
    exact = _wide(finite).astype(np.float64).reshape(3, 10).sum(1) + 0.5  # float64: exact
    np.testing.assert_array_equal(_host(out), exact.astype(np.float32))


def test_cuda_predicates_of_bits_are_those_of_the_values(backend):
    if backend.name == "cpu":  # (the tiled ops below and test_bfloat16_ops.py run the CPU's)
        pytest.skip("compile time")
    import ml_dtypes

    patterns = np.ascontiguousarray(ALL_HALVES[::89])  # every class: NaNs, infinities, zeros
    patterns[:6] = [0x7C00, 0xFC00, 0x7C01, 0xFF80, 0x8000, 0x7F80]
    for dtype in (np.float16, ml_dtypes.bfloat16):
        values = patterns.view(dtype).astype(np.float32)
        prefix = "f16" if dtype == np.float16 else "bf16"
        for name, code in opcodes.PREDICATE_OPS.items():
            out = _device(backend, np.zeros(patterns.size, bool))
            backend.kernel(f"{prefix}_predicate")(_device(backend, patterns), out, code)
            expected = getattr(np, name)(values)
            np.testing.assert_array_equal(_host(out), expected, err_msg=f"{prefix} {name}")


@pytest.fixture
def no_widening(monkeypatch):
    """Make the float32 scratch path fail: a task that widens a float16 tile raises."""

    def refuse(*args):
        raise AssertionError("a float16 tile was widened to a float32 scratch tile")

    monkeypatch.setattr(ops_cpu, "f16_widen", refuse)


def _same(result, expected, name):
    """Equal bits, NaNs aside (their sign is the hardware's); NaN where NumPy has NaN."""
    got, expected = result.reshape(-1), expected.reshape(-1)
    number = ~np.isnan(expected)
    bits = got.view(np.uint16)[number], expected.view(np.uint16)[number]
    np.testing.assert_array_equal(*bits, err_msg=name)
    np.testing.assert_array_equal(np.isnan(got), ~number, err_msg=name)


def test_tiled_ops_read_float16_tiles_without_scratch(no_widening):
    # the ops of test_float16.py's (exp, x * x + 1, sum), whose kernels CI compiles anyway
    a, b = _values(70).view(np.float16).reshape(7, 10), _values(10, seed=4).view(np.float16)
    x, y = nt.from_numpy(a, tile_shape=(4, 4)), nt.from_numpy(b[None], tile_shape=(1, 3))
    wide_a, wide_b = a.astype(np.float32), b[None].astype(np.float32)
    exp = np.zeros(70, np.float32)
    ops_cpu.unary.kernel(wide_a.reshape(-1), exp, opcodes.UNARY_OPS["exp"])  # ours, not VML
    _same(nt.exp(x).to_numpy(), exp.astype(np.float16), "exp")
    _same((x * y).to_numpy(), (wide_a * wide_b).astype(np.float16), "x * y")
    _same((x + 1).to_numpy(), (wide_a + np.float32(1)).astype(np.float16), "x + 1")
    np.testing.assert_array_equal(nt.isfinite(x).to_numpy(), np.isfinite(a))
    a.view(np.uint16)[0, 0] = 0x7C01  # a signalling NaN: moved, never converted
    target, mask = nt.from_numpy(a, tile_shape=(4, 4)), wide_a > 0
    target[nt.from_numpy(mask, tile_shape=(4, 4))] = 2.5
    expected = a.copy()
    expected[mask] = 2.5
    np.testing.assert_array_equal(target.to_numpy().view(np.uint16), expected.view(np.uint16))
    finite = nt.from_numpy(a[:, 3:], tile_shape=(3, 4))  # no NaN or infinity in these columns
    exact = a[:, 3:].astype(np.float64)
    for axis in (0, None):
        total = nt.sum(finite, axis=axis).to_numpy()
        _same(total, exact.sum(axis).astype(np.float32).astype(np.float16), f"sum {axis}")


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_argsort_keys_are_the_bits_of_16_bit_floats(monkeypatch, name):
    """Sorted with indices by monotone keys of their bits (no float32 copies): stable, -0.0
    tying with +0.0 and NaNs last (first when descending), as a stable sort of the widened
    values orders them."""
    import ml_dtypes

    dtype = np.dtype(np.float16 if name == "float16" else ml_dtypes.bfloat16)
    a = (RNG.standard_normal((3, 150)) * 3).astype(dtype)
    a[:, :4] = a[:, 4:8]  # ties
    nan, negative_nan = (0x7C01, 0xFE00) if name == "float16" else (0x7F81, 0xFFC0)
    a.view(np.uint16)[0, :6] = [nan, 0x8000, 0x0000, negative_nan, 0x8000, 0x0000]
    x, wide = nt.from_numpy(a, tile_shape=(2, 64)), a.astype(np.float32)
    for descending in (False, True):
        key = np.where(np.isnan(wide), -np.inf, -wide) if descending else wide
        order = np.argsort(key, axis=1, kind="stable")
        with monkeypatch.context() as patch:  # the scratch path would fail
            patch.setattr(ops_cpu, "f16_widen", None)
            patch.setattr(ops_cpu, "bf16_widen", None)
            indices = nt.argsort(x, axis=1, descending=descending).to_numpy()
        np.testing.assert_array_equal(indices, order)
        # values alone go through float32 (NumPy's SIMD sort; bfloat16 NaNs come back quiet)
        values = nt.sort(x, axis=1, descending=descending).to_numpy()
        _same(values, np.take_along_axis(a, order, 1), f"sort {descending}")


def test_cuda_sort_keys_of_16_bit_floats(backend):
    if backend.name == "cpu":
        pytest.skip("the tiled sorts above run the CPU's")
    import ml_dtypes

    for dtype, kind in (
        (np.float16, opcodes.SORT_FLOAT),
        (ml_dtypes.bfloat16, opcodes.SORT_BFLOAT16),
    ):
        a = (RNG.standard_normal((2, 24)) * 3).astype(dtype)
        a.view(np.uint16)[0, :4] = [
            0x7F81 if kind == opcodes.SORT_BFLOAT16 else 0x7C01,
            0x8000,
            0x0000,
            0xFFC0,
        ]
        a[1, :4] = [np.inf, -np.inf, np.nan, 0.0]
        values, indices = (
            _device(backend, np.zeros((2, 24), np.uint16)),
            _device(backend, np.zeros((2, 24), np.int64)),
        )
        backend.kernel("sort_rows")(
            _device(backend, a.view(np.uint16)), values, indices, 0, kind, False
        )
        order = np.argsort(a.astype(np.float32), axis=1, kind="stable")
        np.testing.assert_array_equal(_host(indices), order, err_msg=str(dtype))
        np.testing.assert_array_equal(
            _host(values), np.take_along_axis(a, order, 1).view(np.uint16)
        )
