"""CUDA generated tiles: counter-based random numbers and ranges (twins of
``ops_cpu.generate``).

A random element is the same SplitMix64 hash of (seed, its global flat index) as on the CPU,
so a tensor drawn on a GPU equals the one drawn on the CPU: uniform draws bit for bit, normal
draws within float tolerance (the GPU's log and cos may differ from libm in the last ulp).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import cuda

from numtile.opcodes import UNIFORM
from numtile.ops_cuda.launch import DeviceArray, coalesce, host_ints, launch, offset1

__all__ = ["arange_fill", "random_fill"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S11, _S27, _S30, _S31 = (np.uint64(s) for s in (11, 27, 30, 31))
_ONE, _TWO = np.uint64(1), np.uint64(2)
_INV_2_53 = 1.0 / 9007199254740992.0
_MASK64 = (1 << 64) - 1
_float64 = numba.float64
_int64 = numba.int64
_uint64 = numba.uint64


@cuda.jit(device=True)
def _splitmix64(x):
    """One round of SplitMix64 (Steele, Lea, Flood 2014) on a uint64."""
    x = x + _GOLDEN
    x = (x ^ (x >> _S30)) * _MIX1
    x = (x ^ (x >> _S27)) * _MIX2
    return x ^ (x >> _S31)


@cuda.jit(device=True)
def _unit(seed, counter):
    """Uniform double in [0, 1) from (seed, counter), 53 random bits."""
    bits = _splitmix64(seed ^ _splitmix64(counter))
    return _float64(bits >> _S11) * _INV_2_53


@cuda.jit
def _random_kernel(out, shape, global_strides, base, seed, distribution, a, b, upper):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        counter = _uint64(base + offset1(i, shape, global_strides))
        if distribution == UNIFORM:
            out[i] = a + (b - a) * _unit(seed, counter)
            # a draw that rounds up to b in a narrower dtype is clamped below it
            if out[i] > upper:
                out[i] = upper
        else:
            u1 = _unit(seed, counter * _TWO)
            u2 = _unit(seed, counter * _TWO + _ONE)
            radius = math.sqrt(-2.0 * math.log(1.0 - u1))
            out[i] = a + b * radius * math.cos(2.0 * math.pi * u2)


@cuda.jit
def _arange_kernel(out, first, step):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        # out[0] is first itself: -0.0 + 0 * step would be +0.0
        out[i] = first + _int64(i) * step if i else first


def random_fill(
    out: DeviceArray,
    shape,
    start,
    global_strides,
    seed,
    distribution: int,
    a,
    b,
    upper,
    *,
    stream=0,
) -> None:
    """Fill flat ``out`` (a tile of ``shape`` at ``start``): uniform [a, b) or normal(a, b).

    ``shape``, ``start`` and ``global_strides`` are host integer arrays. ``upper`` is the
    largest value of ``out``'s dtype below ``b``; a uniform draw above it is clamped to it.
    """
    shape = host_ints(shape, "shape")
    start = host_ints(start, "start")
    global_strides = host_ints(global_strides, "global_strides")
    if out.size == 0:
        return
    base = sum(s * g for s, g in zip(start, global_strides, strict=True))
    shape, (global_strides,) = coalesce(shape, global_strides)
    seed = np.uint64(int(seed) & _MASK64)
    launch(
        _random_kernel,
        out.size,
        stream,
        out,
        shape,
        global_strides,
        base,
        seed,
        int(distribution),
        a,
        b,
        upper,
    )


def arange_fill(out: DeviceArray, first, step, *, stream=0) -> None:
    """out[i] = first + i * step (flat ``out``); out[0] is ``first`` itself (-0.0 stays)."""
    launch(_arange_kernel, out.size, stream, out, first, step)
