"""Cross-entropy CUDA kernels over vocabulary tiles (twins of ``numtile.ops_cpu.nn.loss``).

Row statistics are 1-D float64 arrays accumulated across vocabulary tiles: one thread per row
for the running log-sum-exp and the target pick, one per element for the gradient. Logits may
be float32, float64 or bfloat16 bits (uint16, widened as they are read), and a uint16 gradient
tile is written as bfloat16 bits rounded to nearest even, as on the CPU.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numba import cuda

from numtile.ops_cuda.bf16_kernels import _as_is, _rounded, _widened
from numtile.ops_cuda.launch import DeviceArray, block, cached_kernel, device_function, grid, launch
from numtile.ops_cuda.scalar_math import python_max

_BITS = np.dtype(np.uint16)


def _load(array):
    """How a kernel reads an element of ``array``: bfloat16 bits widened, a float as it is."""
    return _widened if np.dtype(array.dtype) == _BITS else _as_is


@device_function
def _rounded_bits(value):
    """The bfloat16 bits nearest ``value`` (through float32, as the CPU twin rounds)."""
    return _rounded(numba.float32(value))


def _store(array):
    """How a kernel writes a value into ``array``: rounded to bfloat16 bits, else as it is."""
    return _rounded_bits if np.dtype(array.dtype) == _BITS else _as_is


@functools.cache
def _logsumexp(load):
    @cached_kernel
    def kernel(logits, m, s):
        for i in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
            # NaN-propagating max of the row, like the CPU twin's
            peak = float(load(logits[i, 0]))
            for j in range(1, logits.shape[1]):
                value = float(load(logits[i, j]))
                if peak == peak and (value > peak or value != value):
                    peak = value
            # exp(-inf - -inf) would be NaN: a row that is all -inf so far has nothing to add.
            if peak == -math.inf:
                continue
            new_max = python_max(m[i], peak)
            total = 0.0
            for j in range(logits.shape[1]):
                total += math.exp(float(load(logits[i, j])) - new_max)
            s[i] = s[i] * math.exp(m[i] - new_max) + total
            m[i] = new_max

    return kernel


@functools.cache
def _pick(load):
    @cached_kernel
    def kernel(logits, targets, v_start, picked):
        for i in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
            column = targets[i] - v_start
            if column >= 0 and column < logits.shape[1]:
                picked[i] += float(load(logits[i, column]))

    return kernel


@functools.cache
def _cross_entropy_backward(load, store):
    @cached_kernel
    def kernel(logits, targets, m, s, v_start, grad_scale, dlogits):
        columns = logits.shape[1]
        for t in range(cuda.grid(1), logits.shape[0] * columns, cuda.gridsize(1)):
            i = t // columns
            j = t - i * columns
            if targets[i] < 0:
                dlogits[i, j] = 0
            elif targets[i] - v_start == j:
                # (p - 1) * scale, not p * scale - scale, which cancels in float32
                probability = math.exp(float(load(logits[i, j])) - m[i]) / s[i]
                dlogits[i, j] = store((probability - 1.0) * grad_scale)
            else:
                value = math.exp(float(load(logits[i, j])) - m[i]) * (grad_scale / s[i])
                dlogits[i, j] = store(value)

    return kernel


def logsumexp_accumulate(logits: DeviceArray, m: DeviceArray, s: DeviceArray, *, stream=0) -> None:
    """Fold a vocabulary tile into each row's running max m and sum s of exp(logit - m)."""
    if logits.shape[0] == 0 or logits.shape[1] == 0:
        return
    _logsumexp(_load(logits))[grid(logits.shape[0]), block(), stream](logits, m, s)


def cross_entropy_pick(
    logits: DeviceArray, targets: DeviceArray, v_start: int, picked: DeviceArray, *, stream=0
) -> None:
    """picked[i] += logits[i, targets[i] - v_start] when the target is in this tile."""
    launch(_pick(_load(logits)), logits.shape[0], stream, logits, targets, int(v_start), picked)


def cross_entropy_backward(
    logits: DeviceArray,
    targets: DeviceArray,
    m: DeviceArray,
    s: DeviceArray,
    v_start: int,
    grad_scale: float,
    dlogits: DeviceArray,
    *,
    stream=0,
) -> None:
    """dlogits = grad_scale * (softmax - onehot(target)), 0 on rows with an ignored target."""
    n = logits.shape[0] * logits.shape[1]
    args = (logits, targets, m, s, int(v_start), float(grad_scale), dlogits)
    launch(_cross_entropy_backward(_load(logits), _store(dlogits)), n, stream, *args)
