"""Codelets of the statistics kernels outside the generic reductions: the streaming column
sum of float tiles (``sum`` over an axis that is not innermost; a chain of tiles a task) and
the one-pass moments of ``var`` (count, mean and M2 of every column, merged into running
float64 tiles; the mean held minus a shift, the first value the state took)."""

from __future__ import annotations

import math

from numtile.runtime import Codelet


def _moments(ops, x, count, shift, mean, m2, pre, n, post):
    flat = (t.reshape(-1) for t in (x, count, shift, mean, m2))
    ops.moments_accumulate(*flat, pre, n, post)


def _moments_merge(ops, count, shift, mean, m2, *other):
    """Merge the moments ``other`` (count, shift, mean, M2 tiles) into the running ones."""
    ops.moments_merge(*(t.reshape(-1) for t in (count, shift, mean, m2, *other)))


def _sum_columns(ops, x, out, move_axes, pre, n, post):
    ops.sum_columns(x.reshape(-1), out.reshape(-1), pre, n, post)


def _sum_column_chain(ops, *tiles_and_args):
    """out (+)= the column sums of tiles...; arguments: pre, post, each tile's n, first."""
    ns, first = tiles_and_args[-2:]
    count = len(ns)
    out, pre, post = tiles_and_args[count : count + 3]
    flat = out.reshape(-1)
    if first:
        ops.fill(flat, flat.dtype.type(0))
    for tile, n in zip(tiles_and_args[:count], ns):
        ops.sum_columns(tile.reshape(-1), flat, pre, n, post)


def _chain_flops(*shapes_and_args):
    count = len(shapes_and_args[-2])
    return float(sum(math.prod(s) for s in shapes_and_args[:count]))


# the arguments of ``reduce:sum`` (move_axes None), so a reduction picks either one
sum_columns = Codelet("reduce:sum_columns", kernel=_sum_columns, flops=lambda x, *_: math.prod(x))
# several tiles of one output tile's columns, summed in turn by one task
sum_column_chain = Codelet("reduce:sum_column_chain", kernel=_sum_column_chain, flops=_chain_flops)
moments = Codelet("moments", kernel=_moments, flops=lambda x, *_: 4 * math.prod(x))
# the moments of a chain of tiles merged into the running ones
moments_merge = Codelet(
    "moments_merge", kernel=_moments_merge, flops=lambda c, *_: 6 * math.prod(c)
)
