"""``x[mask]`` for a mask of x's shape whose tiles cut an axis after the first: the selected
elements of each tile compacted where the tile lies, then put in C order.

In C order such a tile is not one run of the output but one per line (its index along the
axes before ``a``, the last axis cut into several tiles): a line's selected elements follow
those of the same line in the tiles before it along ``a``. So: a count of every line of every
tile (a sum along the line, waited for), the offset of every line in the output (a cumulative
sum over x's lines and the tiles along ``a``), each tile's selected elements compacted into a
buffer of their exact size (the one pass over x), and each output tile copied from the runs of
the buffers that fall into it. No copy of x is retiled, and every task writes tiles of its own.
"""

from __future__ import annotations

import math

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import zeros
from numtile.tiletensor.dtypes import int64
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

R, W, RW = Access.R, Access.W, Access.RW


def last_cut_axis(layout: Layout) -> int:
    """The last axis cut into several tiles (0 when none is)."""
    return max((axis for axis, g in enumerate(layout.grid) if g > 1), default=0)


def _line_counts(x: TileTensor, mask: TileTensor, axis: int) -> list[np.ndarray]:
    """The number of selected elements of every line of every tile (waits for them)."""
    layout, trailing = x.layout, math.prod(x.shape[axis + 1 :])
    shapes = [layout.tile_shape_at(index) for index in layout.indices()]
    lines = [math.prod(shape[:axis]) for shape in shapes]
    widest = max(lines)
    counts = zeros((len(lines), widest), int64, tile_shape=(1, widest))
    runtime = get_runtime()
    for t, (shape, flags) in enumerate(zip(shapes, mask.handles)):
        plan = (None, lines[t], shape[axis] * trailing, 1)
        accesses = [(flags, R), (counts.handles[t], RW)]
        runtime.submit(codelets.reduction.reduce["sum"], accesses, plan)
    table = counts.to_numpy()
    return [table[t, :count] for t, count in enumerate(lines)]


def _runs_in(lo: int, hi: int, starts, counts, sources):
    """The runs of a tile's lines (output ``starts``, ``counts``, buffer positions ``sources``)
    that fall into the output tile [lo, hi): (buffer starts, starts in the tile, lengths)."""
    first = np.searchsorted(starts + counts, lo, "right")
    last = np.searchsorted(starts, hi, "left")
    begin = np.maximum(starts[first:last], lo)
    end = np.minimum(starts[first:last] + counts[first:last], hi)
    kept = end > begin
    skipped = begin - starts[first:last]
    return (sources[first:last] + skipped)[kept], (begin - lo)[kept], (end - begin)[kept]


def masked_by_lines(x: TileTensor, mask: TileTensor) -> TileTensor:
    """x's elements where ``mask`` (of x's shape and tiles) is True, in C order (1-D)."""
    layout, axis = x.layout, last_cut_axis(x.layout)
    per_line = _line_counts(x, mask, axis)
    # every line's count in C order over (x's lines, tiles along the axis): its output offset
    table = np.zeros((*x.shape[:axis], layout.grid[axis]), np.int64)
    places = []
    for index, counts in zip(layout.indices(), per_line):
        bounds = layout.tile_bounds(index)[:axis]
        place = (*(slice(lo, hi) for lo, hi in bounds), index[axis])
        table[place] = counts.reshape([hi - lo for lo, hi in bounds])
        places.append(place)
    flat = table.reshape(-1)
    offsets = (np.cumsum(flat) - flat).reshape(table.shape)
    runtime = get_runtime()
    tiles = []  # (buffer handle, line starts in the output, counts, starts in the buffer)
    for t, counts in enumerate(per_line):
        size = int(counts.sum())
        if size == 0:
            continue
        buffer = TileTensor(Layout((size,), (size,)), x.dtype).handles[0]
        accesses = [(x.handles[t], R), (mask.handles[t], R), (buffer, W)]
        runtime.submit(codelets.indexing.compact, accesses, (0, 0, size))
        tiles.append((buffer, offsets[places[t]].reshape(-1), counts, np.cumsum(counts) - counts))
    out = TileTensor(Layout((int(flat.sum()),)), x.dtype)
    # each output tile's pieces, from the output tiles each buffer's span [first line's start,
    # last line's end) meets
    pieces = [[(handle, W)] for handle in out.handles]
    runs = [[] for _ in out.handles]
    edge = out.tile_shape[0]
    for buffer, starts, counts, sources in tiles:
        for j in range(starts[0] // edge, -(-(starts[-1] + counts[-1]) // edge)):
            lo, hi = out.layout.tile_bounds((j,))[0]
            piece = _runs_in(lo, hi, starts, counts, sources)
            if piece[2].size:
                pieces[j].append((buffer, R))
                runs[j].append(piece)
    for accesses, piece_runs in zip(pieces, runs):
        runtime.submit(codelets.indexing.copy_runs, accesses, (tuple(piece_runs),))
    return out
