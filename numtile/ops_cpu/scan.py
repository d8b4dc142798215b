"""Scan kernels of ``cumulative_sum`` along the middle axis of a flat array viewed as
(pre, n, post): the inclusive sum within one tile, the carries between tiles, and the scan
of a tile that starts from its carry.

A tiled scan reduces then scans: every tile's total at once (a plain ``reduce:sum``, read
only), a chain of small ``scan_carry`` tasks (the running total entering each tile along the
axis), then every tile scanned from its carry at once (``cumulative_sum_from``): two reads
and one write of the data, where scanning first and adding the carries after wrote it twice.
"""

import numba


@numba.njit(nogil=True, cache=True, error_model="numpy")
def cumulative_sum(x, out, pre, n, post):
    """out[p, j, q] = sum over k <= j of x[p, k, q], in out's dtype (x has it too)."""
    for p in range(pre):
        base = p * n * post
        if post == 1:
            # the first sum is x[0] itself (a -0.0 stays -0.0, as successive adds give)
            total = x[base] if n > 0 else out.dtype.type(0)
            for j in range(n):
                if j:
                    total += x[base + j]
                out[base + j] = total
            continue
        if n > 0:
            out[base : base + post] = x[base : base + post]
        _scan_rows(x, out, base, n, post)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def cumulative_sum_from(x, carry, out, pre, n, post):
    """out[p, j, q] = carry[p, q] + sum over k <= j of x[p, k, q]: the scan of a tile whose
    tiles before along the axis sum to ``carry``."""
    for p in range(pre):
        base = p * n * post
        if post == 1:
            total = carry[p]
            for j in range(n):
                total += x[base + j]
                out[base + j] = total
            continue
        if n > 0:
            first, start = out[base : base + post], carry[p * post : (p + 1) * post]
            values = x[base : base + post]
            for q in range(post):
                first[q] = start[q] + values[q]
        _scan_rows(x, out, base, n, post)


@numba.njit(nogil=True, error_model="numpy")
def _scan_rows(x, out, base, n, post):
    """Rows 1..n-1 of one (n, post) block at ``base``: out[j] = out[j - 1] + x[j]."""
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
    whose own scan (or, with n = 1, whose total) is ``scanned``, given the total before it."""
    for p in range(pre):
        last = (p * n + n - 1) * post
        for q in range(post):
            carry_out[p * post + q] = carry_in[p * post + q] + scanned[last + q]
