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
