"""CUDA twin of ``ops_cpu.reduction.sum_columns``: column sums are the reduction kernels'
sum (one thread per column walks the rows; neighbouring threads read neighbouring
elements)."""

from __future__ import annotations

from numtile.opcodes import SUM
from numtile.ops_cuda.launch import DeviceArray
from numtile.ops_cuda.reduction import reduce_accumulate

__all__ = ["sum_columns"]


def sum_columns(x: DeviceArray, out: DeviceArray, pre, n, post, *, stream=0) -> None:
    """out[p, q] += sum over j of x[p, j, q] (accumulated in float64)."""
    reduce_accumulate(x, out, pre, n, post, SUM, stream=stream)
