"""float16 tensors (IEEE half, outside the array API standard, held as bfloat16 is: through
float32): storage and NumPy round trips, astype both ways bit for bit as NumPy (every float16
pattern widened, random float32 patterns and float64 values narrowed, on CPU and the CUDA
twin), finfo, promotion as NumPy and PyTorch, element-wise ops and reductions computed in
float32 and rounded once."""

import numpy as np
import pytest

import numtile as nt

torch = pytest.importorskip("torch")

ALL_HALVES = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
RNG = np.random.default_rng(0)
FLOAT32_PATTERNS = np.concatenate(
    [
        RNG.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        # ties between neighbouring halves (normal and subnormal), and the largest ones
        (ALL_HALVES[:31743].astype(np.float32) + ALL_HALVES[1:31744].astype(np.float32)) / 2,
        np.array([65504, 65519.99, 65520, 2.0**-25, 2.0**-26, -(2.0**-24) * 1.5], np.float32),
    ]
)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _bits(values):
    return values.view(np.uint16 if values.itemsize == 2 else np.uint32)


def test_astype_both_ways_bit_for_bit_as_numpy():
    x = nt.from_numpy(ALL_HALVES, tile_shape=10000)
    assert x.dtype == nt.float16 and x.to_numpy().dtype == np.float16
    np.testing.assert_array_equal(_bits(x.to_numpy()), _bits(ALL_HALVES))
    wide = x.astype(nt.float32).to_numpy()
    np.testing.assert_array_equal(_bits(wide), _bits(ALL_HALVES.astype(np.float32)))
    narrow = nt.from_numpy(FLOAT32_PATTERNS, tile_shape=9000).astype(nt.float16).to_numpy()
    np.testing.assert_array_equal(_bits(narrow), _bits(FLOAT32_PATTERNS.astype(np.float16)))
    # float64 rounds once, straight to float16 (through float32 it would round twice)
    double = np.array([1 + 2.0**-11 + 2.0**-40, 65519.999999, 2.0**-25 + 2.0**-60, -3.3e-5])
    double = np.concatenate([double, RNG.standard_normal(500) * 100.0])
    got = nt.from_numpy(double).astype(nt.float16).to_numpy()
    np.testing.assert_array_equal(_bits(got), _bits(double.astype(np.float16)))
    for dtype in (np.float64, np.int16, np.bool_):
        got = x[:3000].astype(dtype).to_numpy()
        np.testing.assert_array_equal(got, ALL_HALVES[:3000].astype(dtype))
    bf16 = x[15000:16000].astype(nt.bfloat16).to_numpy()
    np.testing.assert_array_equal(_bits(bf16), _bits(ALL_HALVES[15000:16000].astype(nt.bfloat16)))


@pytest.mark.parametrize("name", ["f16_widen", "f16_narrow", "f16_from"])
def test_conversion_kernels_of_both_backends(backend, name):
    if name == "f16_widen":
        source, out = ALL_HALVES[::7].view(np.uint16), np.zeros(ALL_HALVES[::7].size, np.uint32)
        expected = _bits(ALL_HALVES[::7].astype(np.float32))
    else:
        values = FLOAT32_PATTERNS[::9] if name == "f16_narrow" else RNG.normal(size=300) * 1e3
        source = values.view(np.uint32) if name == "f16_narrow" else values
        out = np.zeros(values.size, np.uint16)
        expected = _bits(values.astype(np.float16))
    backend.run(name, np.ascontiguousarray(source), out, twin=False)
    # NaNs as NaNs (the CUDA twin makes them quiet, without NumPy's payload bits)
    nan = ~np.isfinite(out.view(np.float32 if out.itemsize == 4 else np.float16))
    nan &= np.isnan(expected.view(np.float32 if out.itemsize == 4 else np.float16))
    np.testing.assert_array_equal(out[~nan], expected[~nan])
    assert np.isnan(out[nan].view(np.float32 if out.itemsize == 4 else np.float16)).all()


def test_finfo_isdtype_and_promotion_as_numpy_and_torch():
    info, theirs = nt.finfo(nt.float16), np.finfo(np.float16)
    assert (info.bits, info.eps, info.max, info.smallest_normal) == (
        16,
        float(theirs.eps),
        float(theirs.max),
        float(theirs.smallest_normal),
    )
    assert nt.isdtype(nt.float16, "real floating") and not nt.isdtype(nt.float16, "integral")
    for other, torch_other in (
        (nt.float32, torch.float32),
        (nt.float64, torch.float64),
        (nt.bfloat16, torch.bfloat16),
        (nt.complex64, torch.complex64),
    ):
        expected = str(torch.promote_types(torch.float16, torch_other)).removeprefix("torch.")
        assert nt.result_type(nt.float16, other).name == expected
    assert nt.result_type(nt.float16, nt.int8) == np.result_type(np.float16, np.int8)
    assert nt.result_type(nt.float16, 1.5) == nt.float16  # Python scalars are weak
    assert nt.can_cast(nt.float16, nt.float32) and not nt.can_cast(nt.float32, nt.float16)


def test_element_wise_and_reductions_in_float32_rounded_once():
    values = RNG.uniform(-4, 4, (37, 23)).astype(np.float16)
    wide = values.astype(np.float32)
    x = nt.from_numpy(values, tile_shape=(8, 16))

    def close(got, expected):
        assert got.dtype == np.float16
        # the float32 kernel and NumPy's may differ in float32's last bit: one half's ulp
        np.testing.assert_allclose(got.astype(np.float32), expected, rtol=1e-3, atol=1e-6)

    close(nt.exp(x).to_numpy(), np.exp(wide).astype(np.float16))
    close((x * x + 1).to_numpy(), (values * values + np.float16(1)))
    close(nt.sum(x, axis=0).to_numpy(), wide.sum(axis=0).astype(np.float16))
    close(nt.mean(x).to_numpy(), np.float16(wide.mean()))
    close(nt.var(x, axis=1).to_numpy(), wide.var(axis=1).astype(np.float16))
    assert nt.max(x).to_numpy() == values.max()
    np.testing.assert_array_equal(nt.sort(x, axis=1).to_numpy(), np.sort(values, axis=1))
    mixed = x + nt.from_numpy(values.astype(nt.bfloat16), tile_shape=(8, 16))
    assert mixed.dtype == nt.float32
    np.testing.assert_array_equal(mixed.to_numpy(), wide + values.astype(nt.bfloat16))


def test_matrix_products_refuse_float16_naming_the_cast():
    x = nt.from_numpy(np.ones((2, 2), np.float16))
    with pytest.raises(TypeError, match=r"matmul of float16 .* astype\(nt.float32\)"):
        x @ x
