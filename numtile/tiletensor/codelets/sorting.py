"""Codelets of sorting and searching: sorted runs per tile, stable merges of runs, binary
searches into sorted tiles, and argmax/argmin partials.

The sort, merge and search kernels get tiles as unsigned integers of their width with the
dtype's key kind (``opcodes.SORT_KEYS``): four compiled kernels serve every real dtype.
"""

from __future__ import annotations

import math

import numpy as np

from numtile import opcodes
from numtile.runtime import Codelet
from numtile.tiletensor.codelets.views import rows


def key_kind(dtype) -> int:
    """The ``opcodes.SORT_KEYS`` code of how a tile of ``dtype`` is ordered."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return opcodes.SORT_FLOAT
    return opcodes.SORT_SIGNED if dtype.kind == "i" else opcodes.SORT_UNSIGNED


def bits(tile):
    """A tile as (rows, last axis) of unsigned integers of its width (a view)."""
    return rows(tile).view(np.dtype(f"u{tile.dtype.itemsize}"))


def _no_indices(ops, like):
    return ops.empty((tuple(like.shape)[0], 0), np.int64)


def _sort_runs(ops, x, values, indices, index_offset, descending):
    kind = key_kind(x.dtype)
    ops.sort_rows(bits(x), bits(values), rows(indices), index_offset, kind, descending)


def _sort_values(ops, x, values, descending):
    x = bits(x)
    ops.sort_rows(x, bits(values), _no_indices(ops, x), 0, key_kind(values.dtype), descending)


def _merge_runs(ops, a, a_indices, b, b_indices, out, out_indices, begin, descending):
    kind = key_kind(a.dtype)
    a_indices, b_indices, out_indices = rows(a_indices), rows(b_indices), rows(out_indices)
    ops.merge_runs(
        bits(a), a_indices, bits(b), b_indices, bits(out), out_indices, begin, kind, descending
    )


def _merge_values(ops, a, b, out, begin, descending):
    kind = key_kind(a.dtype)
    a, b, out = bits(a), bits(b), bits(out)
    none = _no_indices(ops, a)
    ops.merge_runs(a, none, b, none, out, _no_indices(ops, out), begin, kind, descending)


def _count_before(ops, run, needles, counts, right):
    flat = run.reshape(-1).view(np.dtype(f"u{run.dtype.itemsize}"))
    wanted = needles.reshape(-1).view(flat.dtype)
    ops.count_before(flat, wanted, counts.reshape(-1), key_kind(run.dtype), right)


def _arg_reduce(ops, x, values, indices, pre, n, post, shape, starts, strides, find_max):
    x, values = x.reshape(-1), values.reshape(-1)
    if x.dtype == np.bool_:
        x, values = x.view(np.uint8), values.view(np.uint8)
    ops.arg_reduce(x, values, indices.reshape(-1), pre, n, post, shape, starts, strides, find_max)


def _size(shape) -> int:
    return math.prod(shape)


sort_runs = Codelet("sort:runs", kernel=_sort_runs, flops=lambda x, *_: 8 * _size(x))
sort_values = Codelet("sort:values", kernel=_sort_values, flops=lambda x, *_: 8 * _size(x))
merge_runs = Codelet("sort:merge_runs", kernel=_merge_runs)
merge_values = Codelet("sort:merge_values", kernel=_merge_values)
count_before = Codelet("searchsorted", kernel=_count_before)
arg_reduce = Codelet("arg_reduce", kernel=_arg_reduce)
