"""ops_cpu.streaming: element-wise kernels whose outputs stream past the caches. The same bits
with the switch on and off (NUMTILE_STREAM_STORES), against NumPy, over dtypes, odd sizes and
outputs starting anywhere in a 64-byte line; which outputs stream (``wanted``); the streamed
kernels really run and really store non-temporally; nt.fuse's streamed kernels."""

import platform

import numba
import numpy as np
import pytest

import numtile as nt
from numtile import opcodes, ops_cpu
from numtile.config import Config
from numtile.ops_cpu import elementwise, fusion, logic, streaming
from numtile.ops_cpu.scalar_math import _negative

DTYPES = (np.float32, np.float64, np.int32, np.int8, np.uint16)
# sizes around the 2 KiB blocks the kernels stream (threshold lowered to 4 KiB below)
SIZES = (1024, 1531, 4099, 10007)
OFFSETS = (0, 1, 5)  # elements between the output's start and a 64-byte boundary (mod 64)
ONE, ZERO = np.ones(1, np.int64), np.zeros(1, np.int64)


@pytest.fixture(autouse=True)
def _small_threshold(monkeypatch):
    """Streaming on, from 4 KiB: small arrays take the streamed kernels."""
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 4096)
    previous = streaming.set_enabled(True)
    yield
    streaming.set_enabled(previous)


def _values(rng, size, dtype):
    if np.dtype(dtype).kind == "f":
        values = rng.standard_normal(size) * 100
        values[::7] = np.inf  # special values go through the same functions
        values[3::11] = np.nan
        values[5::13] = -0.0
        return values.astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), size).astype(dtype)


def _output(size, dtype, offset):
    """An output whose first element lies ``offset`` elements past a 64-byte boundary."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty((size + 64) * itemsize + 64, np.uint8)
    start = -raw.ctypes.data % 64 + offset * itemsize
    out = raw[start : start + size * itemsize].view(dtype)
    out[:] = 77  # stale contents must all be overwritten
    return out


def _both(kernel, size, dtype, offset):
    """kernel(out) with streaming on then off: both outputs, checked bit for bit equal."""
    results = []
    for on in (True, False):
        streaming.set_enabled(on)
        out = _output(size, dtype, offset)
        kernel(out)
        results.append(out)
    streaming.set_enabled(True)
    on, off = results
    np.testing.assert_array_equal(on.view(np.uint8), off.view(np.uint8))
    return on


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("offset", OFFSETS)
def test_unary_binary_where_bit_for_bit(dtype, size, offset):
    """Each loop (the unary map, the binary zip with both, first or second operand whole,
    where) on every dtype, each with every op on float32: the op is a scalar function inlined
    in the same loop, while the loop's head, blocks and tail depend on the element size (each
    op on each dtype compiled 70 kernels: 2 minutes of a CI run)."""
    rng = np.random.default_rng(size + offset)
    a, b = _values(rng, size, dtype), _values(rng, size, dtype)
    condition = rng.random(size) < 0.5
    shape = np.array([size])
    unary = (("negative", -a), ("abs", np.abs(a)), ("square", a * a))
    binary = (("add", np.add), ("multiply", np.multiply), ("maximum", np.maximum))
    if dtype is not np.float32:
        unary, binary = unary[:1], binary[:1]
    with np.errstate(all="ignore"):
        for name, reference in unary:
            code = opcodes.UNARY_OPS[name]
            got = _both(lambda out, c=code: ops_cpu.unary(a, out, c), size, dtype, offset)
            np.testing.assert_array_equal(got, reference)
        for name, function in binary:
            code = opcodes.BINARY_OPS[name]
            got = _both(
                lambda out, c=code: ops_cpu.binary(a, ONE, b, ONE, out, shape, c),
                size,
                dtype,
                offset,
            )
            np.testing.assert_array_equal(got, function(a, b))
            got = _both(  # a scalar second: streamed; first: ordinary stores
                lambda out, c=code: ops_cpu.binary(a, ONE, b[:1], ZERO, out, shape, c),
                size,
                dtype,
                offset,
            )
            np.testing.assert_array_equal(got, function(a, b[0]))
            got = _both(
                lambda out, c=code: ops_cpu.binary(b[:1], ZERO, a, ONE, out, shape, c),
                size,
                dtype,
                offset,
            )
            np.testing.assert_array_equal(got, function(b[0], a))
    got = _both(
        lambda out: ops_cpu.where(condition, ONE, a, ONE, b, ONE, out, shape), size, dtype, offset
    )
    np.testing.assert_array_equal(got, np.where(condition, a, b))


@pytest.mark.parametrize("dtype", (np.float32, np.float64))
@pytest.mark.parametrize("offset", OFFSETS)
def test_float_ops_and_backward_bit_for_bit(dtype, offset):
    size = 5003
    rng = np.random.default_rng(offset)
    x, grad = _values(rng, size, dtype), _values(rng, size, dtype)
    shape = np.array([size])
    with np.errstate(all="ignore"):
        for name in ("sqrt", "reciprocal", "floor", "relu", "sign", "round", "exp", "tanh"):
            code = opcodes.UNARY_OPS[name]
            _both(lambda out, c=code: ops_cpu.unary(x, out, c), size, dtype, offset)
        for name in ("relu", "log", "sqrt", "tanh"):
            code = opcodes.UNARY_BACKWARD_OPS[name]
            _both(lambda out, c=code: ops_cpu.unary_backward(x, grad, out, c), size, dtype, offset)
        got = _both(
            lambda out: ops_cpu.binary(x, ONE, grad, ONE, out, shape, opcodes.DIVIDE),
            size,
            dtype,
            offset,
        )
        np.testing.assert_array_equal(got, x / grad)


def test_streamed_kernels_run_and_store_non_temporally():
    x = np.linspace(-3, 3, 4096, dtype=np.float32)
    out = np.empty_like(x)
    negative = opcodes.UNARY_OPS["negative"]
    ops_cpu.unary(x, out, negative)
    np.testing.assert_array_equal(out, -x)
    kernel = elementwise.unary.kernel._streamed_kernels[negative]
    assert kernel.signatures, "the streamed kernel ran"
    if platform.machine().lower() in ("x86_64", "amd64"):  # the same loop, not from the cache

        @numba.njit(error_model="numpy")
        def streamed_negative(x, out):
            streaming.map_streamed(_negative, x, out)

        streamed_negative(x, out)
        assembly = streamed_negative.inspect_asm(streamed_negative.signatures[0])
        assert "movnt" in assembly and "sfence" in assembly
    # float32 tanh (never VML's) is bound by its arithmetic: no streamed kernel
    tanh = opcodes.UNARY_OPS["tanh"]
    ops_cpu.unary(x, out, tanh)
    assert elementwise.unary.kernel._streamed_kernels[tanh] is None
    np.testing.assert_allclose(out, np.tanh(x), rtol=1e-5, atol=1e-6)


def test_where_streams_dense_operands_only():
    size = 3000
    a, b = np.arange(size, dtype=np.float64), -np.arange(size, dtype=np.float64)
    condition = a % 3 == 0
    out = np.empty(size)
    ops_cpu.where(condition, ONE, a, ONE, b, ONE, out, np.array([size]))
    assert logic._where_streamed.signatures
    np.testing.assert_array_equal(out, np.where(condition, a, b))
    out = np.empty(size)  # a scalar operand: the dense loop
    ops_cpu.where(condition, ONE, a[:1], ZERO, b, ONE, out, np.array([size]))
    np.testing.assert_array_equal(out, np.where(condition, a[0], b))


def test_wanted():
    assert streaming.wanted(np.empty(1024, np.float32))  # 4 KiB
    assert not streaming.wanted(np.empty(1023, np.float32))  # under the threshold
    assert not streaming.wanted(np.empty((64, 64), np.float32)[:, :32])  # not contiguous
    misaligned = np.empty(4 * 2048 + 4, np.uint8)[1 : 1 + 4 * 2048].view(np.float32)
    assert not streaming.wanted(misaligned)  # a line would not start on an element
    assert not streaming.wanted(np.empty(1024, np.dtype("V24")))  # 24 does not divide 64
    streaming.set_enabled(False)
    assert not streaming.wanted(np.empty(1 << 20, np.float32))


def test_switch_from_the_environment(monkeypatch):
    monkeypatch.setenv("NUMTILE_STREAM_STORES", "0")
    assert Config().stream_stores is False
    monkeypatch.setenv("NUMTILE_STREAM_STORES", "1")
    assert Config().stream_stores is True
    monkeypatch.delenv("NUMTILE_STREAM_STORES")
    assert Config().stream_stores is True  # on by default
    monkeypatch.setenv("NUMTILE_STREAM_STORES", "maybe")
    with pytest.raises(ValueError, match="NUMTILE_STREAM_STORES"):
        Config()


@pytest.mark.parametrize("tile", (1500, 2048, 4099))
def test_tiled_ops_and_fuse_bit_for_bit(tile):
    """Tiled ops and nt.fuse (its fused_streamed kernel) on tiles that stream, against the
    same with the switch off and against NumPy."""
    rng = np.random.default_rng(tile)
    size = 3 * tile + 7  # a smaller last tile too
    a, b, c = (rng.standard_normal(size).astype(np.float32) for _ in range(3))
    x, y, z = (nt.from_numpy(v, tile_shape=(tile,)) for v in (a, b, c))
    fma = nt.fuse(lambda x, y, z: x * y + z)
    select = nt.fuse(lambda x, y: nt.where(x > 0, x * 2.5, y))
    scaled = nt.fuse(lambda x, y: (x - y) * 3.0)
    results = {}
    for on in (True, False):
        streaming.set_enabled(on)
        results[on] = [
            fma(x, y, z).to_numpy(),
            select(x, y).to_numpy(),
            scaled(x, y[:1]).to_numpy(),  # a broadcast input
            (x * y + z).to_numpy(),
            nt.where(x > 0, x, y).to_numpy(),
            (-x).to_numpy(),
        ]
    for on, off in zip(results[True], results[False]):
        np.testing.assert_array_equal(on.view(np.int32), off.view(np.int32))
    fused, selected, difference, unfused, where, negative = results[True]
    np.testing.assert_array_equal(fused, a * b + c)
    np.testing.assert_array_equal(unfused, a * b + c)
    np.testing.assert_array_equal(selected, np.where(a > 0, a * np.float32(2.5), b))
    np.testing.assert_array_equal(difference, (a - b[0]) * np.float32(3.0))
    np.testing.assert_array_equal(where, np.where(a > 0, a, b))
    np.testing.assert_array_equal(negative, -a)


def test_fused_streamed_source():
    """Only expressions without sin/cos/tan get a streamed kernel; it falls back to ``fused``
    where an input is strided."""
    expression = (("input", "float32", 0), ("unary", "float32", "sqrt", 0))
    assert "def fused_streamed" in fusion.source(expression, 1, 0)
    trigonometric = (("input", "float32", 0), ("unary", "float32", "sin", 0))
    assert "def fused_streamed" not in fusion.source(trigonometric, 1, 0)
    module = fusion._module(expression, 1, 0)
    x = np.arange(8192, dtype=np.float32)
    out = np.empty(4096, np.float32)
    # a strided input (every other element): fused_streamed hands it to fused
    module.fused_streamed(out, np.array([4096]), x, np.array([2]))
    np.testing.assert_array_equal(out, np.sqrt(x[::2]))
    fusion.fused(expression, out, np.array([4096]), (x[:4096],), (ONE,), ())
    np.testing.assert_array_equal(out, np.sqrt(x[:4096]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("offset", OFFSETS)
def test_fused_streams_at_any_offset(dtype, size, offset):
    """nt.fuse's kernel with out anywhere in a 64-byte line (its head stored as usual, the rest
    by the streamed loop from the boundary on), with whole and one-element inputs: the same
    bits as with ordinary stores, and NumPy's."""
    name = np.dtype(dtype).name
    expression = (
        ("input", name, 0),
        ("input", name, 1),
        ("binary", name, "multiply", 0, 1),
        ("input", name, 2),
        ("binary", name, "add", 2, 3),
    )
    rng = np.random.default_rng(size + offset)
    a, b, c = (_values(rng, size, dtype) for _ in range(3))
    shape = np.array([size])
    with np.errstate(all="ignore"):
        got = _both(
            lambda out: fusion.fused(expression, out, shape, (a, b, c), (ONE, ONE, ONE), ()),
            size,
            dtype,
            offset,
        )
        np.testing.assert_array_equal(got, a * b + c)
        got = _both(  # a one-element input
            lambda out: fusion.fused(expression, out, shape, (a, b[:1], c), (ONE, ZERO, ONE), ()),
            size,
            dtype,
            offset,
        )
        np.testing.assert_array_equal(got, a * b[0] + c)
    streamed = fusion._module(expression, 3, 0).fused_streamed
    if size * np.dtype(dtype).itemsize >= streaming.STREAM_MIN_BYTES:
        assert streamed.signatures, "the streamed kernel ran"
    # the same loop compiled afresh (not from the cache) stores non-temporally: once a dtype,
    # as a fresh compile costs seconds
    if (size, offset) == (SIZES[-1], OFFSETS[0]) and platform.machine().lower() in (
        "x86_64",
        "amd64",
    ):
        loop = numba.njit(error_model="numpy")(streamed.py_func)
        out = _output(size, dtype, 0)
        loop(out, shape, a, ONE, b, ONE, c, ONE)
        np.testing.assert_array_equal(out, a * b + c)
        assert "movnt" in loop.inspect_asm(loop.signatures[0])
