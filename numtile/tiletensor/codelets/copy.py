"""Codelets that move or convert tile data: fill, strided copy, dtype cast; and the
structured tiles of the array API's creation functions: band (tril, triu, eye), linspace."""

from __future__ import annotations

from numtile.runtime import Codelet
from numtile.tiletensor.codelets import narrow


def _fill(ops, out, value):
    ops.fill(narrow.bits(out.reshape(-1)), narrow.scalar_bits(value))


def _copy_strided(ops, src, dst, src_offset, src_strides, dst_offset, dst_strides, shape):
    src, dst = narrow.bits(src.reshape(-1)), narrow.bits(dst.reshape(-1))
    ops.copy_strided(src, src_offset, src_strides, dst, dst_offset, dst_strides, shape)


def _cast(ops, x, out):
    narrow.cast(ops, x.reshape(-1), out.reshape(-1))


def _cast_after(ops, x, after, out):
    narrow.cast(ops, x.reshape(-1), out.reshape(-1))


fill = Codelet("fill", kernel=_fill)
copy_strided = Codelet("copy_strided", kernel=_copy_strided)
cast = Codelet("cast", kernel=_cast)
# a cast that also reads ``after`` (unused), so it waits for that tile's writer: a copy of
# a ready tile made just before its use instead of whenever a worker is free
cast_after = Codelet("cast_after", kernel=_cast_after)


def _batched(tile):
    """A tile viewed as (batch, rows, cols): leading axes merged (tiles are C-ordered)."""
    shape = tuple(tile.shape)  # the CUDA simulator's shapes refuse negative indices
    return tile.reshape(-1, shape[-2], shape[-1])


def _band(ops, x, out, row0, col0, lower, upper):
    ops.band(_batched(x), _batched(out), row0, col0, lower, upper)


def _eye(ops, out, row0, col0, k):
    ops.fill(out.reshape(-1), out.dtype.type(1))
    matrix = _batched(out)
    ops.band(matrix, matrix, row0, col0, k, k)


def _linspace(ops, out, start, step, offset, last, stop):
    ops.linspace_fill(out.reshape(-1), start, step, offset, last, stop)


band = Codelet("band", kernel=_band)
eye = Codelet("eye", kernel=_eye)
linspace = Codelet("linspace", kernel=_linspace)
