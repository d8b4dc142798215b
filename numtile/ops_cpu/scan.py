"""Scan kernels of ``cumulative_sum`` along the middle axis of a flat array viewed as
(pre, n, post): the inclusive sum within one tile, then the carries between tiles.

A tiled scan runs ``cumulative_sum`` on every tile at once, chains the small ``scan_carry``
tasks (the running total entering each tile along the axis), then adds each carry to its
tile with ``add_carry``, again all tiles at once.
"""

import numba


@numba.njit(nogil=True, cache=True, error_model="numpy")
def cumulative_sum(x, out, pre, n, post):
    """out[p, j, q] = sum over k <= j of x[p, k, q], in out's dtype (x has it too)."""
    for p in range(pre):
        base = p * n * post
        if post == 1:
            total = out.dtype.type(0)
            for j in range(n):
                total += x[base + j]
                out[base + j] = total
            continue
        if n > 0:
            out[base : base + post] = x[base : base + post]
        for j in range(1, n):
            row = base + j * post
            previous = out[row - post : row]
            values = x[row : row + post]
            result = out[row : row + post]
            for q in range(post):
                result[q] = previous[q] + values[q]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def scan_carry(scanned, carry_in, carry_out, pre, n, post):
    """carry_out[p, q] = carry_in[p, q] + scanned[p, n - 1, q]: the running total after a tile
    whose own scan is ``scanned``, given the total before it."""
    for p in range(pre):
        last = (p * n + n - 1) * post
        for q in range(post):
            carry_out[p * post + q] = carry_in[p * post + q] + scanned[last + q]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def add_carry(out, carry, pre, n, post):
    """out[p, j, q] += carry[p, q]: a tile's scan shifted by the total of the tiles before."""
    for p in range(pre):
        values = carry[p * post : (p + 1) * post]
        for j in range(n):
            row = (p * n + j) * post
            result = out[row : row + post]
            for q in range(post):
                result[q] += values[q]
