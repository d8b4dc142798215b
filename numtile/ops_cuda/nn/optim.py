"""Optimizer CUDA kernels: the fused AdamW step (twin of ``numtile.ops_cpu.nn.optim``), in the
parameters' dtype like its twin."""

from __future__ import annotations

import math

from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, block, cached_kernel, grid


@cached_kernel
def _adamw(
    param,
    grad,
    exp_avg,
    exp_avg_sq,
    decay,
    average_weight,
    square_decay,
    square_weight,
    step_size,
    correction_root,
    epsilon,
):
    # the scalars come in the parameters' dtype, so float32 stays float32 as on the CPU
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        g = grad[i]
        average = exp_avg[i] + average_weight * (g - exp_avg[i])
        square = exp_avg_sq[i] * square_decay + square_weight * g * g
        exp_avg[i] = average
        exp_avg_sq[i] = square
        denominator = math.sqrt(square) / correction_root + epsilon
        param[i] = param[i] * decay - step_size * (average / denominator)


def adamw_step(
    param: DeviceArray,
    grad: DeviceArray,
    exp_avg: DeviceArray,
    exp_avg_sq: DeviceArray,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
    *,
    stream=0,
) -> None:
    """One torch.optim.AdamW update in place on flat arrays (``step`` counted from 1)."""
    if param.size == 0:
        return
    typed = param.dtype.type
    _adamw[grid(param.size), block(), stream](
        param,
        grad,
        exp_avg,
        exp_avg_sq,
        typed(1.0 - lr * weight_decay),
        typed(1.0 - beta1),
        typed(beta2),
        typed(1.0 - beta2),
        typed(lr / (1.0 - beta1**step)),
        typed(math.sqrt(1.0 - beta2**step)),
        typed(eps),
    )
