"""Generated tiles: counter-based random numbers and ranges.

A random element is a hash of (seed, its global index), so a random tensor is the same
whatever its tiling and whichever worker fills a tile.
"""

import numpy as np
from numba import njit

from numtile.opcodes import (
    UNIFORM,
)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, inline="always")
def _splitmix64(x):
    """One round of SplitMix64 (Steele, Lea, Flood 2014) on a uint64."""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, inline="always")
def _unit(seed, counter):
    """Uniform double in [0, 1) from (seed, counter), 53 random bits."""
    bits = _splitmix64(seed ^ _splitmix64(counter))
    return np.float64(bits >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(nogil=True, cache=True)
def random_fill(out, shape, start, global_strides, seed, distribution, a, b, upper):
    """Fill flat ``out`` (a tile of ``shape`` at ``start``): uniform [a, b) or normal(a, b).

    ``upper`` is the largest value of ``out``'s dtype below ``b``: a uniform draw that
    rounds up to ``b`` in a narrower dtype is clamped to it, keeping the interval half-open.
    """
    ndim = shape.shape[0]
    index = np.zeros(ndim, np.int64)
    seed = np.uint64(seed)
    base = 0
    for axis in range(ndim):
        base += start[axis] * global_strides[axis]
    flat = base
    for i in range(out.shape[0]):
        counter = np.uint64(flat)
        if distribution == UNIFORM:
            out[i] = a + (b - a) * _unit(seed, counter)
            if out[i] > upper:
                out[i] = upper
        else:
            u1 = _unit(seed, counter * np.uint64(2))
            u2 = _unit(seed, counter * np.uint64(2) + np.uint64(1))
            radius = np.sqrt(-2.0 * np.log(1.0 - u1))
            out[i] = a + b * radius * np.cos(2.0 * np.pi * u2)
        # advance the N-d index within the tile, keeping the global flat index in step
        axis = ndim - 1
        while axis >= 0:
            index[axis] += 1
            flat += global_strides[axis]
            if index[axis] < shape[axis]:
                break
            flat -= index[axis] * global_strides[axis]
            index[axis] = 0
            axis -= 1


@njit(nogil=True, cache=True)
def arange_fill(out, first, step):
    """out[i] = first + i * step (flat ``out``); out[0] is ``first`` itself (-0.0 stays)."""
    for i in range(out.shape[0]):
        out[i] = first + i * step
    if out.shape[0]:
        out[0] = first  # -0.0 + 0 * step would be +0.0
