"""Tile kernels of the vector products: ``cross`` of 3-element vectors.

>>> import numpy as np
>>> from numtile.ops_cpu import products
>>> a, b, out = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]), np.empty(3)
>>> products.cross(a, b, out, 1)
>>> out.tolist()
[0.0, 0.0, 1.0]
"""

import numba


@numba.njit(nogil=True, cache=True, error_model="numpy")
def cross(a, b, out, post):
    """out = a x b for flat tiles read as (pre, 3, post) arrays: the vectors run along the
    middle axis, ``post`` elements apart."""
    for i in range(out.size // 3):
        start = (i // post) * 3 * post + i % post
        a0, a1, a2 = a[start], a[start + post], a[start + 2 * post]
        b0, b1, b2 = b[start], b[start + post], b[start + 2 * post]
        out[start] = a1 * b2 - a2 * b1
        out[start + post] = a2 * b0 - a0 * b2
        out[start + 2 * post] = a0 * b1 - a1 * b0
