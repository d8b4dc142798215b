"""The bfloat16 bit conversions (numtile.ops_cpu.bf16, and its CUDA twin under the simulator)
against ml_dtypes: every bfloat16 widened, float32 narrowed from random bits and edge cases."""

import ml_dtypes
import numpy as np
import pytest

BFLOAT16 = ml_dtypes.bfloat16

# zeros, infinities, the largest finite float32 (rounds to inf), ties below and above an
# even and an odd bfloat16, the smallest subnormal, a tie between subnormals, NaNs with
# payloads and signs (quieted, payload dropped)
EDGES = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000,
    0x7F7F7FFF, 0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F818001, 0x00000001, 0x00008000,
    0x00018000, 0x7F800001, 0xFFFFFFFF, 0x7FC00000, 0xFFC12345, 0x80008000,
]  # fmt: skip


def float32_bits(count: int, seed: int = 0) -> np.ndarray:
    """``count`` random float32 bit patterns and the edge cases."""
    random = np.random.default_rng(seed).integers(0, 2**32, count, dtype=np.uint64)
    return np.concatenate([random.astype(np.uint32), np.array(EDGES, np.uint32)])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # ml_dtypes casting NaNs
def test_narrow_rounds_to_nearest_even_as_ml_dtypes(backend):
    x = float32_bits(4000 if backend.name == "cuda" else 200_000)
    out = np.zeros(x.size, np.uint16)
    backend.run("bf16_narrow", x, out)
    expected = x.view(np.float32).astype(BFLOAT16).view(np.uint16)
    np.testing.assert_array_equal(out, expected)


def test_widen_is_exact_for_every_bfloat16(backend):
    bits = np.arange(2**16 if backend.name == "cpu" else 2**10, dtype=np.uint32)
    bits = (bits * (2**16 // bits.size)).astype(np.uint16)  # spread over every exponent
    out = np.zeros(bits.size, np.uint32)
    backend.run("bf16_widen", bits, out)
    np.testing.assert_array_equal(out, bits.view(BFLOAT16).astype(np.float32).view(np.uint32))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # ml_dtypes casting NaNs
def test_from_float64_and_integers_rounds_once_as_ml_dtypes(backend):
    # ties of bfloat16 that float32 cannot hold (a float32 in between would round them twice),
    # the overflow edge, float32's underflow, random magnitudes over float64's whole range
    count = 500 if backend.name == "cuda" else 50_000
    rng = np.random.default_rng(3)
    odd = (2 * np.arange(64) + 1) * 2.0**-8
    values = np.concatenate(
        [
            [1 + 2**-8 + 2**-30, 1e300, -1e300, -1e-300, 3.3961e38, 3.3963e38, 1e-40, -1e-45],
            [np.pi, np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0],
            1 + odd, 1 + odd + 2**-40, 1 + odd - 2**-40,
            rng.standard_normal(count) * np.exp(rng.uniform(-700, 700, count)),
        ]
    )  # fmt: skip
    out = np.zeros(values.size, np.uint16)
    backend.run("bf16_from", values, out)
    np.testing.assert_array_equal(out, values.astype(BFLOAT16).view(np.uint16))
    # integers to 2**53 (beyond it they round to float64 first)
    ints = np.concatenate([[2**24 + 2**16 + 1, -(2**31), 255, -7, 0, 12345678, 2**53]])
    ints = np.concatenate([ints, rng.integers(-(2**53), 2**53, count)]).astype(np.int64)
    out = np.zeros(ints.size, np.uint16)
    backend.run("bf16_from", ints, out)
    np.testing.assert_array_equal(out, ints.astype(BFLOAT16).view(np.uint16))


@pytest.mark.parametrize("has_partial", [False, True])
@pytest.mark.parametrize("has_bias", [False, True])
def test_narrow_sum_rounds_the_sum_once(backend, has_partial, has_bias):
    rng = np.random.default_rng(4)
    acc, partial = (rng.standard_normal((7, 9)).astype(np.float32) for _ in range(2))
    bias = rng.standard_normal(9).astype(np.float32)
    out = np.zeros((7, 9), np.uint16)
    backend.run("bf16_narrow_sum", acc, partial, bias, out, has_partial, has_bias)
    extra = np.zeros((7, 9), np.float32)
    if has_bias:
        extra = extra + bias
    if has_partial:
        extra = extra + partial
    expected = (acc + extra).astype(BFLOAT16).view(np.uint16)
    np.testing.assert_array_equal(out, expected)
