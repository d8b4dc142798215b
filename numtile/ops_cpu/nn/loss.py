"""Cross-entropy tile kernels over vocabulary tiles: running log-sum-exp, target pick, gradient.

The row statistics (running max m, sum s of exp(logit - m), picked target logit) are 1-D
float64 arrays accumulated across a row's vocabulary tiles, in any order.
"""

import numba
import numpy as np

from numtile.ops_cpu.helpers import widen
from numtile.ops_cpu.scalar_math import _maximum


@numba.njit(nogil=True, cache=True, error_model="numpy")
def logsumexp_accumulate(logits, m, s):
    """Fold a vocabulary tile into each row's running max m and sum s of exp(logit - m), in
    float64 (tiles in any order; a tile of -inf logits changes nothing)."""
    for i in range(logits.shape[0]):
        row = logits[i]
        peak = row[0]
        for j in range(1, row.size):
            peak = _maximum(peak, row[j])
        # exp(-inf - -inf) would be NaN: a row that is all -inf so far has nothing to add.
        if peak == -np.inf:
            continue
        new_max = max(m[i], widen(peak))
        total = 0.0
        for j in range(row.size):
            total += np.exp(row[j] - new_max)
        s[i] = s[i] * np.exp(m[i] - new_max) + total
        m[i] = new_max


@numba.njit(nogil=True, cache=True, error_model="numpy")
def cross_entropy_pick(logits, targets, v_start, picked):
    """picked[i] += logits[i, targets[i] - v_start] when the target is in this tile (an
    ignored target -1 never is, as v_start >= 0)."""
    for i in range(logits.shape[0]):
        column = targets[i] - v_start
        if 0 <= column < logits.shape[1]:
            picked[i] += logits[i, column]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def cross_entropy_backward(logits, targets, m, s, v_start, grad_scale, dlogits):
    """dlogits = grad_scale * (softmax - onehot(target)) on this tile, the softmax from the
    row's m and s; rows with a negative (ignored) target get 0."""
    for i in range(logits.shape[0]):
        row = dlogits[i]
        if targets[i] < 0:
            row[:] = 0
            continue
        factor = grad_scale / s[i]
        for j in range(row.size):
            row[j] = np.exp(logits[i, j] - m[i]) * factor
        column = targets[i] - v_start
        if 0 <= column < row.size:
            # Recomputed rather than row[column] -= grad_scale, which cancels in float32.
            row[column] = (np.exp(logits[i, column] - m[i]) / s[i] - 1.0) * grad_scale
