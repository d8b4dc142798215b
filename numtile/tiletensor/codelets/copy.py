"""Codelets that move or convert tile data: fill, strided copy, dtype cast."""

from __future__ import annotations

from numtile.runtime import Codelet


def _fill(ops, out, value):
    ops.fill(out.reshape(-1), value)


def _copy_strided(ops, src, dst, src_offset, src_strides, dst_offset, dst_strides, shape):
    ops.copy_strided(
        src.reshape(-1), src_offset, src_strides, dst.reshape(-1), dst_offset, dst_strides, shape
    )


def _cast(ops, x, out):
    ops.cast(x.reshape(-1), out.reshape(-1))


fill = Codelet("fill", kernel=_fill)
copy_strided = Codelet("copy_strided", kernel=_copy_strided)
cast = Codelet("cast", kernel=_cast)
