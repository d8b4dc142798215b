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
``bf16``, ``bf16_kernels`` (element-wise ops and reductions on bfloat16 bits; ``f16_kernels``
their float16 twins), ``generate``, ``sorting``, ``indexing``, ``structured``, ``matmul``
(cuBLAS or a tiled kernel), ``factorizations`` (potrf, trsm, syrk, herk), ``lu`` (getrf,
laswp), ``qr`` (geqrt, gemqrt, tpqrt, tpmqrt, triu_copy, eye_fill), ``products`` (cross),
``nn`` (attention, norm, loss, optim, embedding), and ``launch`` (settings, grid sizes, launch
parameters). The factorisation kernels exported here are the launchers of ``cusolver``
(getrf, potrf, geqrt, gemqrt) and ``level3`` (trsm, syrk, herk): cuSOLVER/cuBLAS through CuPy
on a real GPU (``libraries`` binds them to the stream), the ``@cuda.jit`` twins otherwise;
``solver_path()`` says which, as ``gemm_path()`` does for GEMM.

Importing this package needs ``numba.cuda`` but no GPU; launching needs a GPU or the
simulator (``require()`` says which is missing).
"""

import numtile.kernel_cache  # noqa: F401  (first: one cache stamp for all kernels)
from numtile.cuda_driver import SIMULATOR, CudaUnavailableError, available, require
from numtile.ops_cuda import nn
from numtile.ops_cuda.bf16 import (
    bf16_from,
    bf16_narrow,
    bf16_narrow_sum,
    bf16_widen,
    f16_from,
    f16_narrow,
    f16_widen,
)
from numtile.ops_cuda.bf16_kernels import (
    bf16_binary,
    bf16_compare,
    bf16_predicate,
    bf16_reduce_accumulate,
    bf16_unary,
    bf16_unary_backward,
)
from numtile.ops_cuda.columns import sum_columns
from numtile.ops_cuda.complex import (
    complex_binary,
    complex_compare,
    complex_math_unary,
    complex_part,
    complex_reduce_accumulate,
    complex_unary,
)
from numtile.ops_cuda.copy import cast, copy_strided, fill
from numtile.ops_cuda.cusolver import gemqrt, geqrt, getrf, potrf
from numtile.ops_cuda.elementwise import (
    axpy,
    binary,
    binary_math,
    compare,
    unary,
    unary_backward,
)
from numtile.ops_cuda.f16_kernels import (
    f16_binary,
    f16_compare,
    f16_predicate,
    f16_reduce_accumulate,
    f16_unary,
    f16_unary_backward,
)
from numtile.ops_cuda.fusion import fused, fused_exact  # nt.fuse and automatic fusion
from numtile.ops_cuda.generate import arange_fill, random_fill
from numtile.ops_cuda.indexing import (
    compact,
    compact_positions,
    copy_runs,
    count_nonzero,
    group_starts,
    running_count,
    take_positions,
)
from numtile.ops_cuda.launch import LaunchSettings, configure, launch_settings
from numtile.ops_cuda.level3 import herk, syrk, trsm
from numtile.ops_cuda.libraries import solver_path
from numtile.ops_cuda.logic import bitwise, predicate, where
from numtile.ops_cuda.low_precision import bf16_to_float32, gemm_bf16, gemm_rounded, round_mantissa
from numtile.ops_cuda.lu import laswp
from numtile.ops_cuda.masks import assign_where
from numtile.ops_cuda.matmul import gemm, gemm_batched, gemm_path
from numtile.ops_cuda.moments import moments_accumulate, moments_merge
from numtile.ops_cuda.products import cross
from numtile.ops_cuda.qr import eye_fill, tpmqrt, tpqrt, triu_copy
from numtile.ops_cuda.reduction import (
    modulus_reduce_accumulate,
    reduce_accumulate,
    softmax,
    softmax_backward,
)
from numtile.ops_cuda.scan import cumulative_sum, cumulative_sum_from, scan_carry
from numtile.ops_cuda.sorting import (
    arg_reduce,
    count_before,
    count_values,
    merge_runs,
    sort_rows,
)
from numtile.ops_cuda.structured import band, linspace_fill

__all__ = [
    "fused",
    "fused_exact",
    "SIMULATOR",
    "CudaUnavailableError",
    "LaunchSettings",
    "arange_fill",
    "arg_reduce",
    "assign_where",
    "available",
    "axpy",
    "band",
    "bf16_from",
    "bf16_narrow",
    "bf16_narrow_sum",
    "bf16_widen",
    "f16_from",
    "f16_narrow",
    "f16_widen",
    "binary",
    "binary_math",
    "bitwise",
    "cast",
    "compact",
    "compact_positions",
    "copy_runs",
    "compare",
    "complex_binary",
    "complex_compare",
    "complex_math_unary",
    "complex_part",
    "complex_reduce_accumulate",
    "complex_unary",
    "configure",
    "copy_strided",
    "cross",
    "count_before",
    "count_values",
    "count_nonzero",
    "cumulative_sum",
    "cumulative_sum_from",
    "eye_fill",
    "fill",
    "bf16_to_float32",
    "gemm_bf16",
    "gemm_rounded",
    "round_mantissa",
    "gemm",
    "gemm_batched",
    "gemm_path",
    "gemqrt",
    "geqrt",
    "getrf",
    "group_starts",
    "laswp",
    "linspace_fill",
    "launch_settings",
    "merge_runs",
    "moments_accumulate",
    "moments_merge",
    "nn",
    "potrf",
    "predicate",
    "random_fill",
    "reduce_accumulate",
    "modulus_reduce_accumulate",
    "scan_carry",
    "require",
    "running_count",
    "softmax",
    "softmax_backward",
    "solver_path",
    "sort_rows",
    "sum_columns",
    "syrk",
    "herk",
    "take_positions",
    "tpmqrt",
    "tpqrt",
    "triu_copy",
    "trsm",
    "unary",
    "unary_backward",
    "where",
    "bf16_binary",
    "bf16_compare",
    "bf16_predicate",
    "bf16_reduce_accumulate",
    "bf16_unary",
    "bf16_unary_backward",
    "f16_binary",
    "f16_compare",
    "f16_predicate",
    "f16_reduce_accumulate",
    "f16_unary",
    "f16_unary_backward",
]
