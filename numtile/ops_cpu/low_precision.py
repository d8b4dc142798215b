"""Reduced-precision GEMM tile kernels: float32 mantissas rounded to bfloat16/TF32, and the
bf16 x bf16 -> float32 GEMM (bf16 tiles are uint16 bit patterns).

On this reference backend the GEMM is "round (or widen) the inputs to float32, then sgemm":
a product of two bfloat16 (or TF32) values is exact in float32, so this equals a bf16 GEMM
with float32 accumulation up to the order of the sums. ``numtile.ops_cpu.mkl_bf16`` calls
oneMKL's ``cblas_gemm_bf16bf16f32`` instead where the CPU has AVX512-BF16/AMX.
"""

import numpy as np
from numba import njit

from numtile.ops_cpu.bf16 import bf16_widen
from numtile.ops_cpu.matmul import gemm
from numtile.ops_cpu.scratch import empty


@njit(nogil=True, cache=True)
def _round_bits(source, target, bits):
    # target = the float32 bit patterns source (uint32) with mantissas rounded to ``bits``
    shift = np.uint32(23 - bits)
    half = np.uint32((1 << (23 - bits - 1)) - 1)
    mask = np.uint32(~((1 << (23 - bits)) - 1) & 0xFFFFFFFF)
    for i in range(source.shape[0]):
        u = source[i]
        if (u & np.uint32(0x7F800000)) == np.uint32(0x7F800000):
            target[i] = u  # inf or NaN (a NaN's payload may lose its low bits: keep it whole)
        else:
            target[i] = (u + half + ((u >> shift) & np.uint32(1))) & mask


def _flat(x: np.ndarray, dtype) -> np.ndarray:
    """A C-contiguous tile as a flat view of its bits (one compiled signature for any ndim)."""
    return x.reshape(-1).view(dtype)


def round_mantissa(x: np.ndarray, out: np.ndarray, bits: int) -> None:
    """out = float32 x with its mantissa rounded to ``bits`` bits, to nearest even (NaN and
    infinities kept; ``bits`` >= 23 copies). ``out`` may be ``x``."""
    if bits >= 23:
        if out is not x:
            out[...] = x
        return
    _round_bits(_flat(x, np.uint32), _flat(out, np.uint32), bits)


def bf16_to_float32(bits16: np.ndarray, out: np.ndarray) -> None:
    """out (float32) = the bfloat16 values whose bit patterns ``bits16`` (uint16) holds."""
    bf16_widen(_flat(bits16, np.uint16), _flat(out, np.uint32))


def gemm_rounded(a, b, c, trans_a, trans_b, alpha, beta, in_bits, out_bits) -> None:
    """c = alpha * round(op(a)) @ round(op(b)) + beta * c on float32 tiles, the inputs'
    mantissas rounded to ``in_bits`` bits and, when ``out_bits`` < 23, c's afterwards (the
    compiled pieces run without the GIL)."""
    a_rounded, b_rounded = empty(a.shape, a.dtype), empty(b.shape, b.dtype)
    round_mantissa(a, a_rounded, in_bits)
    round_mantissa(b, b_rounded, in_bits)
    gemm(a_rounded, b_rounded, c, trans_a, trans_b, alpha, beta)
    round_mantissa(c, c, out_bits)


def gemm_bf16(a, b, c, trans_a, trans_b, alpha, beta) -> None:
    """c (float32) = alpha * op(a) @ op(b) + beta * c for bfloat16 a and b given as uint16 bit
    patterns: widened to float32 (exact), then sgemm. The float32 copies are this thread's
    scratch (``scratch.empty``): fresh buffers would fault in every page at each call where
    malloc maps them (under a host limit: 3 GB a llama-small step on an AVX2 CPU)."""
    a_wide = empty(a.shape, np.float32)
    b_wide = empty(b.shape, np.float32)
    bf16_to_float32(a, a_wide)
    bf16_to_float32(b, b_wide)
    gemm(a_wide, b_wide, c, trans_a, trans_b, alpha, beta)
