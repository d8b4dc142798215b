"""Codelets of the statistics beyond the plain reductions: the one-pass moments of ``var``
(count, mean and M2 of every column, merged into running float64 tiles)."""

from __future__ import annotations

import math

from numtile.runtime import Codelet


def _moments(ops, x, count, mean, m2, pre, n, post):
    flat = (t.reshape(-1) for t in (x, count, mean, m2))
    ops.moments_accumulate(*flat, pre, n, post)


moments = Codelet("moments", kernel=_moments, flops=lambda x, *_: 4 * math.prod(x))
