"""ops_cpu.fastmath_blocks: float32 exp, sin and cos a block at a time. Their error in ulps
against float64 NumPy over dense random arguments, the floats on both sides of the ordinary
kernels' limits and next to multiples of pi/2; NumPy's special values bit for bit (NaN,
infinities, signed zeros, subnormal and overflowing results, huge trigonometric arguments)
wherever they fall in a block; the streamed and ordinary stores giving the same bits."""

import platform
import re

import numba
import numpy as np
import pytest
from llvmlite import binding as llvm

from numtile import opcodes, ops_cpu
from numtile.ops_cpu import fastmath_blocks, streaming

NUMPY = {"exp": np.exp, "sin": np.sin, "cos": np.cos}
MAX_ULP = {"exp": 0.8, "sin": 0.85, "cos": 0.85}  # every float32: 0.794, 0.828, 0.831
BLOCK = streaming.BLOCK_BYTES // 4  # float32 elements a block
F32 = np.float32


def _unary(name, x, streamed):
    """Our kernel of ``name`` (not VML) on x, its output streamed or stored as usual."""
    out = np.full_like(x, 7.0)
    previous = streaming.set_enabled(streamed)
    try:
        threshold = streaming.STREAM_MIN_BYTES
        streaming.STREAM_MIN_BYTES = 4096  # small outputs stream too
        ops_cpu.unary.kernel(x, out, opcodes.UNARY_OPS[name])
    finally:
        streaming.STREAM_MIN_BYTES = threshold
        streaming.set_enabled(previous)
    return out


def _ulps(actual, x, name):
    """|actual - f(x)| in float32 ulps at f(x), f in float64; NaN where f(x) is not a normal
    float32."""
    with np.errstate(all="ignore"):
        reference = NUMPY[name](x.astype(np.float64))
        spacing = np.spacing(np.abs(reference).astype(F32)).astype(np.float64)
        ulps = np.abs(actual.astype(np.float64) - reference) / spacing
    normal = (np.abs(reference) >= np.finfo(F32).tiny) & (np.abs(reference) <= np.finfo(F32).max)
    return np.where(normal, ulps, np.nan)


def _edges(limit):
    """The 64 float32 on each side of +-limit."""
    bits = np.array(limit, F32).view(np.int32) + np.arange(-64, 64, dtype=np.int32)
    edge = bits.view(F32)
    return np.concatenate([edge, -edge])


def _arguments(name):
    rng = np.random.default_rng(7)
    if name == "exp":
        parts = [rng.uniform(-87, 87, 200_000), rng.uniform(-1, 1, 50_000), _edges(87.0)]
        parts += [rng.uniform(-104, 89, 5000)]  # blocks with subnormal and infinite results
    else:
        near = (np.arange(1, 83_000, 7) * (np.pi / 2)).astype(F32)  # q up to 2**17 / (pi/2)
        parts = [rng.standard_normal(100_000) * 4, rng.uniform(-2e4, 2e4, 50_000), near]
        parts += [np.nextafter(near, F32(np.inf)), np.nextafter(near, F32(-np.inf))]
        parts += [-near, _edges(131072.0), rng.uniform(-1e6, 1e6, 500)]
    return np.concatenate([np.asarray(p, F32) for p in parts])


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("name", sorted(NUMPY))
def test_within_the_ulp_bound_and_streamed_bits_equal(name, streamed):
    x = _arguments(name)
    actual = _unary(name, x, streamed)
    ulps = _ulps(actual, x, name)
    assert np.nanmax(ulps) <= MAX_ULP[name], (x[np.nanargmax(ulps)], np.nanmax(ulps))
    assert np.nanmedian(ulps) < 0.3
    if streamed:  # the same bits either way
        np.testing.assert_array_equal(actual.view(np.int32), _unary(name, x, False).view(np.int32))


def _specials():
    info = np.finfo(F32)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, info.tiny, -info.tiny, 1e-40]
    values += [-1e-40, info.smallest_subnormal, -info.smallest_subnormal, info.max, -info.max]
    values += [87.0, -87.0, 88.72, 88.73, 89.0, -87.3, -100.0, -103.9, -104.0, -150.0, 1e30]
    values += [131071.99, 131072.0, -131072.0, 3e5, -2.5e7, 1e30, -1e38, np.pi, -np.pi / 2]
    return np.array(values, F32)


@pytest.mark.parametrize("name", sorted(NUMPY))
@pytest.mark.parametrize("position", [0, 1, BLOCK - 1, BLOCK, 3 * BLOCK + 5])
def test_special_values_match_numpy_wherever_they_fall(name, position):
    """One special value at ``position`` of ordinary arguments (one block of the tile takes the
    exact path), every special value in turn; then all of them in one block."""
    rng = np.random.default_rng(3)
    base = rng.uniform(-3, 3, 4 * BLOCK + 77).astype(F32)
    specials = _specials()
    with np.errstate(all="ignore"):
        expected_specials = NUMPY[name](specials)
    for value, expected in zip(specials, expected_specials, strict=True):
        x = base.copy()
        x[position] = value
        for streamed in (False, True):
            actual = _unary(name, x, streamed)
            got = actual[position]
            if np.isnan(expected) or not np.isfinite(expected) or expected == 0:
                np.testing.assert_array_equal(got, expected, err_msg=f"{name}({value!r})")
                assert np.signbit(got) == np.signbit(expected) or np.isnan(expected)
            elif abs(expected) < np.finfo(F32).tiny:  # subnormal results
                assert abs(got - expected) <= np.finfo(F32).smallest_subnormal
            else:
                assert _ulps(np.array([got]), np.array([value]), name)[0] <= 1.0, value
            others = np.arange(x.size) != position
            assert np.nanmax(_ulps(actual[others], x[others], name)) <= MAX_ULP[name]
    x = np.concatenate([specials, base[: BLOCK - specials.size]])
    with np.errstate(all="ignore"):
        expected = NUMPY[name](x)
    actual = _unary(name, x, False)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    exact = np.isinf(expected) | (expected == 0)  # and NaN where NumPy's are (any sign)
    np.testing.assert_array_equal(actual[exact], expected[exact])
    np.testing.assert_array_equal(np.signbit(actual[exact]), np.signbit(expected[exact]))


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_odd_sizes_offsets_and_in_place(name):
    rng = np.random.default_rng(5)
    for size in (0, 1, 15, BLOCK + 3, 3 * BLOCK + 17):
        raw = (rng.standard_normal(size + 16) * 10).astype(F32)
        for offset in (0, 3):
            x = raw[offset : offset + size]
            for streamed in (False, True):
                actual = _unary(name, x, streamed)
                with np.errstate(all="ignore"):
                    assert np.all(np.abs(actual - NUMPY[name](x)) <= 1e-6 * (1 + np.abs(actual)))
            for special in (None, 3e5, np.nan, -100.0):  # in place, where x is not kept
                source = x.copy()
                if special is not None and size:
                    source[size // 2] = special
                expected = _unary(name, source, False)
                in_place = source.copy()
                ops_cpu.unary.kernel(in_place, in_place, opcodes.UNARY_OPS[name])
                if special is None:  # the same kernel: the same bits
                    np.testing.assert_array_equal(in_place.view(np.int32), expected.view(np.int32))
                np.testing.assert_array_equal(np.isnan(in_place), np.isnan(expected))
                if size > 1:  # exact everywhere (exp_of, libm): 1.1 ulp at most
                    assert np.nanmax(_ulps(in_place, source, name)) <= 1.1


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_prefetched_blocks_give_the_bits_of_the_ordinary_loop(name):
    """Tiles of several prefetch blocks (exp's streamed loop goes a PREFETCH_BLOCK at a time),
    from an odd offset, with special values in a middle block and in the last elements: the
    streamed tile has the bits of the ordinary one, and NumPy's special values."""
    rng = np.random.default_rng(11)
    size = 3 * fastmath_blocks.PREFETCH_BLOCK + 1029
    raw = rng.uniform(-5, 5, size + 16).astype(F32)
    x = raw[5 : 5 + size]
    x[fastmath_blocks.PREFETCH_BLOCK + 700] = np.inf
    x[-3:] = (np.nan, -np.inf, 3e5)
    streamed, ordinary = _unary(name, x, True), _unary(name, x, False)
    np.testing.assert_array_equal(streamed.view(np.int32), ordinary.view(np.int32))
    with np.errstate(all="ignore"):
        expected = NUMPY[name](x)
    special = ~np.isfinite(x)
    np.testing.assert_array_equal(streamed[special], expected[special])
    assert np.nanmax(_ulps(streamed[~special], x[~special], name)) <= 1.0


def test_other_dtypes_keep_their_kernels():
    """float64 (when VML does not take it) and float32 into float64 go through exp_of and
    map_reduced, as before; the float32 limits are those the kernels are exact below."""
    x = np.linspace(-20, 20, 1001)
    for name in NUMPY:
        out = np.empty_like(x)
        ops_cpu.unary.kernel(x, out, opcodes.UNARY_OPS[name])
        np.testing.assert_allclose(out, NUMPY[name](x), rtol=4e-16, atol=1e-300)
    assert fastmath_blocks.EXP_LIMIT == np.array(87.0, F32).view(np.int32)
    assert fastmath_blocks.TRIG_LIMIT == np.array(131072.0, F32).view(np.int32)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 assembly")
def test_the_streamed_loop_stores_whole_vectors_non_temporally():
    """The tile's loop vectorises with its streaming stores (``streaming.store_streamed``):
    aligned non-temporal vector stores and a fence, no call in the loop (the same loop
    compiled here, not from the cache)."""

    streamed_exp = numba.njit(error_model="numpy")(fastmath_blocks.TILES[("exp", 1)].py_func)
    x = np.linspace(-3, 3, 4099, dtype=F32)
    raw = np.empty(x.size + 16, F32)
    out = raw[(-raw.ctypes.data % 64) // 4 + 1 :][: x.size]  # a head before the boundary
    streamed_exp(x, out)
    np.testing.assert_array_equal(out.view(np.int32), _unary("exp", x, False).view(np.int32))
    assembly = streamed_exp.inspect_asm(streamed_exp.signatures[0])
    wide = llvm.get_host_cpu_features().get("avx512f", False)  # else 256-bit vectors (AVX2)
    assert re.search(r"vmovnt\w+\s+%" + ("zmm" if wide else "ymm"), assembly)
    assert "sfence" in assembly
    assert "prefetcht0" in assembly  # exp's input is prefetched a block ahead
