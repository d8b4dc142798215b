"""Neural-network tile kernels: flash attention, layer/RMS norm, cross-entropy, AdamW, embedding.

Each kernel sees one tile of each operand. State that spans tiles (running row maxima and sums,
moments of rows split over column tiles, gradient sums) is passed in and accumulated in place,
so a tiled op calls the kernel once per tile and gets the full result. Row statistics are
float64 arrays; sums over a row are accumulated in float64 whatever the data precision.

Attention tiles hold several heads side by side: a query tile is (tq, n_heads * D) with head h
in columns h*D:(h+1)*D, key and value tiles are (tk, n_heads * D) for the same heads, and the
per-head row statistics are (tq, n_heads). Per-block matrix products go to BLAS.

Example (attention of 3 queries on 5 keys, the keys in two blocks):

>>> import numpy as np
>>> from numtile.ops_cpu import nn
>>> rng = np.random.default_rng(0)
>>> q, k, v = (rng.standard_normal((n, 4)) for n in (3, 5, 5))  # one head, D = 4
>>> m, l, acc = np.full((3, 1), -np.inf), np.zeros((3, 1)), np.zeros((3, 4))
>>> for start, stop in [(0, 2), (2, 5)]:
...     nn.attention_forward_block(q, k[start:stop].copy(), v[start:stop].copy(), m, l, acc,
...                                1, 0.5, 0, start, False)
>>> out, lse = np.empty((3, 4)), np.empty((3, 1))
>>> nn.attention_forward_finalize(acc, m, l, out, lse, 1)
>>> weights = np.exp(0.5 * q @ k.T - lse)
>>> bool(np.allclose(out, weights @ v) and np.allclose(weights.sum(axis=1), 1))
True
"""

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

from numtile.ops_cpu.blas import gemm
from numtile.ops_cpu.elementwise import _maximum, _minimum
from numtile.ops_cpu.memory import as_type_of, inlined
from numtile.ops_cpu.reduction import _widen

# Cephes' expf: exp(x) = 2**n * exp(r) with n = round(x / ln 2) and r = x - n ln 2 (ln 2 split in
# two so that n * high is exact), exp(r) = 1 + r + r**2 * polynomial(r); about 1 ulp.
_LOG2_E = 1.44269504088896341
_LN2_HIGH = 0.693359375
_LN2_LOW = -2.12194440e-4
_EXPF_C0, _EXPF_C1, _EXPF_C2 = 5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2
_EXPF_C3, _EXPF_C4, _EXPF_C5 = 8.3334519073e-3, 1.3981999507e-3, 1.9875691500e-4
# exp(x) of float32 is below the smallest normal number for x < -87.33 and overflows above 88.72.
_EXPF_LOWEST = -87.33
_EXPF_HIGHEST = 88.72


@intrinsic
def _float32_from_bits(typingctx, bits):
    """The float32 whose IEEE bit pattern is the int32 ``bits``."""
    if bits != types.int32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


def _softmax_exp(x):
    """exp(x) of a scores-minus-max value, vectorisable for float32 (Numba-only)."""
    raise NotImplementedError("_softmax_exp is only callable from numba-compiled code")


@overload(_softmax_exp, inline="always")
def _softmax_exp_overload(x):
    if x != types.float32:
        return lambda x: np.exp(x)

    def expf(x):
        # libm's expf is a call per element, and this is the inner loop of attention; this
        # version has no call and no branch, so whole rows go through SIMD registers. Below
        # -87.33 it flushes to 0, above 88.03 it gives inf, and NaN propagates (the clamps keep
        # n in range).
        clamped = _minimum(_maximum(x, np.float32(_EXPF_LOWEST)), np.float32(_EXPF_HIGHEST))
        n = np.floor(clamped * np.float32(_LOG2_E) + np.float32(0.5))
        r = clamped - n * np.float32(_LN2_HIGH) - n * np.float32(_LN2_LOW)
        polynomial = np.float32(_EXPF_C5) * r + np.float32(_EXPF_C4)
        polynomial = polynomial * r + np.float32(_EXPF_C3)
        polynomial = polynomial * r + np.float32(_EXPF_C2)
        polynomial = polynomial * r + np.float32(_EXPF_C1)
        polynomial = polynomial * r + np.float32(_EXPF_C0)
        power = _float32_from_bits(np.int32((np.int32(n) + 127) << 23))
        value = (polynomial * r * r + r + np.float32(1)) * power
        return np.float32(0) if x < np.float32(_EXPF_LOWEST) else value

    return expf


# --- flash attention ---------------------------------------------------------------------------


# The two row reductions of the online softmax are functions of their own, not inlined, so that
# their fast-math flags, which let LLVM split them over SIMD lanes, reach no other arithmetic
# (reassoc could undo the exact ln 2 split of _softmax_exp).
@numba.njit(nogil=True, error_model="numpy", fastmath={"reassoc"})
def _wide_sum(values, count):
    """Sum of values[:count] in float64."""
    total = 0.0
    for j in range(count):
        total += _widen(values[j])
    return total


# nnan: the max of a row holding NaN is unspecified, but the NaN itself still reaches the sum and
# the output through exp, so attention propagates it all the same.
@numba.njit(nogil=True, error_model="numpy", fastmath={"nnan", "reassoc"})
def _row_max(values, count):
    """Largest of values[:count] (count >= 1)."""
    peak = values[0]
    for j in range(1, count):
        peak = _maximum(peak, values[j])
    return peak


@inlined
def _visible_keys(row, n_keys, q_start, k_start, causal):
    """How many leading keys of a block query ``row`` may attend to (all unless causal)."""
    if not causal:
        return n_keys
    return min(max(q_start + row - k_start + 1, 0), n_keys)


@inlined
def _copy_head(source, head, width, target):
    """target = source[:, head*width:(head+1)*width]: one head's columns, contiguous for BLAS."""
    first = head * width
    for i in range(target.shape[0]):
        for d in range(width):
            target[i, d] = source[i, first + d]


@inlined
def _store_head(source, head, width, target):
    """target[:, head*width:(head+1)*width] = source (the inverse of _copy_head)."""
    first = head * width
    for i in range(source.shape[0]):
        for d in range(width):
            target[i, first + d] = source[i, d]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def attention_forward_block(q, k, v, m, l, acc, n_heads, scale, q_start, k_start, causal):
    """Online-softmax update of each head's running max m, sum l and unnormalised output acc
    with the key/value block starting at k_start (causal: key k_start+j seen by q_start+i iff
    k_start+j <= q_start+i; rows that see nothing are left unchanged)."""
    n_queries, n_keys = q.shape[0], k.shape[0]
    width = q.shape[1] // n_heads
    if n_keys == 0 or (causal and k_start > q_start + n_queries - 1):
        return
    q_head = np.empty((n_queries, width), q.dtype)
    k_head = np.empty((n_keys, width), q.dtype)
    v_head = np.empty((n_keys, width), q.dtype)
    update = np.empty((n_queries, width), q.dtype)
    # Scores, overwritten in place by the unnormalised probabilities exp(S - new max).
    weights = np.empty((n_queries, n_keys), q.dtype)
    rescale = np.empty(n_queries, np.float64)
    for h in range(n_heads):
        _copy_head(q, h, width, q_head)
        _copy_head(k, h, width, k_head)
        _copy_head(v, h, width, v_head)
        gemm(q_head, k_head, weights, False, True, scale, 0.0)
        for i in range(n_queries):
            visible = _visible_keys(i, n_keys, q_start, k_start, causal)
            row = weights[i]
            row[visible:] = 0
            if visible == 0:
                rescale[i] = 1.0
                continue
            previous = m[i, h]
            # The new max is a value of the data dtype, so exp below runs in that dtype.
            new_max = max(previous, _widen(_row_max(row, visible)))
            shift = as_type_of(new_max, row)
            for j in range(visible):
                row[j] = _softmax_exp(row[j] - shift)
            total = _wide_sum(row, visible)
            rescale[i] = np.exp(previous - new_max)
            m[i, h] = new_max
            l[i, h] = l[i, h] * rescale[i] + total
        gemm(weights, v_head, update, False, False, 1.0, 0.0)
        first = h * width
        for i in range(n_queries):
            for d in range(width):
                acc[i, first + d] = acc[i, first + d] * rescale[i] + update[i, d]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def attention_forward_finalize(acc, m, l, out, lse, n_heads):
    """out = acc / l and lse = m + log(l) per head, after the last key block."""
    width = acc.shape[1] // n_heads
    for i in range(acc.shape[0]):
        for h in range(n_heads):
            inverse = 1.0 / l[i, h]
            for d in range(h * width, (h + 1) * width):
                out[i, d] = acc[i, d] * inverse
            lse[i, h] = m[i, h] + np.log(l[i, h])


@numba.njit(nogil=True, cache=True, error_model="numpy")
def attention_backward_delta(dout, out, delta, n_heads):
    """delta[i, h] = sum over head h's columns of dout * out (rowsum of dP * P)."""
    width = out.shape[1] // n_heads
    for i in range(out.shape[0]):
        for h in range(n_heads):
            total = 0.0
            for d in range(h * width, (h + 1) * width):
                total += _widen(dout[i, d]) * out[i, d]
            delta[i, h] = total


@numba.njit(nogil=True, cache=True, error_model="numpy")
def attention_backward_block(
    q, k, v, dout, lse, delta, dq, dk, dv, n_heads, scale, q_start, k_start, causal
):
    """Accumulate one (query block, key block) pair's share of dq, dk and dv, recomputing
    P = exp(scale * q k^T - lse) (masked entries 0); pairs may come in any order."""
    n_queries, n_keys = q.shape[0], k.shape[0]
    width = q.shape[1] // n_heads
    if n_keys == 0 or (causal and k_start > q_start + n_queries - 1):
        return
    q_head = np.empty((n_queries, width), q.dtype)
    dout_head = np.empty((n_queries, width), q.dtype)
    dq_head = np.empty((n_queries, width), q.dtype)
    k_head = np.empty((n_keys, width), q.dtype)
    v_head = np.empty((n_keys, width), q.dtype)
    dk_head = np.empty((n_keys, width), q.dtype)
    dv_head = np.empty((n_keys, width), q.dtype)
    probabilities = np.empty((n_queries, n_keys), q.dtype)
    dscores = np.empty((n_queries, n_keys), q.dtype)
    for h in range(n_heads):
        _copy_head(q, h, width, q_head)
        _copy_head(dout, h, width, dout_head)
        _copy_head(dq, h, width, dq_head)
        _copy_head(k, h, width, k_head)
        _copy_head(v, h, width, v_head)
        _copy_head(dk, h, width, dk_head)
        _copy_head(dv, h, width, dv_head)
        gemm(q_head, k_head, probabilities, False, True, scale, 0.0)
        gemm(dout_head, v_head, dscores, False, True, 1.0, 0.0)  # dP
        for i in range(n_queries):
            visible = _visible_keys(i, n_keys, q_start, k_start, causal)
            row = probabilities[i]
            shift = as_type_of(lse[i, h], row)
            for j in range(visible):
                row[j] = _softmax_exp(row[j] - shift)
            row[visible:] = 0
            offset = as_type_of(delta[i, h], row)
            gradient = dscores[i]
            for j in range(n_keys):
                gradient[j] = row[j] * (gradient[j] - offset)  # dS
        gemm(probabilities, dout_head, dv_head, True, False, 1.0, 1.0)
        gemm(dscores, k_head, dq_head, False, False, scale, 1.0)
        gemm(dscores, q_head, dk_head, True, False, scale, 1.0)
        _store_head(dq_head, h, width, dq)
        _store_head(dk_head, h, width, dk)
        _store_head(dv_head, h, width, dv)


# --- layer norm and RMS norm over features split across column tiles --------------------------
# One helper per phase serves both norms: RMS norm is layer norm with ``centered`` False (no
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
            scaled = _widen(dy[i, j]) * gamma[j]
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
            dx[i, j] = rstd * (_widen(dy[i, j]) * gamma[j] - mean_dy - xhat * mean_dy_xhat)


@inlined
def _normalize_param_grad(x, dy, s1, s2, dgamma, dbeta, n_features, eps, centered):
    """dgamma += sum_i dy * xhat, dbeta += sum_i dy (when centered), per column."""
    sum_dy = np.zeros(x.shape[1], np.float64)
    sum_dy_xhat = np.zeros(x.shape[1], np.float64)
    for i in range(x.shape[0]):
        mean, rstd = _row_normalizer(s1, s2, i, n_features, eps, centered)
        for j in range(x.shape[1]):
            upstream = _widen(dy[i, j])
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
            value = _widen(x[i, j])
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


# --- cross-entropy over vocabulary tiles -------------------------------------------------------


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
        new_max = max(m[i], _widen(peak))
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


# --- optimizer ---------------------------------------------------------------------------------


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


# --- embedding with the table tiled over (vocabulary rows, feature columns) ---------------------


@numba.njit(nogil=True, cache=True, error_model="numpy")
def embedding_gather(ids, table, v_start, out):
    """out[i] = table[ids[i] - v_start] for the ids this table tile holds (other rows kept)."""
    for i in range(ids.size):
        row = ids[i] - v_start
        if 0 <= row < table.shape[0]:
            for j in range(table.shape[1]):
                out[i, j] = table[row, j]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def embedding_scatter_add(ids, grad_out, v_start, grad_table):
    """grad_table[ids[i] - v_start] += grad_out[i] for the ids this table tile holds."""
    for i in range(ids.size):
        row = ids[i] - v_start
        if 0 <= row < grad_table.shape[0]:
            for j in range(grad_table.shape[1]):
                grad_table[row, j] += grad_out[i, j]
