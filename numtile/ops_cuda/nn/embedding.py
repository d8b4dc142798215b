"""Embedding CUDA kernels with the table tiled over (vocabulary rows, feature columns): gather
and scatter-add (twins of ``numtile.ops_cpu.nn.embedding``).

One thread per (id, column); only the scatter-add, where ids repeat, adds atomically.
"""

from __future__ import annotations

from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, cached_kernel, launch


@cached_kernel
def _embedding_gather(ids, table, v_start, out):
    columns = table.shape[1]
    for t in range(cuda.grid(1), ids.size * columns, cuda.gridsize(1)):
        i = t // columns
        j = t - i * columns
        row = ids[i] - v_start
        if row >= 0 and row < table.shape[0]:
            out[i, j] = table[row, j]


@cached_kernel
def _embedding_scatter_add(ids, grad_out, v_start, grad_table):
    # one thread per (id, column); ids repeat, so rows of grad_table are added to atomically
    columns = grad_table.shape[1]
    for t in range(cuda.grid(1), ids.size * columns, cuda.gridsize(1)):
        i = t // columns
        j = t - i * columns
        row = ids[i] - v_start
        if row >= 0 and row < grad_table.shape[0]:
            cuda.atomic.add(grad_table, (row, j), grad_out[i, j])


def embedding_gather(
    ids: DeviceArray, table: DeviceArray, v_start: int, out: DeviceArray, *, stream=0
) -> None:
    """out[i] = table[ids[i] - v_start] for the ids this table tile holds (other rows kept)."""
    launch(_embedding_gather, ids.size * table.shape[1], stream, ids, table, int(v_start), out)


def embedding_scatter_add(
    ids: DeviceArray, grad_out: DeviceArray, v_start: int, grad_table: DeviceArray, *, stream=0
) -> None:
    """grad_table[ids[i] - v_start] += grad_out[i] for the ids this table tile holds."""
    n = ids.size * grad_table.shape[1]
    launch(_embedding_scatter_add, n, stream, ids, grad_out, int(v_start), grad_table)
