"""Codelets of the tiled scan of ``cumulative_sum`` (tiles viewed as (pre, n, post) around the
scanned axis): the first tile's own scan, the carries between tiles (running totals of the
tiles' sums, which ``reduce:sum`` makes), and the scan of every later tile from its carry."""

from __future__ import annotations

import math

from numtile.runtime import Codelet


def _size(shape) -> int:
    return math.prod(shape)


def _cumulative_sum(ops, x, out, pre, n, post):
    ops.cumulative_sum(x.reshape(-1), out.reshape(-1), pre, n, post)


def _cumulative_sum_from(ops, x, carry, out, pre, n, post):
    ops.cumulative_sum_from(x.reshape(-1), carry.reshape(-1), out.reshape(-1), pre, n, post)


def _scan_carry(ops, total, carry_in, carry_out, pre, n, post):
    ops.scan_carry(total.reshape(-1), carry_in.reshape(-1), carry_out.reshape(-1), pre, n, post)


cumulative_sum = Codelet(
    "cumulative_sum", kernel=_cumulative_sum, flops=lambda x, out, *_: _size(x)
)
cumulative_sum_from = Codelet(
    "cumulative_sum_from", kernel=_cumulative_sum_from, flops=lambda x, *_: _size(x)
)
scan_carry = Codelet("scan_carry", kernel=_scan_carry)
