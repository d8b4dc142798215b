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
from numtile.tiletensor.codelets.narrow import bits as narrow_bits
from numtile.tiletensor.codelets.narrow import is_narrow, through_float32
from numtile.tiletensor.codelets.views import rows
from numtile.tiletensor.dtypes import is_bfloat16

# integer tiles whose values span at most this many times the tile's size are counted, not
# sorted, by ``tile_groups`` on a CPU
_COUNTED = 4
_SLICES = 4096  # up to this many groups of a counted tile are written slice by slice


def key_kind(dtype) -> int:
    """The ``opcodes.SORT_KEYS`` code of how a tile of ``dtype`` is ordered."""
    dtype = np.dtype(dtype)
    if is_bfloat16(dtype):
        return opcodes.SORT_BFLOAT16
    if dtype.kind == "f":
        return opcodes.SORT_FLOAT
    return opcodes.SORT_SIGNED if dtype.kind == "i" else opcodes.SORT_UNSIGNED


def bits(tile):
    """A tile as (rows, last axis) of unsigned integers of its width (a view)."""
    return rows(tile).view(np.dtype(f"u{tile.dtype.itemsize}"))


def _no_indices(ops, like):
    return ops.empty((tuple(like.shape)[0], 0), np.int64)


def _group(buffers):
    """(input tiles, outputs, args) of a group-sort task: ``count`` tiles, then the values
    (and indices) outputs, then (count, index_offset, descending, with_indices)."""
    *tiles, count, index_offset, descending, with_indices = buffers
    return tiles[:count], tiles[count:], index_offset, descending, with_indices


def _sort_group(ops, *buffers):
    """Sort the rows of a group of tiles (side by side along the last axis) as one run: the
    tiles are copied next to each other, then sorted by the row-sort kernel."""
    tiles, outs, index_offset, descending, with_indices = _group(buffers)
    if len(tiles) == 1:
        x = tiles[0]
    else:
        parts = [rows(t) for t in tiles]
        count, total = tuple(parts[0].shape)[0], sum(tuple(p.shape)[1] for p in parts)
        x = ops.empty((count, total), narrow_bits(tiles[0]).dtype)  # 16-bit floats: bits
        begin = 0
        for part in parts:
            width = tuple(part.shape)[1]
            ops.copy_strided(
                narrow_bits(part.reshape(-1)),
                0,
                np.array([width, 1], np.int64),
                x.reshape(-1),
                begin,
                np.array([total, 1], np.int64),
                np.array([count, width], np.int64),
            )
            begin += width
    indices = rows(outs[1]) if with_indices else _no_indices(ops, rows(x))
    kind = key_kind(tiles[0].dtype)
    ops.sort_rows(bits(x), bits(outs[0]), indices, index_offset, kind, descending)


def _odd_ties(parts, out) -> bool:
    """Whether the float rows ``out`` (sorted ascending from the rows of ``parts``) may hold
    zeros or NaNs other than a stable sort's: the only ties an unstable sort can put out of
    order, and NumPy's SIMD sort, whose min/max steps return one operand of a tie, may even
    turn a -0.0 into a +0.0 (or back) and writes NaNs back as its own NaN. Rows with -0.0 or
    any NaN in ``parts``; a single row: any zero or NaN among its (sorted, so contiguous)
    elements, no pass over the data."""
    if tuple(out.shape)[0] != 1:
        x = np.concatenate(parts, axis=1)
        return bool(np.signbit(x[x == 0]).any() or np.isnan(x).any())
    row = out[0]
    lo, hi = np.searchsorted(row, 0.0, "left"), np.searchsorted(row, 0.0, "right")
    nans = row.size - np.searchsorted(row, np.nan, "left")
    return bool(hi > lo or nans)


def _restore_ties(x, out) -> None:
    """Give the zeros and NaNs of sorted float rows ``out`` the signs and payloads they had in
    ``x``, in their original order: what a stable sort leaves (NumPy's fast sort does not)."""
    for row, sorted_row in zip(x, out):
        sorted_row[sorted_row == 0] = row[row == 0]
        sorted_row[np.isnan(sorted_row)] = row[np.isnan(row)]


def _sort_group_numpy(ops, *buffers):
    """The CPU form of ``_sort_group`` for values only: the group copied into the output and
    sorted there by NumPy's (SIMD) sort, whose only unstable ties, zeros and NaNs, are put back
    in their original order where the data has any that differ."""
    tiles, outs, index_offset, descending, with_indices = _group(buffers)
    if with_indices or is_narrow(tiles[0]):  # 16-bit floats: by their keys (NumPy's is slow)
        return _sort_group(ops, *buffers)
    parts = [rows(t) for t in tiles]
    out = rows(outs[0])
    np.concatenate(parts, axis=1, out=out)
    out.sort(axis=-1)
    odd = out.dtype.kind == "f" and _odd_ties(parts, out)
    if descending:
        out[...] = out[:, ::-1]
    if odd:
        _restore_ties(np.concatenate(parts, axis=1), out)


def _tile_groups(ops, x, out, flags):
    """A tile sorted on its own (flattened) into ``out``, and ``flags`` set where a group of
    equal values starts (element 0 always; each NaN a group of its own)."""
    values, ordered = rows(x.reshape(1, -1)), rows(out.reshape(1, -1))
    none = _no_indices(ops, values)
    ops.sort_rows(bits(values), bits(ordered), none, 0, key_kind(x.dtype), False)
    ops.group_starts(out.reshape(-1), out.reshape(-1), flags.reshape(-1), True)


def _tile_groups_numpy(ops, x, out, flags):
    """The CPU form of ``_tile_groups``: integers of a range at most a few times the tile's
    size are counted (``bincount``, no sort), the rest sorted by NumPy."""
    x, out, flags = x.reshape(-1), out.reshape(-1), flags.reshape(-1)
    if x.dtype.kind in "iu" and x.size:
        low = x.min()
        # the modular difference read unsigned (exact, as the range fits the width), in out
        # as scratch: no temporary the size of the tile
        offsets = np.subtract(x, low, out=out).view(np.dtype(f"u{x.dtype.itemsize}"))
        span = int(offsets.max()) + 1
        if span <= _COUNTED * x.size:
            counts = np.bincount(offsets, minlength=span)
            present = np.flatnonzero(counts)
            sizes = counts[present]
            ends = np.cumsum(sizes)
            values = present.astype(x.dtype) + low  # back from offsets, modular again: exact
            if present.size <= _SLICES:  # few groups: each written as one slice
                for value, begin, end in zip(values, ends - sizes, ends):
                    out[begin:end] = value
            else:
                out[...] = np.repeat(values, sizes)
            flags[...] = False
            flags[ends - sizes] = True
            return
    out[...] = np.sort(x)
    flags[0] = True
    np.not_equal(out[1:], out[:-1], out=flags[1:])


def _count_values(ops, x, counts, low):
    """``counts[v]``: how many elements of the integer tile equal ``low + v`` (every element
    lies in [low, low + counts' size))."""
    flat = x.reshape(-1).view(np.dtype(f"u{x.dtype.itemsize}"))
    ops.fill(counts, 0)
    bits = np.uint64(low % (1 << (8 * x.dtype.itemsize)))
    ops.count_values(flat, counts.reshape(-1), bits)


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


def _merge_values_cpu(ops, a, b, out, begin, descending):
    """The CPU form of ``_merge_values``: numbers of 32 and 64 bits compare as themselves
    (``ops.merge_values``, 4x faster than the merge of keys); other dtypes by their keys."""
    if not (a.dtype.kind in "iu" or (a.dtype.kind == "f" and a.dtype.itemsize >= 4)):
        return _merge_values(ops, a, b, out, begin, descending)
    a, b, out = rows(a), rows(b), rows(out)
    ops.merge_values(a, b, bits(a), bits(b), bits(out), begin, descending)


def _count_before(ops, run, needles, counts, right):
    flat = run.reshape(-1).view(np.dtype(f"u{run.dtype.itemsize}"))
    wanted = needles.reshape(-1).view(flat.dtype)
    ops.count_before(flat, wanted, counts.reshape(-1), key_kind(run.dtype), right)


@through_float32(updates=(1,))  # bfloat16 values compare as float32 (exact)
def _arg_reduce(ops, x, values, indices, pre, n, post, shape, starts, strides, find_max):
    x, values = x.reshape(-1), values.reshape(-1)
    if x.dtype == np.bool_:
        x, values = x.view(np.uint8), values.view(np.uint8)
    ops.arg_reduce(x, values, indices.reshape(-1), pre, n, post, shape, starts, strides, find_max)


def _size(shape) -> int:
    return math.prod(shape)


sort_group = Codelet(
    "sort_group",
    kernel=_sort_group,
    implementations={"cpu": _sort_group_numpy},
    flops=lambda *shapes_and_args: 8 * _size(shapes_and_args[0]),
)
merge_runs = Codelet("merge_runs", kernel=_merge_runs)
tile_groups = Codelet(
    "tile_groups", kernel=_tile_groups, implementations={"cpu": _tile_groups_numpy}
)
merge_values = Codelet(
    "merge_values", kernel=_merge_values, implementations={"cpu": _merge_values_cpu}
)
count_values = Codelet("count_values", kernel=_count_values)
count_before = Codelet("count_before", kernel=_count_before)
arg_reduce = Codelet("arg_reduce", kernel=_arg_reduce)
