"""Codelets of the value-split (sample) sort of a long 1-D tensor, CPU only (a GPU runs the
merge sort of ``sorting.py``): a stable partition of a tile into buckets of value ranges, the
sort of one bucket gathered from every tile's part, and the copy of sorted buckets into an
output tile."""

from __future__ import annotations

import numpy as np

from numtile.runtime import Codelet
from numtile.tiletensor.codelets.sorting import key_kind


def _as_bits(array):
    return array.reshape(-1).view(np.dtype(f"u{array.dtype.itemsize}"))


def _split_tile(ops, x, part, counts, splitters):
    """``part``: the tile's elements grouped by bucket (stable), ``counts`` per bucket."""
    bits = splitters.view(np.dtype(f"u{x.dtype.itemsize}"))
    ops.split_by_keys(_as_bits(x), bits, _as_bits(part), counts.reshape(-1), key_kind(x.dtype))


def _sort_bucket(ops, *buffers):
    """One bucket: its pieces of the tiles' parts (``begins``/``lengths`` per part, in tile
    order) gathered, sorted by NumPy's (SIMD) sort, reversed when ``descending``, and zeros and
    NaNs given back their order (what a stable sort keeps)."""
    *parts, out, begins, lengths, descending = buffers
    out = out.reshape(-1)
    pieces = [p.reshape(-1)[b : b + n] for p, b, n in zip(parts, begins, lengths)]
    np.concatenate(pieces, out=out)
    out.sort()
    if out.dtype.kind == "f":  # NaNs last: NumPy's sort writes them back as its own NaN
        nans = out.size - np.searchsorted(out, np.nan, "left")
        lo, hi = np.searchsorted(out, 0.0, "left"), np.searchsorted(out, 0.0, "right")
        zeros = np.signbit(out[lo:hi]).any() and not np.signbit(out[lo:hi]).all()
    if descending:
        out[...] = out[::-1]
    if out.dtype.kind == "f" and (nans or zeros):  # their order: the one the pieces came in
        gathered = np.concatenate(pieces)
        if zeros:
            out[out == 0] = gathered[gathered == 0]
        if nans:
            out[np.isnan(out)] = gathered[np.isnan(gathered)]


def _place_buckets(ops, *buffers):
    """Pieces of sorted buckets copied into an output tile: bucket k's elements from
    ``sources[k]`` to the tile's ``targets[k]``, ``lengths[k]`` of them."""
    *buckets, out, sources, targets, lengths = buffers
    out = out.reshape(-1)
    for bucket, s, t, n in zip(buckets, sources, targets, lengths):
        out[t : t + n] = bucket.reshape(-1)[s : s + n]


split_tile = Codelet("split_tile", implementations={"cpu": _split_tile})
sort_bucket = Codelet("sort_bucket", implementations={"cpu": _sort_bucket})
place_buckets = Codelet("place_buckets", implementations={"cpu": _place_buckets})
