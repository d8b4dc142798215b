"""How the fused kernels view a tile: as (rows, last axis) or flat (views, never copies)."""

from __future__ import annotations


def rows(tile):
    """A tile viewed as (rows, last axis): leading axes merged (tiles are C-ordered)."""
    # tuple(): the CUDA simulator's shapes refuse negative indices, like device code
    return tile.reshape(-1, tuple(tile.shape)[-1]) if tile.ndim != 2 else tile


def flat(tile):
    """A tile viewed as one axis."""
    return tile.reshape(-1)
