"""A linear layer of an activation, ``act(inputs) @ W + b`` (GPT-2's ``c_proj(gelu_tanh(h))``,
LLaMA's ``down_proj(swiglu(gate, up))``), as one differentiable op.

In bf16-mixed the activation's output is not kept for the backward: the activation's own
backward needs its inputs (h; gate and up) anyway, and the weight gradient, the one user of
``act(inputs)`` there, recomputes it tile by tile inside its GEMM tasks
(``tiletensor.fused.activated``), with the forward's kernel, so the gradients are those of the
unfused ops bit for bit. At batch 4 x 256, GPT-2 small so keeps 72 MiB less (its 12 MLPs'
``gelu_tanh(h)``), LLaMA small 48 MiB. Elsewhere (float32, other precisions) it is the
unfused ops.
"""

from __future__ import annotations

import numpy as np

from numtile.autograd.tape import Function
from numtile.nn import functional
from numtile.nn.functional import BF16_MIXED, _bf16_able, _to_bf16
from numtile.tiletensor.dtypes import bfloat16_dtype, is_bfloat16
from numtile.tiletensor.elementwise import gelu_tanh, unary_backward
from numtile.tiletensor.fused.activated import ACTIVATIONS, activated_weight_grad
from numtile.tiletensor.fused.linear import linear_backward_input, linear_forward
from numtile.tiletensor.fused.rows import match_last_tile
from numtile.tiletensor.fused.swiglu import swiglu_backward, swiglu_forward
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.precision import gemm_rounding
from numtile.tiletensor.reduction import sum as tensor_sum
from numtile.tiletensor.tensor import TileTensor


def _activate(activation: str, inputs):
    """The activation's forward, by the tiled op its unfused Function runs."""
    return gelu_tanh(inputs[0]) if activation == "gelu_tanh" else swiglu_forward(*inputs)


def _activation_backward(activation: str, inputs, grad) -> tuple:
    """The gradients of the activation's inputs, by its unfused Function's backward."""
    if activation == "gelu_tanh":
        return (unary_backward(inputs[0], grad, "gelu_tanh"),)
    return swiglu_backward(*inputs, grad)


class ActivatedLinearFunction(Function):
    """``act(*inputs) @ op(W) + b`` in bf16-mixed (bfloat16 inputs, float32 W and b), keeping
    the inputs and W for the backward, as ``LinearFunction`` after the activation's Function
    would, but not ``act(*inputs)``: the weight gradient's GEMM tasks recompute it."""

    @staticmethod
    def forward(ctx, *operands, activation, transposed):
        *inputs, weight, bias = operands
        ctx.activation, ctx.transposed, ctx.has_bias = activation, transposed, bias is not None
        ctx.input_tiles = [t.tile_shape for t in inputs]
        ctx.input_grads = [t.requires_grad for t in inputs]
        ctx.weight_grad, ctx.weight_layout = weight.requires_grad, weight.layout
        ctx.rounding = gemm_rounding()
        in_tile = weight.tile_shape[1 if transposed else 0]
        # one tiling for every input, its last tile W's input tile: the GEMM tasks' tiles
        inputs = [match_last_tile(inputs[0], in_tile)] + [
            retile(t, inputs[0].tile_shape[:-1] + (in_tile,)) for t in inputs[1:]
        ]
        weight16 = _to_bf16(weight)
        out_tile = (weight16.tile_shape[0 if transposed else 1],)
        if bias is not None and bias.tile_shape != out_tile:
            bias = retile(bias, out_tile)
        ctx.save_for_backward(*inputs, weight)  # W, not its bfloat16 copy (LinearFunction's why)
        return linear_forward(_activate(activation, inputs), weight16, transposed, bias=bias)

    @staticmethod
    def backward(ctx, g):
        *inputs, weight = ctx.saved
        g = _to_bf16(g)
        grads = [None] * len(inputs)
        if any(ctx.input_grads):
            grad_act = linear_backward_input(
                g, _to_bf16(weight), inputs[0], ctx.transposed, ctx.rounding, dtype=bfloat16_dtype()
            )
        gw = gb = None
        if ctx.weight_grad:
            gw = activated_weight_grad(
                ctx.activation, tuple(inputs), g, ctx.weight_layout, ctx.transposed
            )
        if ctx.has_bias:
            gb = tensor_sum(g, axis=tuple(range(g.ndim - 1)), dtype=np.float32)
        if any(ctx.input_grads):
            grads = _activation_backward(ctx.activation, inputs, grad_act)
            grads = [retile(d, tiles) for d, tiles in zip(grads, ctx.input_tiles)]
        return (*grads, gw, gb)


def _fusable(inputs, weight: TileTensor, bias) -> bool:
    """Whether bf16-mixed runs ``act(inputs) @ W + b`` fused: bfloat16 inputs of one shape,
    float32 W (and b), as the bf16-mixed layers give them."""
    return (
        gemm_rounding() == BF16_MIXED
        and all(is_bfloat16(t.dtype) and t.shape == inputs[0].shape for t in inputs)
        and weight.dtype == np.float32
        and _bf16_able(inputs[0], weight, bias)
    )


def activated_linear(
    activation: str,
    inputs: tuple[TileTensor, ...],
    weight: TileTensor,
    bias: TileTensor | None = None,
    *,
    transposed: bool = False,
) -> TileTensor:
    """``act(*inputs) @ W + b`` (W (in, out), or (out, in) when ``transposed``), act
    ``"gelu_tanh"`` of one input or ``"swiglu"`` of (gate, up) (differentiable); in
    bf16-mixed without keeping ``act(*inputs)`` for the backward.

    >>> import numtile as nt
    >>> h, w = nt.zeros((4, 3), tile_shape=(2, 3)), nt.ones((3, 2), tile_shape=(3, 2))
    >>> activated_linear("gelu_tanh", (h,), w).to_numpy()[0].tolist()
    [0.0, 0.0]
    """
    if activation not in ACTIVATIONS or len(inputs) != (1 if activation == "gelu_tanh" else 2):
        raise ValueError(
            f"activated_linear: activation must be 'gelu_tanh' of one input or 'swiglu' of "
            f"two, got {activation!r} of {len(inputs)}"
        )
    if not _fusable(inputs, weight, bias):
        act = gelu_tanh(inputs[0]) if activation == "gelu_tanh" else functional.swiglu(*inputs)
        return functional.linear(act, weight, bias, transposed=transposed)
    if inputs[0].shape[-1] != weight.shape[1 if transposed else 0]:
        raise ValueError(
            f"activated_linear: the activation has {inputs[0].shape[-1]} features but the "
            f"weight has shape {weight.shape}{' (out, in)' if transposed else ' (in, out)'}"
        )
    return ActivatedLinearFunction.apply(
        *inputs, weight, bias, activation=activation, transposed=transposed
    )
