"""CPU tile kernels: pure ``@njit(nogil=True, cache=True)`` functions on NumPy arrays.

A kernel knows nothing about tiles, tasks or the runtime: inputs first, preallocated outputs
after, then scalars. ``ops_cpu`` is the reference backend that defines the semantics; the op
codes its kernels take live in ``numtile.opcodes``.

Modules: ``elementwise`` (unary, binary, binary_math, compare, axpy) over ``scalar_math``
(kernel families compiled one op at a time by ``per_op.OpKernel``; outputs of a core's L2 or
more written with non-temporal stores by ``streaming``)
(``fastmath``, ``fastmath_trig``, ``fastmath_f32``, ``fastmath_pow``: vectorisable exp, log, pow,
sin, cos, tan; float32 sin/cos/tan in float32; ``fastmath_blocks``: float32 exp, sin, cos a
block at a time; ``pow_avx512``: float32 power in explicit AVX-512 code over ``vector_ir``;
``pow_blocks``: dense float32/float64 power a block at a time, vectorised on AVX2);
``logic``
(predicate, where, bitwise); ``complex`` (the complex twins of unary, binary, compare, reduce);
``reduction`` (reduce_accumulate, modulus_reduce_accumulate, softmax); ``copy`` (fill,
copy_strided, cast); ``generate``
(random and arange tiles);
``bf16`` (bf16_widen, bf16_narrow, bf16_from, bf16_narrow_sum, f16_*: bfloat16 and float16
bit conversions);
``bf16_kernels`` (bf16_unary, bf16_binary, bf16_compare, bf16_unary_backward,
bf16_reduce_accumulate, bf16_predicate, and their f16_* twins: on bfloat16 or float16 bits,
widened in registers, rounded once on write; ``f16_kernels``: float16 conversions in registers);
``matmul`` (gemm),
``factorizations`` (potrf, trsm, syrk) and
``lu`` (getrf, laswp) over ``kernel_blas``; ``products`` (cross); ``structured`` (band,
linspace_fill); ``sorting`` (sort_rows, merge_runs, merge_values, count_before, count_values,
split_by_keys); ``searching`` (arg_reduce); ``indexing``
(take_positions, count_nonzero, compact, copy_runs, group_starts...); ``qr`` (geqrt, gemqrt,
tpqrt, tpmqrt, triu_copy, eye_fill) over ``kernel_blas``; ``tsqr`` (qr_leaf: TSQR's leaves);
``nn`` (attention, norm, loss, optim, embedding, rope, decode, swiglu); ``helpers``.

``nn`` is imported on first use (``ops.nn``, module ``__getattr__``): its dispatchers take a
tenth of a second to create, which a script without a neural network need not pay.
"""

import numtile.kernel_cache  # noqa: F401  (first: one cache stamp for all kernels)
from numtile.ops_cpu.bf16 import (
    bf16_from,
    bf16_narrow,
    bf16_narrow_sum,
    bf16_widen,
    f16_from,
    f16_narrow,
    f16_widen,
)
from numtile.ops_cpu.bf16_kernels import (
    bf16_binary,
    bf16_compare,
    bf16_predicate,
    bf16_reduce_accumulate,
    bf16_unary,
    bf16_unary_backward,
    f16_binary,
    f16_compare,
    f16_predicate,
    f16_reduce_accumulate,
    f16_unary,
    f16_unary_backward,
)
from numtile.ops_cpu.complex import (
    complex_binary,
    complex_compare,
    complex_math_unary,
    complex_part,
    complex_reduce_accumulate,
    complex_unary,
)
from numtile.ops_cpu.copy import cast, copy_strided, fill
from numtile.ops_cpu.elementwise import (
    axpy,
    binary,
    binary_math,
    compare,
    unary,
    unary_backward,
)
from numtile.ops_cpu.factorizations import herk, potrf, syrk, trsm
from numtile.ops_cpu.fusion import fused, fused_exact  # nt.fuse and automatic fusion
from numtile.ops_cpu.fusion_reduce import fused_reduce  # reductions of deferred expressions
from numtile.ops_cpu.generate import arange_fill, random_fill
from numtile.ops_cpu.indexing import (
    compact,
    compact_positions,
    copy_runs,
    count_nonzero,
    group_starts,
    running_count,
    take_positions,
)
from numtile.ops_cpu.logic import bitwise, predicate, where
from numtile.ops_cpu.low_precision import bf16_to_float32, gemm_bf16, gemm_rounded, round_mantissa
from numtile.ops_cpu.lu import getrf, getrf_tiles, laswp, laswp_tiles, leading_dimension
from numtile.ops_cpu.masks import assign_where
from numtile.ops_cpu.matmul import gemm, gemm_batched
from numtile.ops_cpu.mkl_bf16 import available as mkl_bf16_available
from numtile.ops_cpu.mkl_bf16 import gemm_bf16_mkl
from numtile.ops_cpu.moments import moments_accumulate, moments_merge
from numtile.ops_cpu.onednn_bf16 import available as onednn_bf16_available
from numtile.ops_cpu.onednn_bf16 import gemm_bf16_onednn, linear_bf16_onednn
from numtile.ops_cpu.products import cross
from numtile.ops_cpu.qr import eye_fill, gemqrt, geqrt, qr_explicit, tpmqrt, tpqrt, triu_copy
from numtile.ops_cpu.reduction import (
    modulus_reduce_accumulate,
    reduce_accumulate,
    softmax,
    softmax_backward,
    sum_columns,
)
from numtile.ops_cpu.scan import cumulative_sum, cumulative_sum_from, scan_carry
from numtile.ops_cpu.scratch import empty  # reused per thread; the twin of ``StreamOps.empty``
from numtile.ops_cpu.searching import arg_reduce
from numtile.ops_cpu.sorting import (
    count_before,
    count_values,
    merge_runs,
    merge_values,
    sort_rows,
    split_by_keys,
)
from numtile.ops_cpu.structured import band, linspace_fill
from numtile.ops_cpu.tsqr import qr_leaf  # TSQR's leaves (CPU-only)


def to_host(array):
    """A host view of a tile: on CPU the tile itself (on a GPU, a synchronised copy)."""
    return array


def __getattr__(name):
    if name == "nn":
        import importlib

        return importlib.import_module("numtile.ops_cpu.nn")  # binds ops_cpu.nn: once
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "fused",
    "fused_exact",
    "fused_reduce",
    "arange_fill",
    "arg_reduce",
    "assign_where",
    "axpy",
    "band",
    "bf16_binary",
    "bf16_compare",
    "bf16_from",
    "bf16_narrow",
    "bf16_narrow_sum",
    "bf16_predicate",
    "bf16_reduce_accumulate",
    "bf16_unary",
    "bf16_unary_backward",
    "bf16_widen",
    "f16_binary",
    "f16_compare",
    "f16_from",
    "f16_narrow",
    "f16_predicate",
    "f16_reduce_accumulate",
    "f16_unary",
    "f16_unary_backward",
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
    "copy_strided",
    "cross",
    "count_before",
    "count_values",
    "count_nonzero",
    "cumulative_sum",
    "cumulative_sum_from",
    "empty",
    "fill",
    "eye_fill",
    "bf16_to_float32",
    "gemm_bf16",
    "gemm_bf16_mkl",
    "gemm_bf16_onednn",
    "gemm_rounded",
    "round_mantissa",
    "gemm",
    "gemm_batched",
    "gemqrt",
    "geqrt",
    "getrf",
    "getrf_tiles",
    "group_starts",
    "laswp",
    "laswp_tiles",
    "leading_dimension",
    "linspace_fill",
    "merge_runs",
    "merge_values",
    "mkl_bf16_available",
    "onednn_bf16_available",
    "linear_bf16_onednn",
    "moments_accumulate",
    "moments_merge",
    "nn",
    "potrf",
    "predicate",
    "qr_explicit",
    "qr_leaf",
    "random_fill",
    "reduce_accumulate",
    "modulus_reduce_accumulate",
    "running_count",
    "scan_carry",
    "softmax",
    "softmax_backward",
    "sort_rows",
    "split_by_keys",
    "sum_columns",
    "syrk",
    "herk",
    "take_positions",
    "to_host",
    "tpmqrt",
    "tpqrt",
    "triu_copy",
    "trsm",
    "unary",
    "unary_backward",
    "where",
]
