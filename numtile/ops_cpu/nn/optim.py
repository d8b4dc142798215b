"""Optimizer tile kernels: the fused AdamW step."""

import numba
import numpy as np

from numtile.ops_cpu.helpers import as_type_of


@numba.njit(nogil=True, cache=True, error_model="numpy")
def adamw_step(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step):
    """One torch.optim.AdamW update in place (decoupled weight decay, bias corrections for
    ``step`` counted from 1) on flat arrays, in their dtype."""
    decay = as_type_of(1.0 - lr * weight_decay, param)
    average_weight = as_type_of(1.0 - beta1, param)
    square_decay = as_type_of(beta2, param)
    square_weight = as_type_of(1.0 - beta2, param)
    step_size = as_type_of(lr / (1.0 - beta1**step), param)
    correction_root = as_type_of(np.sqrt(1.0 - beta2**step), param)
    epsilon = as_type_of(eps, param)
    for i in range(param.size):
        g = grad[i]
        # torch's exp_avg.lerp_(grad, 1 - beta1), then exp_avg_sq.mul_(beta2).addcmul_(...).
        average = exp_avg[i] + average_weight * (g - exp_avg[i])
        square = exp_avg_sq[i] * square_decay + square_weight * g * g
        exp_avg[i] = average
        exp_avg_sq[i] = square
        denominator = np.sqrt(square) / correction_root + epsilon
        param[i] = param[i] * decay - step_size * (average / denominator)
