"""Codelets of the value-split (sample) sort of a long 1-D tensor, CPU only (a GPU runs the
merge sort of ``sorting.py``): a stable partition of a tile into buckets of value ranges (with
the elements' positions for an argsort), the sort or argsort of one bucket gathered from every
tile's part, and the copy of sorted buckets into an output tile."""

from __future__ import annotations

import numpy as np

from numtile.runtime import Codelet
from numtile.tiletensor.codelets.sorting import key_kind

PER_BUCKET = 64  # sample elements per bucket
SUB_BUCKET = 1 << 16  # elements of the pieces an argsort bucket is sorted in (tests lower it)
_MANY_TIES = 16  # stable_order runs NumPy's stable argsort when over 1 in this many elements tie


def _as_bits(array):
    return array.reshape(-1).view(np.dtype(f"u{array.dtype.itemsize}"))


def _split_tile(ops, x, *buffers):
    """``part``: the tile's elements grouped by bucket (stable), ``counts`` per bucket, and
    when given ``positions``: where each came from (global indices, from ``index_offset``)."""
    *outs, counts, splitters, index_offset = buffers
    part, positions = outs if len(outs) == 2 else (outs[0], np.empty(0, np.int64))
    bits = splitters.view(np.dtype(f"u{x.dtype.itemsize}"))
    ops.split_by_keys(
        _as_bits(x),
        bits,
        _as_bits(part),
        positions.reshape(-1),
        index_offset,
        counts.reshape(-1),
        key_kind(x.dtype),
    )


def quantile_splitters(sample: np.ndarray, buckets: int) -> np.ndarray:
    """``buckets - 1`` split points at the quantiles of the sorted ``sample``."""
    return np.ascontiguousarray(sample[np.arange(1, buckets) * sample.size // buckets])


def _pieces(parts, begins, lengths):
    return [p.reshape(-1)[b : b + n] for p, b, n in zip(parts, begins, lengths)]


def _sort_bucket(ops, *buffers):
    """One bucket: its pieces of the tiles' parts (``begins``/``lengths`` per part, in tile
    order) gathered, sorted by NumPy's (SIMD) sort, reversed when ``descending``, and zeros and
    NaNs given back their order (what a stable sort keeps)."""
    *parts, out, begins, lengths, descending = buffers
    out = out.reshape(-1)
    pieces = _pieces(parts, begins, lengths)
    np.concatenate(pieces, out=out)
    out.sort()
    if out.dtype.kind == "f":  # NaNs last: NumPy's sort writes them back as its own NaN
        nans = out.size - np.searchsorted(out, np.nan, "left")
        # its min/max steps may turn a -0.0 into +0.0 (or back): any zeros are put back
        zeros = np.searchsorted(out, 0.0, "right") > np.searchsorted(out, 0.0, "left")
    if descending:
        out[...] = out[::-1]
    if out.dtype.kind == "f" and (nans or zeros):  # their order: the one the pieces came in
        gathered = np.concatenate(pieces)
        if zeros:
            out[out == 0] = gathered[gathered == 0]
        if nans:
            out[np.isnan(out)] = gathered[np.isnan(gathered)]


def stable_order(values, order, descending: bool) -> np.ndarray:
    """The stable (ascending, or descending with equal elements in their original order)
    sorting order of ``values`` from ``order``, an unstable ascending one (NumPy's: NaNs last):
    reversed when ``descending``, then each run of equal elements (NaNs equal to each other,
    -0.0 to +0.0) put in increasing position; where ties are many, NumPy's stable argsort of
    ``values`` instead. ``order`` may be reordered in place."""
    # reversed as a copy: a gather by a reversed view takes NumPy's slow path (4x slower)
    order = np.ascontiguousarray(order[::-1]) if descending else order
    ordered = values[order]
    tied = ordered[1:] == ordered[:-1]
    if ordered.dtype.kind == "f":
        nans = np.isnan(ordered)
        tied |= nans[1:] & nans[:-1]
    ties = np.count_nonzero(tied)
    if not ties:
        return order
    if ties > order.size // _MANY_TIES:  # NumPy's stable argsort then takes less time
        if descending:  # equal elements in their order: the stable sort of the reversed
            return np.ascontiguousarray(
                values.size - 1 - np.argsort(values[::-1], kind="stable")[::-1]
            )
        return np.argsort(values, kind="stable")
    in_run = np.zeros(order.size, np.bool_)
    in_run[1:] = tied
    in_run[:-1] |= tied
    members = np.flatnonzero(in_run)
    runs = np.zeros(order.size, np.int64)  # the run of equal elements each one is in
    np.cumsum(~tied, out=runs[1:])
    tied_order = order[members]
    order[members] = tied_order[np.lexsort((tied_order, runs[members]))]
    return order


def _argsort_bucket(ops, *buffers):
    """One bucket of an argsort: its pieces of the tiles' parts and of their positions
    gathered, partitioned again by value into pieces of about ``SUB_BUCKET`` elements (their
    argsorts and gathers then work in a core's cache), each ordered by NumPy's (SIMD, unstable)
    argsort made stable (``stable_order``); the bucket's positions in that order, and its
    values (when a values output is given). Equal elements share a piece: the partition puts
    them in one (ties with a split point too), in their order."""
    *handles, begins, lengths, descending = buffers
    count = len(begins)
    parts, positions, outs = handles[:count], handles[count : 2 * count], handles[2 * count :]
    values = np.concatenate(_pieces(parts, begins, lengths))
    where = np.concatenate(_pieces(positions, begins, lengths))
    out_positions = outs[-1].reshape(-1)
    out_values = outs[0].reshape(-1) if len(outs) == 2 else None
    n = values.size
    pieces = min(64, -(-n // SUB_BUCKET))
    sample = np.sort(values[np.random.default_rng(n).integers(0, n, PER_BUCKET * pieces)])
    splitters = quantile_splitters(sample, pieces)
    grouped, local = np.empty_like(values), np.empty(n, np.int64)
    counts = np.empty(pieces, np.int64)
    bits = np.dtype(f"u{values.itemsize}")
    kind = key_kind(values.dtype)
    ops.split_by_keys(
        values.view(bits), splitters.view(bits), grouped.view(bits), local, 0, counts, kind
    )
    begin = 0
    for size in counts:
        piece = grouped[begin : begin + size]
        order = stable_order(piece, np.argsort(piece), descending)
        at = slice(n - begin - size, n - begin) if descending else slice(begin, begin + size)
        np.take(where, local[begin : begin + size][order], out=out_positions[at])
        if out_values is not None:
            np.take(piece, order, out=out_values[at])
        begin += size


def _place_buckets(ops, *buffers):
    """Pieces of sorted buckets copied into an output tile: bucket k's elements from
    ``sources[k]`` to the tile's ``targets[k]``, ``lengths[k]`` of them."""
    *buckets, out, sources, targets, lengths = buffers
    out = out.reshape(-1)
    for bucket, s, t, n in zip(buckets, sources, targets, lengths):
        out[t : t + n] = bucket.reshape(-1)[s : s + n]


split_tile = Codelet("split_tile", implementations={"cpu": _split_tile})
sort_bucket = Codelet("sort_bucket", implementations={"cpu": _sort_bucket})
argsort_bucket = Codelet("argsort_bucket", implementations={"cpu": _argsort_bucket})
place_buckets = Codelet("place_buckets", implementations={"cpu": _place_buckets})
