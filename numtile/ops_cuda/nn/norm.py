"""Layer-norm and RMS-norm CUDA kernels over features split across column tiles (twins of
``numtile.ops_cpu.nn.norm``).

Row statistics are 1-D float64 arrays accumulated across column tiles. One thread per row for
the row reductions, one per column for the parameter gradients, one per element otherwise, so
no two threads write the same element. Arithmetic is float64.
"""

from __future__ import annotations

import math

from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, cached_kernel, device_function, launch
from numtile.ops_cuda.scalar_math import python_max

# As on the CPU, RMS norm is layer norm with ``centered`` False (no mean, no beta): its launchers
# pass s2 for s1, a2 for a1 and dgamma for dbeta, never touched then.


@device_function
def _row_normalizer(s1, s2, i, n_features, eps, centered):
    """(mean, 1 / sqrt(variance + eps)) of row i from its moments (mean 0 unless centered)."""
    mean = s1[i] / n_features if centered else 0.0
    variance = python_max(s2[i] / n_features - mean * mean, 0.0)
    return mean, 1.0 / math.sqrt(variance + eps)


@cached_kernel
def _row_moments(x, s1, s2):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        total = 0.0
        total_squares = 0.0
        for j in range(x.shape[1]):
            value = float(x[i, j])
            total += value
            total_squares += value * value
        s1[i] += total
        s2[i] += total_squares


@cached_kernel
def _normalize(x, dy, gamma, beta, s1, s2, a1, a2, out, n_features, eps, centered, backward):
    # forward: out = xhat * gamma (+ beta); backward: out = rstd * (dy gamma - a1/C - xhat a2/C)
    columns = x.shape[1]
    for t in range(cuda.grid(1), x.shape[0] * columns, cuda.gridsize(1)):
        i = t // columns
        j = t - i * columns
        mean, rstd = _row_normalizer(s1, s2, i, n_features, eps, centered)
        xhat = (float(x[i, j]) - mean) * rstd
        if backward:
            mean_dy = a1[i] / n_features if centered else 0.0
            scaled = float(dy[i, j]) * float(gamma[j])
            out[i, j] = rstd * (scaled - mean_dy - xhat * (a2[i] / n_features))
        elif centered:
            out[i, j] = xhat * float(gamma[j]) + float(beta[j])
        else:
            out[i, j] = xhat * float(gamma[j])


@cached_kernel
def _normalize_backward_sums(x, dy, gamma, s1, s2, a1, a2, n_features, eps, centered):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        mean, rstd = _row_normalizer(s1, s2, i, n_features, eps, centered)
        sum_dy = 0.0
        sum_dy_xhat = 0.0
        for j in range(x.shape[1]):
            scaled = float(dy[i, j]) * float(gamma[j])
            sum_dy += scaled
            sum_dy_xhat += scaled * ((float(x[i, j]) - mean) * rstd)
        if centered:
            a1[i] += sum_dy
        a2[i] += sum_dy_xhat


@cached_kernel
def _normalize_param_grad(x, dy, s1, s2, dgamma, dbeta, n_features, eps, centered):
    # one thread per column, looping over the rows: no two threads add to the same element
    for j in range(cuda.grid(1), x.shape[1], cuda.gridsize(1)):
        sum_dy = 0.0
        sum_dy_xhat = 0.0
        for i in range(x.shape[0]):
            mean, rstd = _row_normalizer(s1, s2, i, n_features, eps, centered)
            upstream = float(dy[i, j])
            sum_dy += upstream
            sum_dy_xhat += upstream * ((float(x[i, j]) - mean) * rstd)
        dgamma[j] = float(dgamma[j]) + sum_dy_xhat
        if centered:
            dbeta[j] = float(dbeta[j]) + sum_dy


def _launch_normalize(x, dy, gamma, beta, s1, s2, a1, a2, out, n_features, eps, centered, stream):
    backward = dy is not None
    launch(
        _normalize,
        x.shape[0] * x.shape[1],
        stream,
        x,
        dy if backward else x,
        gamma,
        beta,
        s1,
        s2,
        a1,
        a2,
        out,
        int(n_features),
        float(eps),
        centered,
        backward,
    )


def _launch_backward_sums(x, dy, gamma, s1, s2, a1, a2, n_features, eps, centered, stream):
    args = (x, dy, gamma, s1, s2, a1, a2, int(n_features), float(eps), centered)
    launch(_normalize_backward_sums, x.shape[0], stream, *args)


def _launch_param_grad(x, dy, s1, s2, dgamma, dbeta, n_features, eps, centered, stream):
    args = (x, dy, s1, s2, dgamma, dbeta, int(n_features), float(eps), centered)
    launch(_normalize_param_grad, x.shape[1], stream, *args)


def row_moments_accumulate(x: DeviceArray, s1: DeviceArray, s2: DeviceArray, *, stream=0) -> None:
    """s1[i] += sum_j x[i, j] and s2[i] += sum_j x[i, j]**2, in float64."""
    launch(_row_moments, x.shape[0], stream, x, s1, s2)


def layer_norm_apply(
    x: DeviceArray,
    gamma: DeviceArray,
    beta: DeviceArray,
    s1: DeviceArray,
    s2: DeviceArray,
    y: DeviceArray,
    n_features: int,
    eps: float,
    *,
    stream=0,
) -> None:
    """y = (x - mean) / sqrt(var + eps) * gamma + beta, mean and var from the row moments."""
    _launch_normalize(x, None, gamma, beta, s1, s2, s1, s2, y, n_features, eps, True, stream)


def layer_norm_backward_accumulate(
    x: DeviceArray,
    dy: DeviceArray,
    gamma: DeviceArray,
    s1: DeviceArray,
    s2: DeviceArray,
    a1: DeviceArray,
    a2: DeviceArray,
    n_features: int,
    eps: float,
    *,
    stream=0,
) -> None:
    """a1[i] += sum_j dy * gamma and a2[i] += sum_j dy * gamma * xhat (layer norm backward)."""
    _launch_backward_sums(x, dy, gamma, s1, s2, a1, a2, n_features, eps, True, stream)


def layer_norm_backward_apply(
    x: DeviceArray,
    dy: DeviceArray,
    gamma: DeviceArray,
    s1: DeviceArray,
    s2: DeviceArray,
    a1: DeviceArray,
    a2: DeviceArray,
    dx: DeviceArray,
    n_features: int,
    eps: float,
    *,
    stream=0,
) -> None:
    """dx = rstd * (dy * gamma - a1 / C - xhat * a2 / C) (layer norm backward)."""
    _launch_normalize(x, dy, gamma, gamma, s1, s2, a1, a2, dx, n_features, eps, True, stream)


def layer_norm_param_grad(
    x: DeviceArray,
    dy: DeviceArray,
    s1: DeviceArray,
    s2: DeviceArray,
    dgamma: DeviceArray,
    dbeta: DeviceArray,
    n_features: int,
    eps: float,
    *,
    stream=0,
) -> None:
    """dgamma[j] += sum_i dy * xhat and dbeta[j] += sum_i dy (layer norm backward)."""
    _launch_param_grad(x, dy, s1, s2, dgamma, dbeta, n_features, eps, True, stream)


def rms_norm_apply(
    x: DeviceArray,
    gamma: DeviceArray,
    s2: DeviceArray,
    y: DeviceArray,
    n_features: int,
    eps: float,
    *,
    stream=0,
) -> None:
    """y = x / sqrt(mean(x**2) + eps) * gamma, mean(x**2) = s2 / C."""
    _launch_normalize(x, None, gamma, gamma, s2, s2, s2, s2, y, n_features, eps, False, stream)


def rms_norm_backward_accumulate(
    x: DeviceArray,
    dy: DeviceArray,
    gamma: DeviceArray,
    s2: DeviceArray,
    a2: DeviceArray,
    n_features: int,
    eps: float,
    *,
    stream=0,
) -> None:
    """a2[i] += sum_j dy * gamma * xhat (RMS norm backward)."""
    _launch_backward_sums(x, dy, gamma, s2, s2, a2, a2, n_features, eps, False, stream)


def rms_norm_backward_apply(
    x: DeviceArray,
    dy: DeviceArray,
    gamma: DeviceArray,
    s2: DeviceArray,
    a2: DeviceArray,
    dx: DeviceArray,
    n_features: int,
    eps: float,
    *,
    stream=0,
) -> None:
    """dx = rstd * (dy * gamma - xhat * a2 / C) (RMS norm backward)."""
    _launch_normalize(x, dy, gamma, gamma, s2, s2, a2, a2, dx, n_features, eps, False, stream)


def rms_norm_param_grad(
    x: DeviceArray,
    dy: DeviceArray,
    s2: DeviceArray,
    dgamma: DeviceArray,
    n_features: int,
    eps: float,
    *,
    stream=0,
) -> None:
    """dgamma[j] += sum_i dy * xhat (RMS norm backward)."""
    _launch_param_grad(x, dy, s2, s2, dgamma, dgamma, n_features, eps, False, stream)
