"""CPU tile kernels: pure ``@njit(nogil=True, cache=True)`` functions on NumPy arrays.

A kernel knows nothing about tiles, tasks or the runtime: inputs first, preallocated outputs
after, then scalars. ``ops_cpu`` is the reference backend that defines the semantics.
"""

from numpy import empty  # scratch buffers, the twin of ``StreamOps.empty`` on a GPU

from numtile.opcodes import (  # re-exported while callers move to numtile.opcodes
    BINARY_OPS,
    COMPARE_OPS,
    NORMAL,
    REDUCE_OPS,
    UNARY_BACKWARD_OPS,
    UNARY_OPS,
    UNIFORM,
)
from numtile.ops_cpu import nn  # noqa: F401  (ops.nn on either backend)
from numtile.ops_cpu.blas import gemm, gemm_batched, potrf, syrk, trsm
from numtile.ops_cpu.elementwise import (
    axpy,
    binary,
    compare,
    scale,
    unary,
    unary_backward,
)
from numtile.ops_cpu.generate import arange_fill, random_fill
from numtile.ops_cpu.memory import cast, copy_strided, fill
from numtile.ops_cpu.reduction import (
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
