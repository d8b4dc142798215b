"""Layer-norm and RMS-norm tile kernels over features split across column tiles.

Row moments (s1 = sum x, s2 = sum x**2) and the backward row sums (a1, a2) are 1-D float64
arrays accumulated across a row's column tiles, in any order; the apply kernels then use them.
"""

import numba
import numpy as np

from numtile.ops_cpu.helpers import inlined, widen

# mean, no beta); its kernels pass s2 for s1, a2 for a1 and dgamma for dbeta, never touched then.


@inlined
def _row_normalizer(s1, s2, i, n_features, eps, centered):
    """(mean, 1 / sqrt(variance + eps)) of row i from its moments (mean 0 unless centered)."""
    mean = s1[i] / n_features if centered else 0.0
    variance = max(s2[i] / n_features - mean * mean, 0.0)
    return mean, 1.0 / np.sqrt(variance + eps)


@inlined
def _normalize(x, gamma, beta, s1, s2, y, n_features, eps, centered):
    """y = (x - mean) * rstd * gamma (+ beta when centered)."""
    for i in range(x.shape[0]):
        mean, rstd = _row_normalizer(s1, s2, i, n_features, eps, centered)
        for j in range(x.shape[1]):
            value = (x[i, j] - mean) * rstd * gamma[j]
            y[i, j] = value + beta[j] if centered else value


@inlined
def _normalize_backward_accumulate(x, dy, gamma, s1, s2, a1, a2, n_features, eps, centered):
    """a1 += sum_j dy * gamma (when centered), a2 += sum_j dy * gamma * xhat, per row."""
    for i in range(x.shape[0]):
        mean, rstd = _row_normalizer(s1, s2, i, n_features, eps, centered)
        sum_dy = 0.0
        sum_dy_xhat = 0.0
        for j in range(x.shape[1]):
            scaled = widen(dy[i, j]) * gamma[j]
            sum_dy += scaled
            sum_dy_xhat += scaled * (x[i, j] - mean) * rstd
        if centered:
            a1[i] += sum_dy
        a2[i] += sum_dy_xhat


@inlined
def _normalize_backward_apply(x, dy, gamma, s1, s2, a1, a2, dx, n_features, eps, centered):
    """dx = rstd * (dy * gamma - a1 / C (when centered) - xhat * a2 / C)."""
    for i in range(x.shape[0]):
        mean, rstd = _row_normalizer(s1, s2, i, n_features, eps, centered)
        mean_dy = a1[i] / n_features if centered else 0.0
        mean_dy_xhat = a2[i] / n_features
        for j in range(x.shape[1]):
            xhat = (x[i, j] - mean) * rstd
            dx[i, j] = rstd * (widen(dy[i, j]) * gamma[j] - mean_dy - xhat * mean_dy_xhat)


@inlined
def _normalize_param_grad(x, dy, s1, s2, dgamma, dbeta, n_features, eps, centered):
    """dgamma += sum_i dy * xhat, dbeta += sum_i dy (when centered), per column."""
    sum_dy = np.zeros(x.shape[1], np.float64)
    sum_dy_xhat = np.zeros(x.shape[1], np.float64)
    for i in range(x.shape[0]):
        mean, rstd = _row_normalizer(s1, s2, i, n_features, eps, centered)
        for j in range(x.shape[1]):
            upstream = widen(dy[i, j])
            sum_dy[j] += upstream
            sum_dy_xhat[j] += upstream * (x[i, j] - mean) * rstd
    for j in range(x.shape[1]):
        dgamma[j] += sum_dy_xhat[j]
        if centered:
            dbeta[j] += sum_dy[j]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def row_moments_accumulate(x, s1, s2):
    """s1[i] += sum_j x[i, j] and s2[i] += sum_j x[i, j]**2, in float64."""
    for i in range(x.shape[0]):
        total = 0.0
        total_squares = 0.0
        for j in range(x.shape[1]):
            value = widen(x[i, j])
            total += value
            total_squares += value * value
        s1[i] += total
        s2[i] += total_squares


@numba.njit(nogil=True, cache=True, error_model="numpy")
def layer_norm_apply(x, gamma, beta, s1, s2, y, n_features, eps):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta, mean and var from the row moments."""
    _normalize(x, gamma, beta, s1, s2, y, n_features, eps, True)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def layer_norm_backward_accumulate(x, dy, gamma, s1, s2, a1, a2, n_features, eps):
    """a1[i] += sum_j dy * gamma and a2[i] += sum_j dy * gamma * xhat (layer norm backward)."""
    _normalize_backward_accumulate(x, dy, gamma, s1, s2, a1, a2, n_features, eps, True)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def layer_norm_backward_apply(x, dy, gamma, s1, s2, a1, a2, dx, n_features, eps):
    """dx = rstd * (dy * gamma - a1 / C - xhat * a2 / C) (layer norm backward)."""
    _normalize_backward_apply(x, dy, gamma, s1, s2, a1, a2, dx, n_features, eps, True)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def layer_norm_param_grad(x, dy, s1, s2, dgamma, dbeta, n_features, eps):
    """dgamma[j] += sum_i dy * xhat and dbeta[j] += sum_i dy (layer norm backward)."""
    _normalize_param_grad(x, dy, s1, s2, dgamma, dbeta, n_features, eps, True)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def rms_norm_apply(x, gamma, s2, y, n_features, eps):
    """y = x / sqrt(mean(x**2) + eps) * gamma, mean(x**2) = s2 / C."""
    _normalize(x, gamma, gamma, s2, s2, y, n_features, eps, False)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def rms_norm_backward_accumulate(x, dy, gamma, s2, a2, n_features, eps):
    """a2[i] += sum_j dy * gamma * xhat (RMS norm backward)."""
    _normalize_backward_accumulate(x, dy, gamma, s2, s2, a2, a2, n_features, eps, False)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def rms_norm_backward_apply(x, dy, gamma, s2, a2, dx, n_features, eps):
    """dx = rstd * (dy * gamma - xhat * a2 / C) (RMS norm backward)."""
    _normalize_backward_apply(x, dy, gamma, s2, s2, a2, a2, dx, n_features, eps, False)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def rms_norm_param_grad(x, dy, s2, dgamma, n_features, eps):
    """dgamma[j] += sum_i dy * xhat (RMS norm backward)."""
    _normalize_param_grad(x, dy, s2, s2, dgamma, dgamma, n_features, eps, False)
