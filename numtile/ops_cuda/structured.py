"""CUDA structured tiles: band (tril, triu, eye) and linspace (twins of
``ops_cpu.structured``)."""

from __future__ import annotations

from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, launch

__all__ = ["band", "linspace_fill"]


@cuda.jit
def _band_kernel(x, out, row0, col0, lower, upper):
    batch, rows, cols = out.shape
    for flat in range(cuda.grid(1), batch * rows * cols, cuda.gridsize(1)):
        b = flat // (rows * cols)
        i = (flat // cols) % rows
        j = flat % cols
        diagonal = (col0 + j) - (row0 + i)
        if lower <= diagonal and diagonal <= upper:
            out[b, i, j] = x[b, i, j]
        else:
            out[b, i, j] = 0


@cuda.jit
def _linspace_kernel(out, start, step, offset, last, stop):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        position = offset + i
        if position == last:
            out[i] = stop
        else:
            out[i] = position * step + start


def band(x: DeviceArray, out: DeviceArray, row0, col0, lower, upper, *, stream=0) -> None:
    """out[b, i, j] = x[b, i, j] where lower <= (col0 + j) - (row0 + i) <= upper, else 0."""
    launch(_band_kernel, out.size, stream, x, out, row0, col0, lower, upper)


def linspace_fill(out: DeviceArray, start, step, offset, last, stop, *, stream=0) -> None:
    """out[i] = (offset + i) * step + start, ``stop`` at global position ``last``."""
    launch(_linspace_kernel, out.size, stream, out, start, step, offset, last, stop)
