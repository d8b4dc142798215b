"""Neural-network CUDA tile kernels: the twins of ``numtile.ops_cpu.nn``.

Flash attention (forward block, finalize, backward delta, backward block), layer norm and RMS
norm over features split across column tiles, cross-entropy over vocabulary tiles, AdamW and
embedding gather / scatter-add, with the layouts and in-place accumulation of the CPU kernels:
attention tiles hold ``n_heads`` heads side by side (head h in columns h*D:(h+1)*D) with
per-head float64 row statistics (rows, n_heads); norm and cross-entropy row statistics are 1-D
float64 arrays accumulated across column / vocabulary tiles.

Each launcher only launches work on ``stream``. Work is split so that no two threads write the
same element: one thread per (row, head) for attention (the backward has a second set of
threads, one per (key row, head), for dk and dv), one per row for row reductions, one per
column for the norm parameter gradients, one per element otherwise; only the embedding
scatter-add, where ids repeat, adds atomically. Arithmetic is float64 (the CPU twins do some
of it in the data precision: float32 results agree to float32 rounding), except AdamW, which
like its twin works in the parameters' dtype.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from numba import cuda

from numtile.cuda_driver import SIMULATOR
from numtile.ops_cuda._launch import block, grid
from numtile.ops_cuda.memory import launch

# numba's DeviceNDArray, or the simulator's stand-in
DeviceArray = Any

_kernel = cuda.jit if SIMULATOR else functools.partial(cuda.jit, cache=True)
_device = functools.partial(cuda.jit, device=True)


# Python's max and min of two numbers (a unless b is larger / smaller): numba.cuda cannot compile
# the builtins, whose implementation takes *args.
@_device
def _max(a, b):
    return b if b > a else a


@_device
def _min(a, b):
    return b if b < a else a


# --- flash attention ---------------------------------------------------------------------------


@_device
def _visible_keys(row, n_keys, q_start, k_start, causal):
    """How many leading keys of a block query ``row`` may attend to (all unless causal)."""
    if not causal:
        return n_keys
    return _min(_max(q_start + row - k_start + 1, 0), n_keys)


@_device
def _dot(a, i, b, j, first, width):
    """sum over d in [first, first + width) of a[i, d] * b[j, d], in float64."""
    total = 0.0
    for d in range(first, first + width):
        total += float(a[i, d]) * float(b[j, d])
    return total


@_kernel
def _attention_forward(q, k, v, m, l, acc, n_heads, width, scale, q_start, k_start, causal):
    # one thread per (query row, head): a first pass over the visible keys finds the new max,
    # a second adds exp(score - max) to l and exp(score - max) * v to acc
    n_keys = k.shape[0]
    for t in range(cuda.grid(1), q.shape[0] * n_heads, cuda.gridsize(1)):
        i = t // n_heads
        h = t - i * n_heads
        first = h * width
        visible = _visible_keys(i, n_keys, q_start, k_start, causal)
        if visible == 0:
            continue
        peak = -math.inf
        for j in range(visible):
            peak = _max(peak, scale * _dot(q, i, k, j, first, width))
        previous = m[i, h]
        new_max = _max(previous, peak)
        rescale = math.exp(previous - new_max)
        for d in range(first, first + width):
            acc[i, d] = float(acc[i, d]) * rescale
        total = 0.0
        for j in range(visible):
            weight = math.exp(scale * _dot(q, i, k, j, first, width) - new_max)
            total += weight
            for d in range(first, first + width):
                acc[i, d] = float(acc[i, d]) + weight * float(v[j, d])
        m[i, h] = new_max
        l[i, h] = l[i, h] * rescale + total


@_kernel
def _attention_finalize(acc, m, l, out, lse, n_heads, width):
    for t in range(cuda.grid(1), acc.shape[0] * n_heads, cuda.gridsize(1)):
        i = t // n_heads
        h = t - i * n_heads
        inverse = 1.0 / l[i, h]
        for d in range(h * width, (h + 1) * width):
            out[i, d] = float(acc[i, d]) * inverse
        lse[i, h] = m[i, h] + math.log(l[i, h])


@_kernel
def _attention_delta(dout, out, delta, n_heads, width):
    for t in range(cuda.grid(1), out.shape[0] * n_heads, cuda.gridsize(1)):
        i = t // n_heads
        h = t - i * n_heads
        delta[i, h] = _dot(dout, i, out, i, h * width, width)


@_device
def _score_gradient(q, k, v, dout, lse, delta, i, j, h, first, width, scale):
    """(P, dS) of query i, key j, head h: P = exp(scale q.k - lse), dS = P (dout.v - delta)."""
    probability = math.exp(scale * _dot(q, i, k, j, first, width) - lse[i, h])
    return probability, probability * (_dot(dout, i, v, j, first, width) - delta[i, h])


@_kernel
def _attention_backward(
    q, k, v, dout, lse, delta, dq, dk, dv, n_heads, width, scale, q_start, k_start, causal
):
    # threads [0, n_queries * n_heads) own a (query row, head) of dq and loop over the keys it
    # sees; the next n_keys * n_heads own a (key row, head) of dk and dv and loop over the
    # queries that see it
    n_queries, n_keys = q.shape[0], k.shape[0]
    query_items = n_queries * n_heads
    for t in range(cuda.grid(1), query_items + n_keys * n_heads, cuda.gridsize(1)):
        if t < query_items:
            i = t // n_heads
            h = t - i * n_heads
            first = h * width
            for j in range(_visible_keys(i, n_keys, q_start, k_start, causal)):
                _, dscore = _score_gradient(q, k, v, dout, lse, delta, i, j, h, first, width, scale)
                dscore *= scale
                for d in range(first, first + width):
                    dq[i, d] = float(dq[i, d]) + dscore * float(k[j, d])
        else:
            u = t - query_items
            j = u // n_heads
            h = u - j * n_heads
            first = h * width
            first_query = _max(k_start + j - q_start, 0) if causal else 0
            for i in range(first_query, n_queries):
                probability, dscore = _score_gradient(
                    q, k, v, dout, lse, delta, i, j, h, first, width, scale
                )
                dscore *= scale
                for d in range(first, first + width):
                    dv[j, d] = float(dv[j, d]) + probability * float(dout[i, d])
                    dk[j, d] = float(dk[j, d]) + dscore * float(q[i, d])


def _launch_per_head(kernel, arrays, rows, n_heads, stream) -> None:
    """Launch ``kernel`` on ``arrays``, ``n_heads`` and the head width (of the columns of
    ``rows``) with a thread per (row of ``rows``, head)."""
    n = rows.shape[0] * n_heads
    if n == 0:
        return
    kernel[grid(n), block(), stream](*arrays, int(n_heads), rows.shape[1] // n_heads)


def _launch_attention_block(
    kernel, arrays, key_threads, n_heads, scale, q_start, k_start, causal, stream
) -> None:
    """Launch a flash-attention block kernel on ``arrays`` (q and k first) and the scalars all
    of them take: a thread per (query row, head), and a thread per (key row, head) too with
    ``key_threads``. Nothing is launched for an empty block or one the causal mask hides."""
    q, k = arrays[0], arrays[1]
    n_queries, n_keys = q.shape[0], k.shape[0]
    if n_queries == 0 or n_keys == 0 or (causal and k_start > q_start + n_queries - 1):
        return
    n = (n_queries + n_keys if key_threads else n_queries) * n_heads
    width = q.shape[1] // n_heads
    scalars = (int(n_heads), width, float(scale), int(q_start), int(k_start), bool(causal))
    kernel[grid(n), block(), stream](*arrays, *scalars)


def attention_forward_block(
    q: DeviceArray,
    k: DeviceArray,
    v: DeviceArray,
    m: DeviceArray,
    l: DeviceArray,
    acc: DeviceArray,
    n_heads: int,
    scale: float,
    q_start: int,
    k_start: int,
    causal: bool,
    *,
    stream=0,
) -> None:
    """Online-softmax update of each head's running max m, sum l and output acc by one key block."""
    arrays = (q, k, v, m, l, acc)
    _launch_attention_block(
        _attention_forward, arrays, False, n_heads, scale, q_start, k_start, causal, stream
    )


def attention_forward_finalize(
    acc: DeviceArray,
    m: DeviceArray,
    l: DeviceArray,
    out: DeviceArray,
    lse: DeviceArray,
    n_heads: int,
    *,
    stream=0,
) -> None:
    """out = acc / l and lse = m + log(l) per head, after the last key block."""
    _launch_per_head(_attention_finalize, (acc, m, l, out, lse), acc, n_heads, stream)


def attention_backward_delta(
    dout: DeviceArray, out: DeviceArray, delta: DeviceArray, n_heads: int, *, stream=0
) -> None:
    """delta[i, h] = sum over head h's columns of dout * out."""
    _launch_per_head(_attention_delta, (dout, out, delta), out, n_heads, stream)


def attention_backward_block(
    q: DeviceArray,
    k: DeviceArray,
    v: DeviceArray,
    dout: DeviceArray,
    lse: DeviceArray,
    delta: DeviceArray,
    dq: DeviceArray,
    dk: DeviceArray,
    dv: DeviceArray,
    n_heads: int,
    scale: float,
    q_start: int,
    k_start: int,
    causal: bool,
    *,
    stream=0,
) -> None:
    """Accumulate one (query block, key block) pair's share of dq, dk and dv."""
    arrays = (q, k, v, dout, lse, delta, dq, dk, dv)
    _launch_attention_block(
        _attention_backward, arrays, True, n_heads, scale, q_start, k_start, causal, stream
    )


# --- layer norm and RMS norm over features split across column tiles --------------------------
# As on the CPU, RMS norm is layer norm with ``centered`` False (no mean, no beta): its launchers
# pass s2 for s1, a2 for a1 and dgamma for dbeta, never touched then.


@_device
def _row_normalizer(s1, s2, i, n_features, eps, centered):
    """(mean, 1 / sqrt(variance + eps)) of row i from its moments (mean 0 unless centered)."""
    mean = s1[i] / n_features if centered else 0.0
    variance = _max(s2[i] / n_features - mean * mean, 0.0)
    return mean, 1.0 / math.sqrt(variance + eps)


@_kernel
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


@_kernel
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


@_kernel
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


@_kernel
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


# --- cross-entropy over vocabulary tiles -------------------------------------------------------


@_kernel
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
        new_max = _max(m[i], peak)
        total = 0.0
        for j in range(logits.shape[1]):
            total += math.exp(float(logits[i, j]) - new_max)
        s[i] = s[i] * math.exp(m[i] - new_max) + total
        m[i] = new_max


@_kernel
def _pick(logits, targets, v_start, picked):
    for i in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        column = targets[i] - v_start
        if column >= 0 and column < logits.shape[1]:
            picked[i] += float(logits[i, column])


@_kernel
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


# --- optimizer ---------------------------------------------------------------------------------


@_kernel
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


# --- embedding with the table tiled over (vocabulary rows, feature columns) ---------------------


@_kernel
def _embedding_gather(ids, table, v_start, out):
    columns = table.shape[1]
    for t in range(cuda.grid(1), ids.size * columns, cuda.gridsize(1)):
        i = t // columns
        j = t - i * columns
        row = ids[i] - v_start
        if row >= 0 and row < table.shape[0]:
            out[i, j] = table[row, j]


@_kernel
def _embedding_scatter_add(ids, grad_out, v_start, grad_table):
    # one thread per (id, column); ids repeat, so rows of grad_table are added to atomically
    columns = grad_table.shape[1]
    for t in range(cuda.grid(1), ids.size * columns, cuda.gridsize(1)):
        i = t // columns
        j = t - i * columns
        row = ids[i] - v_start
        if row >= 0 and row < grad_table.shape[0]:
            cuda.atomic.add(grad_table, (row, j), grad_out[i, j])


def embedding_gather(
    ids: DeviceArray, table: DeviceArray, v_start: int, out: DeviceArray, *, stream=0
) -> None:
    """out[i] = table[ids[i] - v_start] for the ids this table tile holds (other rows kept)."""
    launch(_embedding_gather, ids.size * table.shape[1], stream, ids, table, int(v_start), out)


def embedding_scatter_add(
    ids: DeviceArray, grad_out: DeviceArray, v_start: int, grad_table: DeviceArray, *, stream=0
) -> None:
    """grad_table[ids[i] - v_start] += grad_out[i] for the ids this table tile holds."""
    n = ids.size * grad_table.shape[1]
    launch(_embedding_scatter_add, n, stream, ids, grad_out, int(v_start), grad_table)
