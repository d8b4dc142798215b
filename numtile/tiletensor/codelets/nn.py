"""Codelets of the fused neural-network ops: attention, embedding, norms, loss, optimizers.

Activation tiles are viewed as (rows, features) blocks (``views.rows``), so any tiling of
the leading (batch, sequence) axes works, leftovers included.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from numtile.runtime import Codelet
from numtile.tiletensor.codelets.narrow import (
    bits,
    is_narrow,
    narrow_into,
    scratch_bytes,
    through_float32,
    widen,
)
from numtile.tiletensor.codelets.views import flat, rows
from numtile.tiletensor.dtypes import is_bfloat16
from numtile.tiletensor.precision import bf16_gemm, cpu_has_bf16_gemm, fused_bf16_linear

# -- attention: tiles are (batch, sequence, heads * head width) ------------------------------


def _attention_forward(ops, q, k, v, m, l, acc, n_heads, scale, q_start, k_start, causal, group=1):
    if _on_bf16_units(ops, q, k, v):  # the products on the CPU's bf16 units, P rounded
        kernel, (q, k, v) = ops.nn.attention_forward_block_bf16, (bits(t) for t in (q, k, v))
    else:  # float32 products; bfloat16 q/k/v: float32 scratch copies (exact)
        kernel, (q, k, v) = ops.nn.attention_forward_block, _wide(ops, q, k, v)
    for b in range(q.shape[0]):
        kernel(
            q[b], k[b], v[b], m[b], l[b], acc[b], n_heads, scale, q_start, k_start, causal, group
        )


def _on_bf16_units(ops, *tiles) -> bool:
    """Whether an attention task on bfloat16 ``tiles`` runs ``ops.nn``'s bf16 kernels (a CPU
    worker whose CPU has bf16 units, with oneMKL's bf16 GEMM), not the float32 ones."""
    ready = getattr(ops.nn, "bf16_attention_ready", None)
    return (
        ready is not None
        and all(is_bfloat16(getattr(t, "dtype", None)) for t in tiles)
        and cpu_has_bf16_gemm()
        and ready()
    )


def _wide(ops, *tiles):
    """The tiles, bfloat16 ones widened to float32 scratch copies (float32 softmax maths)."""
    return [widen(ops, t) if is_narrow(t) else t for t in tiles]


def _attention_finalize(ops, acc, m, l, out, lse, n_heads):
    target = ops.empty(tuple(out.shape), np.float32) if is_narrow(out) else out
    for b in range(acc.shape[0]):
        ops.nn.attention_forward_finalize(acc[b], m[b], l[b], target[b], lse[b], n_heads)
    if target is not out:
        narrow_into(ops, target, out)  # the bfloat16 output, rounded once


def _attention_delta(ops, dout, out, delta, n_heads):
    dout, out = _wide(ops, dout, out)
    for b in range(out.shape[0]):
        ops.nn.attention_backward_delta(dout[b], out[b], delta[b], n_heads)


def _attention_backward(
    ops, q, k, v, dout, lse, delta, dq, dk, dv, n_heads, scale, q_start, k_start, causal, group=1
):
    # dq, dk, dv: float32 accumulators, also for bfloat16 q, k, v (rounded once at the end);
    # bfloat16 ones when this task is their only contribution: the gradients rounded into them
    targets, scratch = (dq, dk, dv), False
    if _on_bf16_units(ops, q, k, v, dout):
        kernel = ops.nn.attention_backward_block_bf16
        q, k, v, dout, dq, dk, dv = (bits(t) for t in (q, k, v, dout, dq, dk, dv))
    else:
        kernel, (q, k, v, dout) = ops.nn.attention_backward_block, _wide(ops, q, k, v, dout)
        scratch = is_narrow(dq)  # float32 sums for the float32 kernel, rounded in after
        if scratch:
            dq, dk, dv = (_zeros32(ops, t) for t in targets)
    _run_backward(kernel, q, k, v, dout, lse, delta, dq, dk, dv, n_heads, scale, q_start,
                  k_start, causal, group)  # fmt: skip
    if scratch:
        for values, tile in zip((dq, dk, dv), targets):
            narrow_into(ops, values, tile)


def _zeros32(ops, tile):
    out = ops.empty(tuple(tile.shape), np.float32)
    ops.fill(out.reshape(-1), np.float32(0))
    return out


def _run_backward(
    kernel, q, k, v, dout, lse, delta, dq, dk, dv, n_heads, scale, q_start, k_start, causal, group
):
    for b in range(q.shape[0]):
        kernel(
            q[b],
            k[b],
            v[b],
            dout[b],
            lse[b],
            delta[b],
            dq[b],
            dk[b],
            dv[b],
            n_heads,
            scale,
            q_start,
            k_start,
            causal,
            group,
        )


def _attention_flops(q, k, *args) -> float:
    return 4.0 * math.prod(q) * k[1]  # two (tq x tk x width) products per head


attention_forward = Codelet("attention_forward", kernel=_attention_forward, flops=_attention_flops)
attention_finalize = Codelet("attention_finalize", kernel=_attention_finalize)
attention_delta = Codelet("attention_delta", kernel=_attention_delta)
attention_backward = Codelet(
    "attention_backward",
    kernel=_attention_backward,
    flops=lambda q, k, *a: 2.5 * _attention_flops(q, k),
)

# -- linear layers in bf16-mixed: bfloat16 activations and weights, float32 accumulation ----
# (a, b bfloat16 tiles; their uint16 bits reach the bf16 GEMM kernel: oneDNN's or oneMKL's
# where the CPU has bf16 units, else the exact widen-and-sgemm fallback,
# ``precision.bf16_gemm``; with oneDNN a bfloat16 output is written by the matmul itself)


def _linear_bf16(gemm2d, fused, ops, a, b, c, trans_a, trans_b, beta):
    # float32 c (= or +=) op(a) @ op(b): a chain's partial sum, or a weight's gradient
    gemm2d(rows(bits(a)), rows(bits(b)), rows(c), trans_a, trans_b, 1.0, beta)


def _linear_bf16_out(gemm2d, fused, ops, a, b, *tiles_then_args):
    # out (bfloat16) = round(op(a) @ op(b) + (bias + partial)): the product in a float32
    # scratch tile, rounded once with the bias row and the float32 partial (the chain's earlier
    # products) where the flags say so, in one pass; without a partial, ``fused`` (oneDNN's
    # matmul) adds the bias and rounds as it writes, with no float32 tile at all
    *tiles, trans_a, trans_b, has_partial, has_bias = tiles_then_args
    out = rows(tiles[-1])
    a, b = rows(bits(a)), rows(bits(b))
    linear = fused(a.shape[0] if trans_a else a.shape[1]) if fused else None
    if linear is not None and not has_partial:
        linear(a, b, flat(tiles[0]) if has_bias else None, bits(out), trans_a, trans_b)
        return
    acc = ops.empty(tuple(out.shape), np.float32)
    gemm2d(a, b, acc, trans_a, trans_b, 1.0, 0.0)
    partial = rows(tiles[0]) if has_partial else acc
    bias = flat(tiles[int(has_partial)]) if has_bias else acc[0]
    ops.bf16_narrow_sum(acc, partial, bias, bits(out), has_partial, has_bias)


def _linear_bf16_flops(a, b, *shapes_then_args) -> float:
    out, trans_a = shapes_then_args[-5], shapes_then_args[-4]
    return 2.0 * math.prod(out) * (math.prod(a[:-1]) if trans_a else a[-1])


def _bf16_codelet(name, body, flops):
    """A codelet running ``body(gemm2d, fused, ops, ...)`` with the worker kind's bf16 GEMM
    (and, on a CPU worker, ``fused(inner)``: the fused linear of a GEMM of ``inner`` products
    where oneDNN runs it, else None; None on other workers)."""
    fused = lambda ops: functools.partial(fused_bf16_linear, ops)  # noqa: E731
    cpu = lambda ops, *rest: body(bf16_gemm(ops), fused(ops), ops, *rest)  # noqa: E731
    return Codelet(
        name,
        kernel=lambda ops, *rest: body(ops.gemm_bf16, None, ops, *rest),
        implementations={"cpu": cpu},
        flops=flops,
        scratch=scratch_bytes,  # the widened inputs (and the float32 sum of a bfloat16 out)
    )


linear_bf16 = _bf16_codelet(
    "linear_bf16",
    _linear_bf16,
    lambda a, b, c, trans_a, *args: 2.0 * math.prod(c) * (math.prod(a[:-1]) if trans_a else a[-1]),
)
linear_bf16_out = _bf16_codelet("linear_bf16_out", _linear_bf16_out, _linear_bf16_flops)

# -- embedding -------------------------------------------------------------------------------


def _embedding_gather(ops, ids, table, out, v_start):
    ops.nn.embedding_gather(flat(ids), table, v_start, rows(out))


def _embedding_scatter(ops, ids, grad_out, grad_table, v_start):
    ops.nn.embedding_scatter_add(flat(ids), rows(grad_out), v_start, grad_table)


embedding_gather = Codelet("embedding_gather", kernel=_embedding_gather)
embedding_scatter = Codelet("embedding_scatter", kernel=_embedding_scatter)

# -- norms, rotary embedding, cross-entropy: bfloat16 tiles are read (and their outputs
# written) through float32 copies, the maths in float32 and float64 row statistics, as
# torch.autocast runs them -----------------------------------------------------------------

# -- layer norm ------------------------------------------------------------------------------


@through_float32()
def _row_moments(ops, x, s1, s2):
    ops.nn.row_moments_accumulate(rows(x), flat(s1), flat(s2))


@through_float32(outputs=(5,))
def _layer_norm(ops, x, gamma, beta, s1, s2, y, n, eps):
    ops.nn.layer_norm_apply(rows(x), gamma, beta, flat(s1), flat(s2), rows(y), n, eps)


@through_float32()
def _layer_norm_backward_sums(ops, x, dy, gamma, s1, s2, a1, a2, n, eps):
    ops.nn.layer_norm_backward_accumulate(
        rows(x), rows(dy), gamma, flat(s1), flat(s2), flat(a1), flat(a2), n, eps
    )


@through_float32(outputs=(7,))
def _layer_norm_backward(ops, x, dy, gamma, s1, s2, a1, a2, dx, n, eps):
    ops.nn.layer_norm_backward_apply(
        rows(x), rows(dy), gamma, flat(s1), flat(s2), flat(a1), flat(a2), rows(dx), n, eps
    )


@through_float32(updates=(4, 5))
def _layer_norm_param_grad(ops, x, dy, s1, s2, dgamma, dbeta, n, eps):
    ops.nn.layer_norm_param_grad(rows(x), rows(dy), flat(s1), flat(s2), dgamma, dbeta, n, eps)


row_moments = Codelet("row_moments", kernel=_row_moments)
layer_norm = Codelet("layer_norm", kernel=_layer_norm)
layer_norm_backward_sums = Codelet("layer_norm_backward_sums", kernel=_layer_norm_backward_sums)
layer_norm_backward = Codelet("layer_norm_backward", kernel=_layer_norm_backward)
layer_norm_param_grad = Codelet("layer_norm_param_grad", kernel=_layer_norm_param_grad)


@through_float32(outputs=(3,))
def _rms_norm(ops, x, gamma, s2, y, n, eps):
    ops.nn.rms_norm_apply(rows(x), gamma, flat(s2), rows(y), n, eps)


@through_float32()
def _rms_norm_backward_sums(ops, x, dy, gamma, s2, a2, n, eps):
    ops.nn.rms_norm_backward_accumulate(rows(x), rows(dy), gamma, flat(s2), flat(a2), n, eps)


@through_float32(outputs=(5,))
def _rms_norm_backward(ops, x, dy, gamma, s2, a2, dx, n, eps):
    ops.nn.rms_norm_backward_apply(rows(x), rows(dy), gamma, flat(s2), flat(a2), rows(dx), n, eps)


@through_float32(updates=(3,))
def _rms_norm_param_grad(ops, x, dy, s2, dgamma, n, eps):
    ops.nn.rms_norm_param_grad(rows(x), rows(dy), flat(s2), dgamma, n, eps)


rms_norm = Codelet("rms_norm", kernel=_rms_norm)
rms_norm_backward_sums = Codelet("rms_norm_backward_sums", kernel=_rms_norm_backward_sums)
rms_norm_backward = Codelet("rms_norm_backward", kernel=_rms_norm_backward)
rms_norm_param_grad = Codelet("rms_norm_param_grad", kernel=_rms_norm_param_grad)

# -- rotary position embedding: tiles are (batch, sequence, heads * head width) ---------------


@through_float32(outputs=(3,))
def _rope(ops, x, cos, sin, out, n_heads, inverse):
    for b in range(x.shape[0]):
        ops.nn.rope_apply(x[b], cos, sin, out[b], n_heads, inverse)


rope = Codelet("rope", kernel=_rope, flops=lambda x, *args: 3.0 * math.prod(x))

# -- cross-entropy ---------------------------------------------------------------------------


# The loss kernels read bfloat16 logits (and write a bfloat16 gradient) as their bits, widened
# in registers (bf16-mixed's logits: no float32 copy of the largest activation); float16 logits
# go through float32 scratch copies.


def _loss_kernel(outputs=()):
    """A decorator: the codelet kernel passes its bfloat16 tiles as their bits to the loss
    kernels, and widens float16 tiles to float32 copies (``through_float32``)."""

    def decorate(body):
        def direct(ops, *arguments):
            return body(ops, *(bits(argument) for argument in arguments))

        return through_float32(outputs=outputs, direct=direct, formats=("bf16",))(body)

    return decorate


@_loss_kernel()
def _logsumexp(ops, logits, m, s):
    ops.nn.logsumexp_accumulate(rows(logits), flat(m), flat(s))


@_loss_kernel()
def _cross_entropy_pick(ops, logits, targets, picked, v_start):
    ops.nn.cross_entropy_pick(rows(logits), flat(targets), v_start, flat(picked))


@_loss_kernel(outputs=(5,))
def _cross_entropy_backward(ops, logits, targets, m, s, grad, dlogits, v_start, inverse_count):
    scale = float(ops.to_host(grad).reshape(-1)[0]) * inverse_count
    ops.nn.cross_entropy_backward(
        rows(logits), flat(targets), flat(m), flat(s), v_start, scale, rows(dlogits)
    )


logsumexp = Codelet("logsumexp", kernel=_logsumexp)
cross_entropy_pick = Codelet("cross_entropy_pick", kernel=_cross_entropy_pick)
cross_entropy_backward = Codelet("cross_entropy_backward", kernel=_cross_entropy_backward)

# -- SwiGLU (LLaMA's gated activation): bfloat16 tiles read and written as their bits ---------


@_loss_kernel(outputs=(2,))
def _swiglu(ops, gate, up, out):
    ops.nn.swiglu_apply(flat(gate), flat(up), flat(out))


@_loss_kernel(outputs=(3, 4))
def _swiglu_backward(ops, gate, up, grad, grad_gate, grad_up):
    ops.nn.swiglu_backward(flat(gate), flat(up), flat(grad), flat(grad_gate), flat(grad_up))


swiglu = Codelet("swiglu", kernel=_swiglu, flops=lambda g, *args: 5.0 * math.prod(g))
swiglu_backward = Codelet(
    "swiglu_backward", kernel=_swiglu_backward, flops=lambda g, *args: 10.0 * math.prod(g)
)

# -- optimizer steps -------------------------------------------------------------------------


def _adamw(ops, param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step):
    ops.nn.adamw_step(
        flat(param),
        flat(grad),
        flat(exp_avg),
        flat(exp_avg_sq),
        lr,
        beta1,
        beta2,
        eps,
        weight_decay,
        step,
    )


def _sgd(ops, param, grad, lr):
    ops.axpy(param.dtype.type(-lr), flat(grad), flat(param))


adamw = Codelet("adamw", kernel=_adamw, flops=lambda p, *args: 12.0 * math.prod(p))
sgd = Codelet("sgd", kernel=_sgd, flops=lambda p, *args: 2.0 * math.prod(p))
