"""The bfloat16 dtype of TileTensors: storage, NumPy round trips, astype both ways (bit for bit
as ml_dtypes converts), finfo, promotion, gradients through astype."""

import ml_dtypes
import numpy as np
import pytest

import numtile as nt
from tests.ops_cpu.test_bf16 import float32_bits

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def bits(array) -> np.ndarray:
    return np.asarray(array).view(np.uint16)


def test_from_numpy_to_numpy_keeps_every_bit():
    values = np.arange(2**16, dtype=np.uint16).view(BFLOAT16).reshape(256, 256)
    tensor = nt.from_numpy(values, tile_shape=(100, 70))
    assert tensor.dtype == nt.bfloat16 == BFLOAT16
    np.testing.assert_array_equal(bits(tensor.to_numpy()), bits(values))
    # copies move the bit patterns: slices, retiling, transposes, creation
    np.testing.assert_array_equal(bits(tensor[3:200:3, 5:].to_numpy()), bits(values[3:200:3, 5:]))
    np.testing.assert_array_equal(bits(tensor.retile((64, 64)).T.to_numpy()), bits(values.T))
    full = nt.full((3, 4), -1.5, dtype=nt.bfloat16, tile_shape=(2, 3)).to_numpy()
    np.testing.assert_array_equal(bits(full), bits(np.full((3, 4), -1.5, BFLOAT16)))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # ml_dtypes casting NaNs
def test_astype_to_bfloat16_rounds_as_ml_dtypes():
    f32 = float32_bits(5000).view(np.float32)
    tensor = nt.from_numpy(f32, tile_shape=1000).astype(nt.bfloat16)
    np.testing.assert_array_equal(bits(tensor.to_numpy()), bits(f32.astype(BFLOAT16)))
    # float64 and integers round once, as ml_dtypes does (1 + 2**-8 + 2**-30 is above the tie)
    f64 = np.array([1 + 2**-8 + 2**-30, 1e300, -1e-300, np.pi, np.inf, -np.nan])
    from64 = nt.from_numpy(f64, tile_shape=4).astype(nt.bfloat16).to_numpy()
    np.testing.assert_array_equal(bits(from64), bits(f64.astype(BFLOAT16)))
    ints = np.array([2**24 + 2**16 + 1, -(2**31), 255, -7, 0, 12345678], np.int64)
    from_ints = nt.from_numpy(ints, tile_shape=4).astype(nt.bfloat16).to_numpy()
    np.testing.assert_array_equal(bits(from_ints), bits(ints.astype(BFLOAT16)))
    flags = nt.from_numpy(np.array([True, False])).astype(nt.bfloat16).to_numpy()
    np.testing.assert_array_equal(bits(flags), bits(np.array([1.0, 0.0], BFLOAT16)))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_astype_from_bfloat16_is_exact():
    values = np.arange(2**16, dtype=np.uint16).view(BFLOAT16)
    tensor = nt.from_numpy(values, tile_shape=20000)
    for dtype in (np.float32, np.float64):
        widened = tensor.astype(dtype).to_numpy()
        np.testing.assert_array_equal(widened.view(np.uint8), values.astype(dtype).view(np.uint8))
    small = np.array([1.5, -2.75, 300.0, -0.0, 127.0], BFLOAT16)
    as_int = nt.from_numpy(small).astype(nt.int32).to_numpy()
    np.testing.assert_array_equal(as_int, small.astype(np.int32))
    assert nt.astype(tensor, nt.bfloat16, copy=False) is tensor


def test_finfo_and_isdtype():
    info, reference = nt.finfo(nt.bfloat16), ml_dtypes.finfo(ml_dtypes.bfloat16)
    assert (info.bits, info.dtype) == (16, BFLOAT16)
    assert (info.eps, info.max, info.min) == (2**-7, float(reference.max), -float(reference.max))
    assert info.smallest_normal == float(np.finfo(np.float32).smallest_normal)
    assert nt.isdtype(nt.bfloat16, "real floating") and nt.isdtype(nt.bfloat16, "numeric")
    assert not nt.isdtype(nt.bfloat16, "integral")


@pytest.mark.parametrize(
    ("other", "expected"),
    [
        (nt.float32, nt.float32),  # bf16 + f32 -> f32
        (nt.float64, nt.float64),
        (nt.int32, nt.bfloat16),  # integer arrays keep bf16, as PyTorch
        (nt.uint64, nt.bfloat16),
        (nt.bool, nt.bfloat16),
        (1.5, nt.bfloat16),  # Python scalars are weak
        (7, nt.bfloat16),
        (1j, nt.complex64),
        (nt.complex128, nt.complex128),
    ],
)
def test_promotion_rules(other, expected):
    assert nt.result_type(nt.bfloat16, other) == expected
    assert nt.result_type(other, nt.bfloat16) == expected


def test_can_cast():
    assert nt.can_cast(nt.bfloat16, nt.float32) and nt.can_cast(nt.int8, nt.bfloat16)
    assert not nt.can_cast(nt.float32, nt.bfloat16) and not nt.can_cast(nt.int16, nt.bfloat16)
    assert not nt.can_cast(nt.bfloat16, nt.int64)


def test_gradient_flows_through_astype_both_ways():
    weights = nt.from_numpy(np.arange(6, dtype=np.float32), tile_shape=4).requires_grad_()
    narrowed = weights.astype(nt.bfloat16)
    (narrowed.astype(nt.float32) * 3.0).sum().backward()
    assert weights.grad.dtype == nt.float32
    np.testing.assert_array_equal(weights.grad.to_numpy(), np.full(6, 3.0, np.float32))
    leaf = nt.from_numpy(np.ones(5, BFLOAT16), tile_shape=2).requires_grad_()
    (leaf.astype(nt.float32) * 0.5).sum().backward()
    assert leaf.grad.dtype == nt.bfloat16
    np.testing.assert_array_equal(bits(leaf.grad.to_numpy()), bits(np.full(5, 0.5, BFLOAT16)))
