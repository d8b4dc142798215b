"""CPU tile kernels: pure ``@njit(nogil=True, cache=True)`` functions on NumPy arrays.

A kernel knows nothing about tiles, tasks or the runtime: inputs first, preallocated outputs
after, then scalars. ``ops_cpu`` is the reference backend that defines the semantics; the op
codes its kernels take live in ``numtile.opcodes``.

Modules: ``elementwise`` (unary, binary, compare, axpy) over ``scalar_math``; ``logic``
(predicate, where, bitwise); ``complex`` (the complex twins of unary, binary, compare, reduce);
``reduction`` (reduce_accumulate, softmax); ``copy`` (fill, copy_strided, cast); ``generate``
(random and arange tiles); ``matmul`` (gemm), ``factorizations`` (potrf, trsm, syrk) and
``lu`` (getrf, laswp) and ``qr`` (geqrt, gemqrt, tpqrt, tpmqrt, triu_copy,
eye_fill) over ``scipy_blas``; ``nn`` (attention, norm, loss, optim,
embedding); ``helpers``.
"""

from numpy import empty  # scratch buffers, the twin of ``StreamOps.empty`` on a GPU

from numtile.ops_cpu import nn
from numtile.ops_cpu.complex import (
    complex_binary,
    complex_compare,
    complex_part,
    complex_reduce_accumulate,
    complex_unary,
)
from numtile.ops_cpu.copy import cast, copy_strided, fill
from numtile.ops_cpu.elementwise import axpy, binary, compare, unary, unary_backward
from numtile.ops_cpu.factorizations import potrf, syrk, trsm
from numtile.ops_cpu.generate import arange_fill, random_fill
from numtile.ops_cpu.logic import bitwise, predicate, where
from numtile.ops_cpu.lu import getrf, laswp
from numtile.ops_cpu.matmul import gemm, gemm_batched
from numtile.ops_cpu.qr import eye_fill, gemqrt, geqrt, tpmqrt, tpqrt, triu_copy
from numtile.ops_cpu.reduction import reduce_accumulate, softmax, softmax_backward


def to_host(array):
    """A host view of a tile: on CPU the tile itself (on a GPU, a synchronised copy)."""
    return array


__all__ = [
    "arange_fill",
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
    "copy_strided",
    "empty",
    "fill",
    "eye_fill",
    "gemm",
    "gemm_batched",
    "gemqrt",
    "geqrt",
    "getrf",
    "laswp",
    "nn",
    "potrf",
    "predicate",
    "random_fill",
    "reduce_accumulate",
    "softmax",
    "softmax_backward",
    "syrk",
    "to_host",
    "tpmqrt",
    "tpqrt",
    "triu_copy",
    "trsm",
    "unary",
    "unary_backward",
    "where",
]
