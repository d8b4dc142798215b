"""ops_cpu.mkl_vml: element-wise maths through oneMKL's VML. Its results against NumPy bit for
bit on special values (the 2023.12 standard's tables, C99's pow cases, subnormals) and within
1 ulp of a wider reference elsewhere; which operands it takes (dense float32/float64 only);
the switch (NUMTILE_VML) and tiled ops on both paths; VML's per-thread state left alone."""

import warnings

import numpy as np
import pytest

import numtile as nt
from numtile import opcodes, ops_cpu
from numtile.config import Config
from numtile.ops_cpu import mkl_lib, mkl_vml, pow_avx512

pytestmark = pytest.mark.skipif(mkl_lib.library() is None, reason="needs oneMKL (numtile[mkl])")

NUMPY = {
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "tanh": np.tanh,
    "expm1": np.expm1,
    "log1p": np.log1p,
    "log2": np.log2,
    "log10": np.log10,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "power": np.power,
    "atan2": np.arctan2,
    "hypot": np.hypot,
}
BINARY = ("power", "atan2", "hypot")
OURS_F32 = ("tanh", "exp", "sin", "cos")  # float32 stays on our kernels (fastmath_blocks)
ROUTED = [
    (name, dtype)
    for name in NUMPY
    for dtype in (np.float32, np.float64)
    if (name in BINARY or name not in OURS_F32 or dtype == np.float64)
]
ONE = np.ones(1, np.int64)
READ_VENDOR = mkl_vml.cpu_vendor  # before the fixture below replaces it


@pytest.fixture(autouse=True)
def _vml_on(monkeypatch):
    """VML on for these tests, whatever NUMTILE_VML says, routing as on Intel CPUs (every op
    of the tables), whatever this CPU's vendor (``test_routing_follows_the_cpu_vendor``)."""
    monkeypatch.setattr(mkl_vml, "cpu_vendor", lambda: "GenuineIntel")
    previous = mkl_vml.set_enabled(True)
    yield
    mkl_vml.set_enabled(previous)


# the tables of mkl_vml's docstring: the ops VML measured faster than ours, by vendor
INTEL_F32 = set(NUMPY) - {"exp", "sin", "cos", "tanh"}
AMD_F64 = {"tanh", "expm1", "log1p", "log2", "log10", "asin", "acos", "atan", "sinh", "cosh"}
AMD_F64 |= {"atan2"}
AMD_F32 = AMD_F64 - {"tanh", "cosh"} | {"atanh"}


@pytest.mark.parametrize("vendor", ["GenuineIntel", "AuthenticAMD", "HygonGenuine", ""])
def test_routing_follows_the_cpu_vendor(vendor, monkeypatch):
    monkeypatch.setattr(mkl_vml, "cpu_vendor", lambda: vendor)
    intel = vendor in ("GenuineIntel", "")  # unknown: the Intel routing, as before vendors
    expected = {
        np.float32: INTEL_F32 if intel else AMD_F32,
        np.float64: set(NUMPY) if intel else AMD_F64,
    }
    for dtype, names in expected.items():
        assert {name for name in NUMPY if mkl_vml.routes(name, dtype)} == names, dtype
        x = np.linspace(0.1, 0.9, 12, dtype=dtype)
        for name in NUMPY:
            out = np.full_like(x, np.nan)
            if name in BINARY:
                taken = mkl_vml.binary(x, ONE, x, ONE, out, ONE * 12, opcodes.BINARY_OPS[name])
            else:
                taken = mkl_vml.unary(x, out, opcodes.UNARY_OPS[name])
            assert taken == (name in names), (name, dtype)
            if taken:
                operands = (x, x) if name in BINARY else (x,)
                with np.errstate(invalid="ignore"):  # acosh below 1
                    expected_values = NUMPY[name](*operands)
                np.testing.assert_allclose(out, expected_values, rtol=4 * np.finfo(dtype).eps)
            else:
                assert np.all(np.isnan(out))  # nothing done


def test_the_vendor_is_read_from_the_cpu():
    vendor = READ_VENDOR.__wrapped__()  # uncached
    assert isinstance(vendor, str)
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            expected = [line.split(":")[1].strip() for line in cpuinfo if "vendor_id" in line]
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    assert vendor == (expected[0] if expected else "")


def _specials(dtype):
    """The special values of the standard's tables, both sides of the domain edges and of the
    overflow thresholds, subnormals, the extremes, odd and even integers (pow's cases)."""
    info = np.finfo(dtype)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5]
    values += [1.5, -1.5, info.tiny, -info.tiny, info.smallest_subnormal, info.tiny / 4]
    values += [-info.smallest_subnormal, info.max, -info.max, 1 - info.epsneg, 1 + info.eps]
    values += [-1 - info.eps, 88.5, 89.0, -103.5, -104.5, 709.5, 710.5, -745.5, -746.5, np.pi]
    values += [1e-10, -1e-10, 1e30, 2.0**60 + 2.0**37, -(2.0**53) - 2.0, 100.0, -100.0]
    with np.errstate(all="ignore"):
        return np.array(values, dtype)


def _ordinary(dtype, count=3000):
    rng = np.random.default_rng(0)
    scale = rng.choice([1e-3, 1.0, 10.0, 300.0, 1e5], count)
    return (rng.standard_normal((2, count)) * scale).astype(dtype)


def _vml(name, *operands):
    out = np.empty_like(operands[0])
    if name in BINARY:
        size = np.array([out.size], np.int64)
        a, b = operands
        assert mkl_vml.binary(a, ONE, b, ONE, out, size, opcodes.BINARY_OPS[name])
    else:
        assert mkl_vml.unary(operands[0], out, opcodes.UNARY_OPS[name])
    return out


def _ulps(result, operands, function, dtype):
    """|result - f(operands)| in ulps of ``dtype``, f computed one precision wider."""
    wide = np.float64 if dtype == np.float32 else np.longdouble
    exact = function(*(o.astype(wide) for o in operands))
    spacing = np.spacing(np.abs(exact).astype(dtype)).astype(wide)
    return np.abs(result.astype(wide) - exact) / spacing


@pytest.mark.parametrize(("name", "dtype"), ROUTED)
def test_special_values_bit_for_bit_and_1_ulp_elsewhere(name, dtype):
    function, specials = NUMPY[name], _specials(dtype)
    grids = [g.ravel().copy() for g in np.meshgrid(specials, specials)]
    ordinary = _ordinary(dtype)
    if name == "power":  # positive bases: a finite result for any exponent
        ordinary[0] = np.abs(ordinary[0]) + dtype(0.01)
        ordinary[1] = ordinary[1] % dtype(40) - dtype(20)
    for operands in (grids if name in BINARY else [specials], ordinary[: 1 + (name in BINARY)]):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result, expected = _vml(name, *operands), function(*operands)
            ulps = _ulps(result, operands, function, dtype)
        special = ~np.isfinite(expected) | (expected == 0)
        special |= np.any([~np.isfinite(o) | (o == 0) for o in operands], axis=0)
        # NaN where NumPy has NaN (its sign is the hardware's), else the same bits
        np.testing.assert_array_equal(np.isnan(result), np.isnan(expected), err_msg=name)
        number = special & ~np.isnan(expected)
        np.testing.assert_array_equal(result[number], expected[number], err_msg=name)
        np.testing.assert_array_equal(np.signbit(result[number]), np.signbit(expected[number]))
        assert np.all(ulps[~special] <= 1.0), (name, np.max(ulps[~special]))


def test_only_dense_float_operands_of_routed_ops_go_to_vml():
    x = np.linspace(0.1, 3.0, 12)
    out = np.empty_like(x)
    assert mkl_vml.unary(x, out, opcodes.EXP)
    np.testing.assert_allclose(out, np.exp(x), rtol=2e-16)
    assert not mkl_vml.unary(x[::2], out[:6], opcodes.EXP)  # strided
    assert not mkl_vml.unary(x.astype(np.float32), out, opcodes.EXP)  # two dtypes
    assert not mkl_vml.unary(np.arange(12), np.empty(12, np.int64), opcodes.EXP)
    assert not mkl_vml.unary(x, out, opcodes.SQRT)  # our kernel is as fast
    for code in (opcodes.TANH, opcodes.EXP, opcodes.SIN, opcodes.COS):  # float32: ours is faster
        assert not mkl_vml.unary(x.astype(np.float32), out.astype(np.float32), code)
    shape, strides = np.array([3, 4], np.int64), np.array([4, 1], np.int64)
    assert mkl_vml.binary(x, strides, x, strides, out, shape, opcodes.POWER)
    np.testing.assert_allclose(out, x**x, rtol=2e-16)
    transposed, broadcast = np.array([1, 3], np.int64), np.array([0, 1], np.int64)
    assert not mkl_vml.binary(x, transposed, x, strides, out, shape, opcodes.POWER)
    assert not mkl_vml.binary(x, strides, x[:4], broadcast, out, shape, opcodes.POWER)
    assert not mkl_vml.binary(x, strides, x, strides, out, shape, opcodes.ADD)
    # what VML does not take, our kernels compute
    ops_cpu.binary(x, strides, x[:4], broadcast, out, shape, opcodes.POWER)
    np.testing.assert_allclose(out, x ** np.tile(x[:4], 3), rtol=1e-15)
    ops_cpu.unary(x[::2], out[:6], opcodes.EXP)
    np.testing.assert_allclose(out[:6], np.exp(x[::2]), rtol=1e-15)


def test_in_place_and_empty_operands():
    a, b = np.linspace(0.5, 2.0, 9, dtype=np.float32), np.linspace(-2, 2, 9, dtype=np.float32)
    expected = a**b
    size = np.array([9], np.int64)
    assert mkl_vml.binary(a, ONE, b, ONE, a, size, opcodes.POWER)  # a **= b
    np.testing.assert_allclose(a, expected, rtol=1.2e-7)
    empty = np.empty(0)
    assert mkl_vml.unary(empty, empty.copy(), opcodes.LOG)


def test_the_switch_and_its_variable(monkeypatch):
    x = np.linspace(0.1, 3.0, 7, dtype=np.float32)
    previous = mkl_vml.set_enabled(False)
    try:
        assert not mkl_vml.enabled()
        assert not mkl_vml.unary(x, np.empty_like(x), opcodes.LOG)
        out = np.empty_like(x)
        ops_cpu.unary(x, out, opcodes.LOG)  # our kernel
        np.testing.assert_allclose(out, np.log(x), rtol=2.4e-7)
    finally:
        mkl_vml.set_enabled(previous)
    monkeypatch.setenv("NUMTILE_VML", "0")
    assert Config().vml is False
    monkeypatch.setenv("NUMTILE_VML", "1")
    assert Config().vml is True
    monkeypatch.delenv("NUMTILE_VML")
    assert Config().vml is True  # on by default where MKL loads
    monkeypatch.setenv("NUMTILE_VML", "maybe")
    with pytest.raises(ValueError, match="NUMTILE_VML"):
        Config()


def test_vml_leaves_the_threads_mode_and_error_status_and_prints_nothing(capfd):
    library = mkl_lib.library()
    mode, status = library.vmlGetMode(), library.vmlGetErrStatus()
    x = np.array([-1.0, 0.0, 1e4, np.nan])
    with np.errstate(all="raise"):  # no floating-point exception reaches NumPy either
        for code in (opcodes.LOG, opcodes.EXP, opcodes.ACOSH):
            mkl_vml.unary(x, np.empty_like(x), code)
    assert (library.vmlGetMode(), library.vmlGetErrStatus()) == (mode, status)
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiled_ops_on_both_paths(math_path, dtype, monkeypatch):
    calls = []
    run = mkl_vml.run
    monkeypatch.setattr(
        mkl_vml, "run", lambda name, *arrays: calls.append(name) or run(name, *arrays)
    )
    values = np.concatenate([_specials(dtype), _ordinary(dtype, 40)[0]]).reshape(9, 9)
    bases = np.abs(values) + dtype(0.5)
    x, y = nt.asarray(values, tile_shape=(3, 5)), nt.asarray(bases, tile_shape=(3, 5))
    with np.errstate(all="ignore"):
        cases = [
            (nt.exp(x), np.exp(values), 4),
            (nt.sin(x), np.sin(values), 4),
            (nt.log1p(y), np.log1p(bases), 4),
            (y**x, bases**values, 8),
            (nt.atan2(x, y), np.arctan2(values, bases), 4),
            (y ** x[:1], bases ** values[:1], 8),  # broadcast: our kernel on either path
        ]
        for tensor, expected, ulps in cases:
            result = tensor.to_numpy()
            np.testing.assert_array_equal(np.isnan(result), np.isnan(expected))
            number = ~np.isnan(expected)
            eps = np.finfo(dtype).eps
            np.testing.assert_allclose(result[number], expected[number], rtol=ulps * eps)
    routed = {"Log1p", "Pow", "Atan2"} | ({"Exp", "Sin"} if dtype == np.float64 else set())
    if dtype == np.float32 and pow_avx512.enabled():  # float32 power: the AVX-512 kernel
        routed.remove("Pow")
    assert set(calls) == (routed if math_path == "vml" else set())
