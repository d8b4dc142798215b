"""CUDA reduced-precision GEMMs (twins of ``numtile.ops_cpu.low_precision``).

On a real GPU of compute capability 8.0 or newer with CuPy, ``gemm_rounded`` on float32 tiles
calls ``cublasGemmEx`` with the compute type of the mode (``CUBLAS_COMPUTE_32F_FAST_16BF`` or
``_FAST_TF32``: tensor cores), and ``gemm_bf16`` calls it on bf16 inputs with a float32 output.
Elsewhere (older GPUs, no CuPy, the simulator) a ``@cuda.jit`` kernel rounds (or widens) the
inputs into scratch float32 arrays first and ``ops_cuda.gemm`` multiplies them: the numbers of
the tensor-core GEMM up to the order of the sums, which is how the CUDA path is tested here.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import cuda

from numtile.ops_cuda.bf16 import bf16_widen
from numtile.ops_cuda.launch import launch
from numtile.ops_cuda.matmul import _cupy, _cupy_stream, _device_pointer, gemm

__all__ = ["bf16_to_float32", "gemm_bf16", "gemm_rounded", "round_mantissa"]

# cublasComputeType_t and cudaDataType_t values (cublas_api.h, library_types.h)
_COMPUTE_32F, _COMPUTE_FAST_BF16, _COMPUTE_FAST_TF32 = 68, 75, 77
_R_32F, _R_16BF = 0, 14
_FAST_COMPUTE = {7: _COMPUTE_FAST_BF16, 10: _COMPUTE_FAST_TF32}


@cuda.jit
def _round_kernel(source, target, shift, half, mask):
    for i in range(cuda.grid(1), source.size, cuda.gridsize(1)):
        u = source[i]
        if (u & np.uint32(0x7F800000)) == np.uint32(0x7F800000):
            target[i] = u  # inf or NaN, kept whole
        else:
            target[i] = (u + half + ((u >> shift) & np.uint32(1))) & mask


def _flat_bits(x: Any) -> Any:
    """A C-contiguous float32 device array as a flat uint32 view of its bits."""
    return x.reshape(x.size).view(np.uint32)


def round_mantissa(x, out, bits: int, stream: Any = 0) -> None:
    """out = x (float32) with its mantissa rounded to ``bits`` bits, to nearest even."""
    if bits >= 23:
        if out is not x:
            out.copy_to_device(x, stream=stream)
        return
    source, target = _flat_bits(x), _flat_bits(out)
    shift = 23 - bits
    mask = np.uint32(~((1 << shift) - 1) & 0xFFFFFFFF)
    launch(
        _round_kernel,
        source.size,
        stream,
        source,
        target,
        np.uint32(shift),
        np.uint32((1 << (shift - 1)) - 1),
        mask,
    )


def bf16_to_float32(bits16, out, stream: Any = 0) -> None:
    """out (float32) = the bfloat16 values of the uint16 bit patterns ``bits16``."""
    bf16_widen(bits16.reshape(bits16.size), _flat_bits(out), stream=stream)


@functools.cache
def _tensor_cores() -> bool:
    """True on a real GPU of compute capability >= 8.0 (bf16/TF32 tensor cores) with CuPy."""
    if _cupy() is None:
        return False
    return cuda.get_current_device().compute_capability >= (8, 0)


def _gemm_ex(a, b, c, trans_a, trans_b, alpha, beta, stream, in_type, compute) -> bool:
    """cublasGemmEx on 2-D C-contiguous tiles with a float32 c (the row-major trick of
    ``ops_cuda.matmul``); False where it does not apply."""
    if not _tensor_cores() or c.ndim != 2 or min(a.size, b.size, c.size) == 0:
        return False
    cp = _cupy()
    lib = cp.cuda.cublas
    m, n = c.shape
    k = a.shape[0] if trans_a else a.shape[1]
    scalars = np.array([alpha, beta], dtype=np.float32)
    with _cupy_stream(cp, stream):
        handle = cp.cuda.device.get_cublas_handle()
        lib.setPointerMode(handle, lib.CUBLAS_POINTER_MODE_HOST)
        lib.gemmEx(
            handle,
            lib.CUBLAS_OP_T if trans_b else lib.CUBLAS_OP_N,
            lib.CUBLAS_OP_T if trans_a else lib.CUBLAS_OP_N,
            n,
            m,
            k,
            scalars.ctypes.data,
            _device_pointer(b),
            in_type,
            max(1, b.shape[1]),
            _device_pointer(a),
            in_type,
            max(1, a.shape[1]),
            scalars.ctypes.data + 4,
            _device_pointer(c),
            _R_32F,
            max(1, n),
            compute,
            -1,  # CUBLAS_GEMM_DEFAULT
        )
    return True


def gemm_rounded(
    a, b, c, trans_a, trans_b, alpha, beta, in_bits, out_bits, stream: Any = 0
) -> None:
    """c = alpha * round(op(a)) @ round(op(b)) + beta * c on float32 tiles (``in_bits``
    mantissa bits kept on the inputs; c rounded to ``out_bits`` afterwards when < 23)."""
    compute = _FAST_COMPUTE.get(in_bits, _COMPUTE_32F)
    if not _gemm_ex(a, b, c, trans_a, trans_b, alpha, beta, stream, _R_32F, compute):
        a_rounded = cuda.device_array(a.shape, np.float32, stream=stream)
        b_rounded = cuda.device_array(b.shape, np.float32, stream=stream)
        round_mantissa(a, a_rounded, in_bits, stream)
        round_mantissa(b, b_rounded, in_bits, stream)
        gemm(a_rounded, b_rounded, c, trans_a, trans_b, alpha, beta, stream=stream)
    if out_bits < 23:
        round_mantissa(c, c, out_bits, stream)


def gemm_bf16(a, b, c, trans_a, trans_b, alpha, beta, stream: Any = 0) -> None:
    """c (float32) = alpha * op(a) @ op(b) + beta * c for bfloat16 a, b as uint16 bits."""
    if _gemm_ex(a, b, c, trans_a, trans_b, alpha, beta, stream, _R_16BF, _COMPUTE_32F):
        return
    a_wide = cuda.device_array(a.shape, np.float32, stream=stream)
    b_wide = cuda.device_array(b.shape, np.float32, stream=stream)
    bf16_to_float32(a, a_wide, stream)
    bf16_to_float32(b, b_wide, stream)
    gemm(a_wide, b_wide, c, trans_a, trans_b, alpha, beta, stream=stream)
