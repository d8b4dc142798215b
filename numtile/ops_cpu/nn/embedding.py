"""Embedding tile kernels with the table tiled over (vocabulary rows, feature columns): gather
and scatter-add."""

import numba


@numba.njit(nogil=True, cache=True, error_model="numpy")
def embedding_gather(ids, table, v_start, out):
    """out[i] = table[ids[i] - v_start] for the ids this table tile holds (other rows kept)."""
    for i in range(ids.size):
        row = ids[i] - v_start
        if 0 <= row < table.shape[0]:
            for j in range(table.shape[1]):
                out[i, j] = table[row, j]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def embedding_scatter_add(ids, grad_out, v_start, grad_table):
    """grad_table[ids[i] - v_start] += grad_out[i] for the ids this table tile holds."""
    for i in range(ids.size):
        row = ids[i] - v_start
        if 0 <= row < grad_table.shape[0]:
            for j in range(grad_table.shape[1]):
                grad_table[row, j] += grad_out[i, j]
