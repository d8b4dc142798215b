"""CUDA kernels of the vector products: ``cross`` (twin of ``numtile.ops_cpu.products``)."""

from __future__ import annotations

from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, launch

__all__ = ["cross"]


@cuda.jit
def _cross_kernel(a, b, out, post):
    for i in range(cuda.grid(1), out.size // 3, cuda.gridsize(1)):
        start = (i // post) * 3 * post + i % post
        a0, a1, a2 = a[start], a[start + post], a[start + 2 * post]
        b0, b1, b2 = b[start], b[start + post], b[start + 2 * post]
        out[start] = a1 * b2 - a2 * b1
        out[start + post] = a2 * b0 - a0 * b2
        out[start + 2 * post] = a0 * b1 - a1 * b0


def cross(a: DeviceArray, b: DeviceArray, out: DeviceArray, post, *, stream=0) -> None:
    """out = a x b for flat tiles read as (pre, 3, post) arrays (vectors ``post`` apart)."""
    launch(_cross_kernel, out.size // 3, stream, a, b, out, int(post))
