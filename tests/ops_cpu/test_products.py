"""Tests for numtile/ops_cpu/products.py and its CUDA twin: ``cross`` of (pre, 3, post) tiles
against NumPy, on both backends (the CUDA run is also checked against the CPU twin)."""

import numpy as np
import pytest

from tests.kernels import random


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128, np.int64])
@pytest.mark.parametrize("pre, post", [(1, 1), (4, 1), (2, 5), (3, 7)])
def test_cross_matches_numpy(backend, dtype, pre, post):
    a = random((pre, 3, post), np.float64, 1)
    b = random((pre, 3, post), np.float64, 2)
    if np.dtype(dtype).kind == "c":
        a, b = a + 1j * b, b - 0.5j * a
    a, b = (np.round(4 * v) if np.dtype(dtype).kind == "i" else v for v in (a, b))
    a, b = a.astype(dtype), b.astype(dtype)
    out = np.zeros_like(a)
    backend.run("cross", a.reshape(-1), b.reshape(-1), out.reshape(-1), post)
    np.testing.assert_allclose(out, np.cross(a, b, axis=1), rtol=1e-6)
