"""Codelets of the weight gradient of a bf16-mixed linear layer whose input is an activation
``act(h)`` of tiles its backward keeps anyway (GPT-2's ``gelu_tanh(h)``, LLaMA's
``swiglu(gate, up)``): the task recomputes ``act`` of its tiles into a bfloat16 scratch tile,
with the very kernel the forward ran (``ops.bf16_unary``, ``ops.nn.swiglu_apply``: the same
bits), right before the bf16 GEMM that ``nn.linear_bf16`` runs on the kept ``act(h)``. The
activation is thus not kept from the forward to the backward.

A task's tiles: the activation's inputs (bfloat16), the other GEMM operand (the bfloat16
gradient of the layer's output), the float32 gradient tile; its arguments: whether the
activation is the GEMM's first operand, then ``linear_bf16``'s (trans_a, trans_b, beta).
"""

from __future__ import annotations

import math

import numpy as np

from numtile import opcodes
from numtile.runtime import Codelet
from numtile.tiletensor.codelets.narrow import bits, scratch_bytes
from numtile.tiletensor.codelets.views import flat, rows
from numtile.tiletensor.precision import bf16_gemm

_GELU_TANH = opcodes.UNARY_OPS["gelu_tanh"]


def _gelu_tanh(ops, h, out):
    ops.bf16_unary(flat(bits(h)), out, _GELU_TANH)  # the forward's direct bfloat16 kernel


def _swiglu(ops, gate, up, out):
    ops.nn.swiglu_apply(flat(bits(gate)), flat(bits(up)), out)  # the forward's, on bits


# name -> (number of input tiles, kernel writing the activation's bits into a flat uint16 array)
ACTIVATIONS = {"gelu_tanh": (1, _gelu_tanh), "swiglu": (2, _swiglu)}


def _body(activation: str):
    count, activate = ACTIVATIONS[activation]

    def body(gemm2d, ops, *tiles_then_args):
        inputs = tiles_then_args[:count]
        other, grad_weight, act_first, trans_a, trans_b, beta = tiles_then_args[count:]
        act = ops.empty(tuple(inputs[0].shape), np.uint16)  # act(h)'s bfloat16 bits, h's shape
        activate(ops, *inputs, flat(act))
        a, b = (act, other) if act_first else (other, act)
        gemm2d(rows(bits(a)), rows(bits(b)), rows(grad_weight), trans_a, trans_b, 1.0, beta)

    return body


def _flops(count: int):
    def flops(*shapes_then_args) -> float:
        # 2 x (the gradient tile) x (the rows summed over): the GEMM's, as linear_bf16's
        return 2.0 * math.prod(shapes_then_args[count + 1]) * math.prod(shapes_then_args[0][:-1])

    return flops


def _scratch(count: int):
    def scratch(*tiles_then_args) -> int:
        # the activation's tile, and the widened GEMM operands of the fallback bf16 GEMM
        # (counted as ``linear_bf16`` counts them, with the activation in place of its input)
        act_bytes = tiles_then_args[0].nbytes
        return 3 * act_bytes + scratch_bytes(tiles_then_args[count])

    return scratch


def _codelet(activation: str) -> Codelet:
    count = ACTIVATIONS[activation][0]
    body = _body(activation)
    return Codelet(
        f"linear_bf16_weight_grad:{activation}",
        kernel=lambda ops, *rest: body(ops.gemm_bf16, ops, *rest),
        implementations={"cpu": lambda ops, *rest: body(bf16_gemm(ops), ops, *rest)},
        flops=_flops(count),
        scratch=_scratch(count),
    )


weight_grad = {activation: _codelet(activation) for activation in ACTIVATIONS}
