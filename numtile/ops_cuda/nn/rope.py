"""Rotary position embedding CUDA kernel (twin of ``numtile.ops_cpu.nn.rope``): one thread per
rotated pair (row, head, j), in float64."""

from __future__ import annotations

from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, cached_kernel, launch


@cached_kernel
def _rope(x, cos, sin, out, n_heads, half, sign):
    pairs = n_heads * half
    for t in range(cuda.grid(1), x.shape[0] * pairs, cuda.gridsize(1)):
        i = t // pairs
        rest = t - i * pairs
        h = rest // half
        j = rest - h * half
        first = h * 2 * half
        c, s = float(cos[i, j]), sign * float(sin[i, j])
        x1, x2 = float(x[i, first + j]), float(x[i, first + half + j])
        out[i, first + j] = x1 * c - x2 * s
        out[i, first + half + j] = x2 * c + x1 * s


def rope_apply(
    x: DeviceArray,
    cos: DeviceArray,
    sin: DeviceArray,
    out: DeviceArray,
    n_heads: int,
    inverse: bool,
    *,
    stream=0,
) -> None:
    """out = x rotated by each row's angles (by minus them when ``inverse``)."""
    half = x.shape[1] // n_heads // 2
    sign = -1.0 if inverse else 1.0
    launch(_rope, x.shape[0] * n_heads * half, stream, x, cos, sin, out, int(n_heads), half, sign)
