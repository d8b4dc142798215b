"""``redistribute``: a tensor's tiles to other owner ranks (and another tiling), under MPI."""

from __future__ import annotations

from numtile.runtime import Access, get_runtime
from numtile.runtime.distributed.distribution import as_distribution
from numtile.tiletensor import placement
from numtile.tiletensor.codelets.copy import cast
from numtile.tiletensor.creation import tile_owners
from numtile.tiletensor.dispatch import PLAIN, dispatched
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W


@dispatched(public="numtile.redistribute")
def redistribute(x: TileTensor, distribution, tile_shape=None) -> TileTensor:
    """``x`` with its tiles owned as ``distribution`` says (and retiled to ``tile_shape``).

    Each new tile is written by a copy task on its new owner, reading the tiles of ``x`` it
    overlaps (the runtime moves those that live elsewhere). The gradient flows back to
    ``x``'s own distribution and tiling.

    >>> import numtile as nt, numpy as np
    >>> x = nt.from_numpy(np.arange(6.0).reshape(2, 3), tile_shape=(1, 2))
    >>> y = nt.redistribute(x, nt.distribution.by_axis(0), tile_shape=(2, 2))
    >>> y.tile_shape, y.to_numpy().tolist()
    ((2, 2), [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    """
    distribution = as_distribution(distribution)
    layout = x.layout if tile_shape is None else Layout(x.shape, tile_shape)
    tile_owners(layout, distribution)  # a rank that does not exist: ValueError, before any task
    with placement.placing(distribution):  # the plain retile: its dispatch would place by x's
        out = _copy(x) if layout == x.layout else PLAIN["retile"](x, tile_shape)
    out.distribution = distribution
    return out


def _copy(x):
    """A copy of ``x`` (its new tiles take the distribution being placed)."""
    out = TileTensor(x.layout, x.dtype)
    runtime = get_runtime()
    for source, target in zip(x.handles, out.handles):
        runtime.submit(cast, [(source, R), (target, W)])
    return out
