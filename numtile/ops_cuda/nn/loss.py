"""Cross-entropy CUDA kernels over vocabulary tiles (twins of ``numtile.ops_cpu.nn.loss``).

Row statistics are 1-D float64 arrays accumulated across vocabulary tiles: one thread per row
for the running log-sum-exp and the target pick, one per element for the gradient.
"""

from __future__ import annotations

import math

from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, block, cached_kernel, grid, launch
from numtile.ops_cuda.scalar_math import python_max


@cached_kernel
def _logsumexp(logits, m, s):
    for i in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        # NaN-propagating max of the row, like the CPU twin's
        peak = float(logits[i, 0])
        for j in range(1, logits.shape[1]):
            value = float(logits[i, j])
            if peak == peak and (value > peak or value != value):
                peak = value
        # exp(-inf - -inf) would be NaN: a row that is all -inf so far has nothing to add.
        if peak == -math.inf:
            continue
        new_max = python_max(m[i], peak)
        total = 0.0
        for j in range(logits.shape[1]):
            total += math.exp(float(logits[i, j]) - new_max)
        s[i] = s[i] * math.exp(m[i] - new_max) + total
        m[i] = new_max


@cached_kernel
def _pick(logits, targets, v_start, picked):
    for i in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        column = targets[i] - v_start
        if column >= 0 and column < logits.shape[1]:
            picked[i] += float(logits[i, column])


@cached_kernel
def _cross_entropy_backward(logits, targets, m, s, v_start, grad_scale, dlogits):
    columns = logits.shape[1]
    for t in range(cuda.grid(1), logits.shape[0] * columns, cuda.gridsize(1)):
        i = t // columns
        j = t - i * columns
        if targets[i] < 0:
            dlogits[i, j] = 0
        elif targets[i] - v_start == j:
            # (p - 1) * scale, not p * scale - scale, which cancels in float32
            probability = math.exp(float(logits[i, j]) - m[i]) / s[i]
            dlogits[i, j] = (probability - 1.0) * grad_scale
        else:
            dlogits[i, j] = math.exp(float(logits[i, j]) - m[i]) * (grad_scale / s[i])


def logsumexp_accumulate(logits: DeviceArray, m: DeviceArray, s: DeviceArray, *, stream=0) -> None:
    """Fold a vocabulary tile into each row's running max m and sum s of exp(logit - m)."""
    if logits.shape[0] == 0 or logits.shape[1] == 0:
        return
    _logsumexp[grid(logits.shape[0]), block(), stream](logits, m, s)


def cross_entropy_pick(
    logits: DeviceArray, targets: DeviceArray, v_start: int, picked: DeviceArray, *, stream=0
) -> None:
    """picked[i] += logits[i, targets[i] - v_start] when the target is in this tile."""
    launch(_pick, logits.shape[0], stream, logits, targets, int(v_start), picked)


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
    launch(_cross_entropy_backward, n, stream, *args)
