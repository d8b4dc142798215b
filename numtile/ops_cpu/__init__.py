"""CPU tile kernels: pure ``@njit(nogil=True, cache=True)`` functions on NumPy arrays.

A kernel knows nothing about tiles, tasks or the runtime: inputs first, preallocated outputs
after, then scalars. ``ops_cpu`` is the reference backend that defines the semantics.
"""

from numpy import empty  # scratch buffers, the twin of ``StreamOps.empty`` on a GPU

from numtile.ops_cpu import nn  # noqa: F401  (ops.nn on either backend)
from numtile.ops_cpu.blas import gemm, gemm_batched, potrf, syrk, trsm
from numtile.ops_cpu.elementwise import (
    BINARY_OPS,
    COMPARE_OPS,
    UNARY_BACKWARD_OPS,
    UNARY_OPS,
    axpy,
    binary,
    compare,
    scale,
    unary,
    unary_backward,
)
from numtile.ops_cpu.generate import NORMAL, UNIFORM, arange_fill, random_fill
from numtile.ops_cpu.memory import cast, copy_strided, fill
from numtile.ops_cpu.reduction import (
    REDUCE_OPS,
    reduce_accumulate,
    softmax,
    softmax_backward,
)


def to_host(array):
    """A host view of a tile: on CPU the tile itself (on a GPU, a synchronised copy)."""
    return array


__all__ = [
    "empty",
    "to_host",
    "NORMAL",
    "UNIFORM",
    "arange_fill",
    "random_fill",
    "BINARY_OPS",
    "COMPARE_OPS",
    "REDUCE_OPS",
    "UNARY_BACKWARD_OPS",
    "UNARY_OPS",
    "axpy",
    "binary",
    "cast",
    "compare",
    "copy_strided",
    "fill",
    "gemm",
    "gemm_batched",
    "potrf",
    "reduce_accumulate",
    "scale",
    "softmax",
    "softmax_backward",
    "syrk",
    "trsm",
    "unary",
    "unary_backward",
]
