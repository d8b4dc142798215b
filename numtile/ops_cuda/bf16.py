"""CUDA bfloat16 bit conversions (twins of ``ops_cpu.bf16``): a bfloat16 tile reaches a kernel
as its uint16 view, a float32 one as its uint32 view.

Widening is a shift; narrowing rounds to nearest, ties to even, by integer arithmetic, NaN to
the quiet NaN of its sign, as ``ml_dtypes`` converts (and as ``__float2bfloat16_rn`` does).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, cached_kernel, launch

__all__ = ["bf16_narrow", "bf16_widen"]


@cached_kernel
def _widen_kernel(bits, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = np.uint32(bits[i]) << np.uint32(16)


@cached_kernel
def _narrow_kernel(x, bits):
    for i in range(cuda.grid(1), bits.size, cuda.gridsize(1)):
        value = np.uint32(x[i])
        upper = value >> np.uint32(16)
        if (value & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
            bits[i] = np.uint16((upper & np.uint32(0x8000)) | np.uint32(0x7FC0))
        else:
            rounding = np.uint32(0x7FFF) + (upper & np.uint32(1))
            bits[i] = np.uint16((value + rounding) >> np.uint32(16))


def bf16_widen(bits: DeviceArray, out: DeviceArray, *, stream=0) -> None:
    """out[i] = the float32 bits of the bfloat16 bits[i] (uint16 in, uint32 out: exact)."""
    launch(_widen_kernel, out.size, stream, bits, out)


def bf16_narrow(x: DeviceArray, bits: DeviceArray, *, stream=0) -> None:
    """bits[i] = the bfloat16 nearest the float32 whose bits are x[i] (uint32 in, uint16 out;
    ties to even, NaN to the quiet NaN of its sign)."""
    launch(_narrow_kernel, bits.size, stream, x, bits)
