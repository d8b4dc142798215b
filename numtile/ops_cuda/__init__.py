"""CUDA tile kernels: the ``@cuda.jit`` twins of ``numtile.ops_cpu``.

Each public function has the name and signature of its ``ops_cpu`` twin plus a keyword-only
``stream`` (``0``: the default stream). Arrays are device arrays (``numba.cuda``
``DeviceNDArray``, or the simulator's stand-in under ``NUMBA_ENABLE_CUDASIM=1``); shapes and
strides stay host arrays. A function only launches work on ``stream``: it never
synchronises and never allocates its outputs. One deviation: ``potrf`` writes LAPACK's
``info`` into a 1-element device array instead of returning it (the runtime's ``StreamOps``
gives codelets the CPU signature back). Op codes live in ``numtile.opcodes``; this package
never imports ``numtile.ops_cpu``.

Launches use the block size and GEMM tile that ``configure()`` last set (the runtime calls it
with its ``Config`` when a CUDA node starts).

Modules mirror ``ops_cpu``: ``elementwise`` over ``scalar_math``, ``reduction``, ``copy``,
``generate``, ``matmul`` (cuBLAS or a tiled kernel), ``factorizations``, ``lu`` (getrf,
laswp), ``qr`` (geqrt, gemqrt, tpqrt, tpmqrt, triu_copy, eye_fill), ``nn`` (attention, norm,
loss, optim, embedding), and ``launch`` (settings, grid sizes, launch parameters).

Importing this package needs ``numba.cuda`` but no GPU; launching needs a GPU or the
simulator (``require()`` says which is missing).
"""

from numtile.cuda_driver import SIMULATOR, CudaUnavailableError, available, require
from numtile.ops_cuda import nn
from numtile.ops_cuda.complex import (
    complex_binary,
    complex_compare,
    complex_part,
    complex_reduce_accumulate,
    complex_unary,
)
from numtile.ops_cuda.copy import cast, copy_strided, fill
from numtile.ops_cuda.elementwise import axpy, binary, compare, unary, unary_backward
from numtile.ops_cuda.factorizations import potrf, syrk, trsm
from numtile.ops_cuda.generate import arange_fill, random_fill
from numtile.ops_cuda.launch import LaunchSettings, configure, launch_settings
from numtile.ops_cuda.logic import bitwise, predicate, where
from numtile.ops_cuda.lu import getrf, laswp
from numtile.ops_cuda.matmul import gemm, gemm_batched, gemm_path
from numtile.ops_cuda.qr import eye_fill, gemqrt, geqrt, tpmqrt, tpqrt, triu_copy
from numtile.ops_cuda.reduction import reduce_accumulate, softmax, softmax_backward

__all__ = [
    "SIMULATOR",
    "CudaUnavailableError",
    "LaunchSettings",
    "arange_fill",
    "available",
    "axpy",
    "binary",
    "bitwise",
    "cast",
    "compare",
    "complex_binary",
    "complex_compare",
    "complex_part",
    "complex_reduce_accumulate",
    "complex_unary",
    "configure",
    "copy_strided",
    "eye_fill",
    "fill",
    "gemm",
    "gemm_batched",
    "gemm_path",
    "gemqrt",
    "geqrt",
    "getrf",
    "laswp",
    "launch_settings",
    "nn",
    "potrf",
    "predicate",
    "random_fill",
    "reduce_accumulate",
    "require",
    "softmax",
    "softmax_backward",
    "syrk",
    "tpmqrt",
    "tpqrt",
    "triu_copy",
    "trsm",
    "unary",
    "unary_backward",
    "where",
]
