"""Rotary position embedding (RoPE) tile kernel, forward and backward in one.

A tile is (rows, n_heads * D) with head h in columns h*D:(h+1)*D; ``cos`` and ``sin`` are
(rows, D / 2), the angles of each row's position. As in Hugging Face's ``rotate_half``, the
first and second halves of a head are the two coordinates of each rotated pair.

>>> import numpy as np
>>> from numtile.ops_cpu import nn
>>> x = np.array([[1.0, 0.0, 0.0, 1.0]])  # one row, one head of width 4
>>> cos, sin = np.array([[0.0, 1.0]]), np.array([[1.0, 0.0]])
>>> out = np.empty_like(x)
>>> nn.rope_apply(x, cos, sin, out, 1, False)
>>> out.tolist()
[[0.0, 0.0, 1.0, 1.0]]
"""

import numba

from numtile.ops_cpu.helpers import widen


@numba.njit(nogil=True, cache=True, error_model="numpy")
def rope_apply(x, cos, sin, out, n_heads, inverse):
    """out = x rotated by each row's angles: (x1 cos - x2 sin, x2 cos + x1 sin) per head, or by
    minus the angles when ``inverse`` (the backward: the transpose of the rotation)."""
    width = x.shape[1] // n_heads
    half = width // 2
    sign = -1.0 if inverse else 1.0
    for i in range(x.shape[0]):
        for h in range(n_heads):
            first = h * width
            for j in range(half):
                c, s = widen(cos[i, j]), sign * widen(sin[i, j])
                x1, x2 = widen(x[i, first + j]), widen(x[i, first + half + j])
                out[i, first + j] = x1 * c - x2 * s
                out[i, first + half + j] = x2 * c + x1 * s
