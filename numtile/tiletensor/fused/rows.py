"""Helpers of the fused ops on activations of shape (..., features): rows and row statistics."""

from __future__ import annotations

import itertools

import numpy as np

from numtile.tiletensor.creation import fill_tiles
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor


def lead_indices(x: TileTensor):
    """Tile indices over every axis but the last."""
    return itertools.product(*(range(g) for g in x.grid[:-1]))


def row_stats(x: TileTensor, fill=0.0) -> TileTensor:
    """A float64 tensor with one value per row of ``x`` (its last axis dropped), filled."""
    out = TileTensor(Layout(x.shape[:-1], x.tile_shape[:-1]), np.float64)
    fill_tiles(out, fill)
    return out


def match_last_tile(x: TileTensor, tile: int) -> TileTensor:
    """``x`` with tiles of ``tile`` along its last axis (retiled only if they differ)."""
    if x.tile_shape[-1] == tile:
        return x
    return retile(x, x.tile_shape[:-1] + (tile,))
