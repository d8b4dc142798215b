"""CUDA twin of ``ops_cpu.masks``: a value assigned through a boolean mask is ``where`` with
the output as its kept operand (each thread reads and writes its own element)."""

from __future__ import annotations

import numpy as np

from numtile.ops_cuda.launch import DeviceArray, host_ints
from numtile.ops_cuda.logic import where

__all__ = ["assign_where"]


def assign_where(
    condition, c_strides, value, value_strides, out: DeviceArray, shape, *, stream=0
) -> None:
    """out = value where condition, out elsewhere (broadcast over ``shape``)."""
    extents = host_ints(shape, "shape")
    strides = np.ones(len(extents), np.int64)
    for axis in range(len(extents) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * extents[axis + 1]
    where(condition, c_strides, value, value_strides, out, strides, out, shape, stream=stream)
