"""Codelets of the statistics kernels outside the generic reductions: the streaming column
sum of float tiles (``sum`` over an axis that is not innermost) and the one-pass moments of
``var`` (count, mean and M2 of every column, merged into running float64 tiles)."""

from __future__ import annotations

import math

from numtile.runtime import Codelet


def _moments(ops, x, count, mean, m2, pre, n, post):
    flat = (t.reshape(-1) for t in (x, count, mean, m2))
    ops.moments_accumulate(*flat, pre, n, post)


def _sum_columns(ops, x, out, move_axes, pre, n, post):
    ops.sum_columns(x.reshape(-1), out.reshape(-1), pre, n, post)


# the arguments of ``reduce:sum`` (move_axes None), so a reduction picks either one
sum_columns = Codelet("reduce:sum_columns", kernel=_sum_columns, flops=lambda x, *_: math.prod(x))
moments = Codelet("moments", kernel=_moments, flops=lambda x, *_: 4 * math.prod(x))
