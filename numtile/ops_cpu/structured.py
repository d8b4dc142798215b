"""Structured tiles: a band of a matrix kept, the rest zeroed (tril, triu, eye), and evenly
spaced values (linspace)."""

from numba import njit


@njit(nogil=True, cache=True)
def band(x, out, row0, col0, lower, upper):
    """out[b, i, j] = x[b, i, j] where lower <= (col0 + j) - (row0 + i) <= upper, else 0
    (``x`` and ``out``: (batch, rows, cols) views of a tile at global row0, col0; ``x`` may
    be ``out``)."""
    batch, rows, cols = out.shape
    for b in range(batch):
        for i in range(rows):
            for j in range(cols):
                diagonal = (col0 + j) - (row0 + i)
                if lower <= diagonal <= upper:
                    out[b, i, j] = x[b, i, j]
                else:
                    out[b, i, j] = 0


@njit(nogil=True, cache=True)
def linspace_fill(out, start, step, offset, last, stop):
    """out[i] = (offset + i) * step + start (NumPy's linspace formula), ``stop`` at global
    position ``last`` (flat ``out``; -1: no endpoint)."""
    for i in range(out.shape[0]):
        position = offset + i
        if position == last:
            out[i] = stop
        else:
            out[i] = position * step + start
