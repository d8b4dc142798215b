"""Embedding lookups: rows of a (vocabulary, features) table picked by int64 ids, and back."""

from __future__ import annotations

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import zeros
from numtile.tiletensor.fused.rows import lead_indices, match_last_tile
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

R, ACC = Access.R, Access.ACCUMULATE


def _with_feature_axis(ids: TileTensor) -> TileTensor:
    """A stand-in whose leading grid is the grid of ``ids`` (for ``lead_indices``)."""
    return TileTensor(Layout(ids.shape + (1,), ids.tile_shape + (1,)), ids.dtype, ids.handles)


def embedding_forward(table: TileTensor, ids: TileTensor) -> TileTensor:
    """``table[ids[...], :]`` for integer ``ids`` of any shape; the table is tiled on both axes.

    >>> import numtile as nt, numpy as np
    >>> table = nt.from_numpy(np.arange(8.0).reshape(4, 2), tile_shape=(3, 1))
    >>> embedding_forward(table, nt.from_numpy(np.array([3, 0]))).to_numpy().tolist()
    [[6.0, 7.0], [0.0, 1.0]]
    """
    out = zeros(ids.shape + (table.shape[1],), table.dtype, ids.tile_shape + (table.tile_shape[1],))
    runtime = get_runtime()
    for lead in lead_indices(_with_feature_axis(ids)):
        for v in range(table.grid[0]):
            v_start = table.layout.starts[0][v]
            for c in range(table.grid[1]):
                runtime.submit(
                    codelets.nn.embedding_gather,
                    [(ids.tile(lead), R), (table.tile((v, c)), R), (out.tile(lead + (c,)), ACC)],
                    (v_start,),
                )
    return out


def embedding_backward(
    ids: TileTensor, grad: TileTensor, table_layout: Layout, into: TileTensor | None = None
) -> TileTensor:
    """The table's gradient: each row of ``grad`` added to the table row its id picked;
    added into ``into`` (a tensor of ``table_layout`` and ``grad``'s dtype) when given."""
    grad = match_last_tile(grad, table_layout.tile_shape[1])
    if into is None:
        out = zeros(table_layout.shape, grad.dtype, table_layout.tile_shape)
    else:
        assert into.layout == table_layout and into.dtype == grad.dtype
        out = into
    runtime = get_runtime()
    for lead in lead_indices(_with_feature_axis(ids)):
        for v in range(table_layout.grid[0]):
            for c in range(table_layout.grid[1]):
                runtime.submit(
                    codelets.nn.embedding_scatter,
                    [(ids.tile(lead), R), (grad.tile(lead + (c,)), R), (out.tile((v, c)), ACC)],
                    (table_layout.starts[0][v],),
                )
    return out
