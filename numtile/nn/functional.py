"""Differentiable ops on activations of shape (..., features): linear, embedding, layer norm,
RMS norm, rotary position embedding, softmax and log-softmax.

Each is one autograd ``Function`` over a fused tiled op of ``numtile.tiletensor.fused`` (or
of ``numtile.tiletensor.reduction`` for the softmaxes): any tiling of the leading (batch,
sequence) axes works, leftovers included.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np

from numtile.autograd.reduction import LogSoftmax, Softmax
from numtile.autograd.tape import Function
from numtile.tiletensor.dtypes import bfloat16_dtype, is_bfloat16
from numtile.tiletensor.elementwise import astype
from numtile.tiletensor.fused.embedding import embedding_backward, embedding_forward
from numtile.tiletensor.fused.linear import (
    linear_backward_input,
    linear_backward_weight,
    linear_forward,
)
from numtile.tiletensor.fused.norm import (
    layer_norm_backward,
    layer_norm_forward,
    rms_norm_backward,
    rms_norm_forward,
)
from numtile.tiletensor.fused.rope import rope_forward
from numtile.tiletensor.fused.rows import match_last_tile
from numtile.tiletensor.fused.swiglu import swiglu_backward, swiglu_forward
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.precision import gemm_rounding
from numtile.tiletensor.reduction import sum as tensor_sum
from numtile.tiletensor.tensor import TileTensor


class LinearFunction(Function):
    """y = x @ W + b with W (in, out), or x @ W^T + b with W (out, in) when ``transposed``.

    In bf16-mixed (as ``torch.autocast``): ``x`` and W are cast to bfloat16 (``x`` kept so for
    the backward, W cast again there), the GEMMs accumulate in float32 and write a bfloat16
    ``y`` (the bias added before the one rounding); the backward reads bfloat16, gives ``x`` a
    gradient of its own dtype and W and b float32 ones (sums in float32)."""

    @staticmethod
    def forward(ctx, x, weight, bias=None, transposed=False):
        ctx.x_tiles, ctx.x_grad, ctx.x_dtype = x.tile_shape, x.requires_grad, x.dtype
        x = match_last_tile(x, weight.tile_shape[1 if transposed else 0])
        ctx.transposed = transposed
        ctx.has_bias = bias is not None
        ctx.weight_grad, ctx.weight_layout = weight.requires_grad, weight.layout
        ctx.weight_dtype = weight.dtype
        ctx.rounding = gemm_rounding()  # the backward GEMMs run in the forward's precision
        ctx.bf16 = ctx.rounding == BF16_MIXED and _bf16_able(x, weight, bias)
        if ctx.bf16:
            x, weight16 = _to_bf16(x, share=True), _to_bf16(weight)
            out_tile = (weight16.tile_shape[0 if transposed else 1],)
            if bias is not None and bias.tile_shape != out_tile:
                bias = retile(bias, out_tile)
            # W itself is saved, not its bfloat16 copy: the float32 master weight stays
            # resident anyway, while the copy would hold 2 more bytes a parameter from the
            # forward to the backward (gpt2-small: 237 MiB, spilled under a host limit); the
            # backward casts again, to the same bits
            ctx.save_for_backward(x, weight)
            return linear_forward(x, weight16, transposed, bias=bias)
        ctx.save_for_backward(x, weight)
        y = linear_forward(x, weight, transposed, ctx.rounding)
        if bias is not None:
            y = y + bias
        return y

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved
        gx = gw = gb = None
        if ctx.bf16:
            g = _to_bf16(g)
        if ctx.x_grad:
            if ctx.bf16:
                weight = _to_bf16(weight)
            gx = linear_backward_input(
                g, weight, x, ctx.transposed, ctx.rounding, dtype=ctx.x_dtype
            )
            gx = retile(gx, ctx.x_tiles)
        if ctx.weight_grad:
            gw = linear_backward_weight(
                x, g, ctx.weight_layout, ctx.transposed, ctx.rounding, dtype=ctx.weight_dtype
            )
        if ctx.has_bias:
            gb = tensor_sum(g, axis=tuple(range(g.ndim - 1)), dtype=ctx.weight_dtype)
        return gx, gw, gb


BF16_MIXED = gemm_rounding("bf16-mixed")


def _bf16_able(x, weight, bias) -> bool:
    """Whether bf16-mixed casts this linear to bfloat16 (float32 or bfloat16 operands)."""
    return all(
        t is None or t.dtype == np.float32 or is_bfloat16(t.dtype) for t in (x, weight, bias)
    )


_SHARED = threading.local()  # .copies: {id(float32 input): (input, its bfloat16 copy)}


@contextlib.contextmanager
def shared_bf16_casts() -> Iterator[None]:
    """Within the block, the bf16-mixed linear layers that read one float32 activation (the
    query/key/value projections of a normed input, the gate and up projections) cast it to
    bfloat16 once and share the copy: one cast task per tile and one copy kept for their
    backward, instead of one per layer. Values and gradients are unchanged (each layer still
    gives its input a float32 gradient of its own).

    >>> import numtile as nt
    >>> from numtile.nn.layers import Linear
    >>> a, b = Linear(4, 2), Linear(4, 3)
    >>> x = nt.ones((2, 4), dtype="float32")
    >>> with nt.nn.precision("bf16-mixed"), shared_bf16_casts():
    ...     a(x).dtype == b(x).dtype == nt.bfloat16
    True
    """
    outer = getattr(_SHARED, "copies", None)
    _SHARED.copies = {} if outer is None else outer
    try:
        yield
    finally:
        _SHARED.copies = outer


def _to_bf16(x: TileTensor, share: bool = False) -> TileTensor:
    """``x`` as bfloat16; with ``share``, inside ``shared_bf16_casts``, one copy per tensor."""
    if is_bfloat16(x.dtype):
        return x
    copies = getattr(_SHARED, "copies", None) if share else None
    if copies is None:
        return astype(x, bfloat16_dtype())
    hit = copies.get(id(x))
    if hit is None or hit[0] is not x:
        hit = copies[id(x)] = (x, astype(x, bfloat16_dtype()))
    return hit[1]


def linear(
    x: TileTensor, weight: TileTensor, bias: TileTensor | None = None, *, transposed: bool = False
) -> TileTensor:
    """``x @ W + b`` over the last axis of ``x`` (differentiable, fused).

    >>> import numtile as nt
    >>> w = nt.ones((3, 2), tile_shape=(2, 2))
    >>> linear(nt.ones((4, 3), tile_shape=(3, 2)), w).to_numpy()[0].tolist()
    [3.0, 3.0]
    """
    if x.shape[-1] != weight.shape[1 if transposed else 0]:
        raise ValueError(
            f"linear: input has {x.shape[-1]} features but the weight has shape {weight.shape}"
            f"{' (out, in)' if transposed else ' (in, out)'}"
        )
    return LinearFunction.apply(x, weight, bias, transposed=transposed)


class EmbeddingFunction(Function):
    """out[..., :] = table[ids[...], :] with ``table`` tiled over (vocabulary, features).
    The backward scatters into the table's gradient itself when it already has one (GPT-2's
    tied table, whose LM head gave it one first): no zeroed table-sized temporary."""

    adds_into_leaves = True

    @staticmethod
    def forward(ctx, table, ids):
        ctx.save_for_backward(ids)
        ctx.table_layout = table.layout
        return embedding_forward(table, ids)

    @staticmethod
    def backward(ctx, g):
        (ids,) = ctx.saved
        into = ctx.leaf_grads[0]
        if into is not None and (into.layout, into.dtype) == (ctx.table_layout, g.dtype):
            embedding_backward(ids, g, ctx.table_layout, into)
            return None, None
        return embedding_backward(ids, g, ctx.table_layout), None


def embedding(ids: TileTensor, table: TileTensor) -> TileTensor:
    """Rows of ``table`` picked by integer ``ids`` (any shape); differentiable in ``table``.

    >>> import numtile as nt, numpy as np
    >>> table = nt.from_numpy(np.arange(8.0).reshape(4, 2), tile_shape=(3, 1))
    >>> embedding(nt.from_numpy(np.array([3, 0])), table).to_numpy().tolist()
    [[6.0, 7.0], [0.0, 1.0]]
    """
    if ids.dtype != np.int64:
        raise TypeError(f"embedding ids must be int64, got {ids.dtype}")
    return EmbeddingFunction.apply(table, ids)


class LayerNormFunction(Function):
    """Layer norm over the last axis, whose features may be split across column tiles."""

    @staticmethod
    def forward(ctx, x, gamma, beta, eps):
        ctx.x_tiles = x.tile_shape
        y, x, s1, s2 = layer_norm_forward(x, gamma, beta, eps)
        ctx.save_for_backward(x, gamma, s1, s2)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, g):
        x, gamma, s1, s2 = ctx.saved
        dx, dgamma, dbeta = layer_norm_backward(x, g, gamma, s1, s2, ctx.eps)
        return retile(dx, ctx.x_tiles), dgamma, dbeta, None


def layer_norm(x: TileTensor, gamma: TileTensor, beta: TileTensor, eps: float = 1e-5):
    """Layer normalisation over the last axis with scale ``gamma`` and shift ``beta``.

    >>> import numtile as nt
    >>> x = nt.from_numpy([[1.0, 2.0, 3.0]], tile_shape=(1, 2))
    >>> g, b = nt.ones((3,), tile_shape=2), nt.zeros((3,), tile_shape=2)
    >>> [round(float(v), 4) for v in layer_norm(x, g, b).to_numpy()[0]]
    [-1.2247, 0.0, 1.2247]
    """
    if gamma.shape != (x.shape[-1],) or beta.shape != gamma.shape:
        raise ValueError(
            f"layer_norm: x has {x.shape[-1]} features but gamma/beta have shapes "
            f"{gamma.shape} and {beta.shape}"
        )
    if beta.tile_shape != gamma.tile_shape:
        beta = retile(beta, gamma.tile_shape)
    return LayerNormFunction.apply(x, gamma, beta, eps)


class RMSNormFunction(Function):
    """RMS norm over the last axis, whose features may be split across column tiles."""

    @staticmethod
    def forward(ctx, x, gamma, eps):
        ctx.x_tiles = x.tile_shape
        y, x, s2 = rms_norm_forward(x, gamma, eps)
        ctx.save_for_backward(x, gamma, s2)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, g):
        x, gamma, s2 = ctx.saved
        dx, dgamma = rms_norm_backward(x, g, gamma, s2, ctx.eps)
        return retile(dx, ctx.x_tiles), dgamma, None


def rms_norm(x: TileTensor, gamma: TileTensor, eps: float = 1e-6) -> TileTensor:
    """``x / sqrt(mean(x**2) + eps) * gamma`` over the last axis (LLaMA's RMSNorm).

    >>> import numtile as nt
    >>> x = nt.from_numpy([[3.0, 4.0]], tile_shape=(1, 1))
    >>> [round(float(v), 4) for v in rms_norm(x, nt.ones((2,), tile_shape=1), 0.0).to_numpy()[0]]
    [0.8485, 1.1314]
    """
    if gamma.shape != (x.shape[-1],):
        raise ValueError(
            f"rms_norm: x has {x.shape[-1]} features but gamma has shape {gamma.shape}"
        )
    return RMSNormFunction.apply(x, gamma, eps)


class SwiGLUFunction(Function):
    """``silu(gate) * up`` in one task per tile; the backward keeps ``gate`` and ``up`` (not
    ``silu(gate)``) and gives both gradients in one task per tile."""

    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return swiglu_forward(gate, up)

    @staticmethod
    def backward(ctx, g):
        gate, up = ctx.saved
        return swiglu_backward(gate, up, g)


def swiglu(gate: TileTensor, up: TileTensor) -> TileTensor:
    """``silu(gate) * up`` element by element (LLaMA's gated activation; differentiable,
    fused), in the operands' dtype. bfloat16 operands are widened in registers and the result
    rounded once (the unfused ops round ``silu(gate)`` as well).

    >>> import numtile as nt
    >>> gate, up = nt.from_numpy([[0.0, 1.0]]), nt.from_numpy([[2.0, 3.0]])
    >>> [round(float(v), 4) for v in swiglu(gate, up).to_numpy()[0]]
    [0.0, 2.1932]
    """
    if gate.shape != up.shape or gate.dtype != up.dtype:
        raise ValueError(
            f"swiglu: gate {gate.shape} {gate.dtype} and up {up.shape} {up.dtype} must have one "
            "shape and one dtype"
        )
    return SwiGLUFunction.apply(gate, up)


class RotaryFunction(Function):
    """Rotary position embedding: a rotation per (position, pair), its backward the inverse."""

    @staticmethod
    def forward(ctx, x, cos, sin, head_dim):
        ctx.x_tiles = x.tile_shape
        ctx.save_for_backward(cos, sin)
        ctx.head_dim = head_dim
        return rope_forward(x, cos, sin, head_dim)

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved
        dx = rope_forward(g, cos, sin, ctx.head_dim, inverse=True)
        return retile(dx, ctx.x_tiles), None, None, None


def rotary_embedding(x: TileTensor, cos: TileTensor, sin: TileTensor, head_dim: int):
    """Each head of ``x`` (B, T, heads * head_dim) rotated as Hugging Face's
    ``apply_rotary_pos_emb`` does: ``x * cos + rotate_half(x) * sin``, with the angle tables
    ``cos`` and ``sin`` of shape (T, head_dim / 2) (differentiable in ``x``).

    >>> import numtile as nt, numpy as np
    >>> x = nt.from_numpy(np.array([[[1.0, 0.0, 0.0, 1.0]]]))
    >>> cos, sin = nt.from_numpy(np.array([[0.0, 1.0]])), nt.from_numpy(np.array([[1.0, 0.0]]))
    >>> rotary_embedding(x, cos, sin, 4).to_numpy().tolist()
    [[[0.0, 0.0, 1.0, 1.0]]]
    """
    if x.ndim != 3 or head_dim % 2 or x.shape[2] % head_dim:
        raise ValueError(
            f"rotary_embedding expects (B, T, heads * head_dim) with an even head_dim, got "
            f"shape {x.shape} and head_dim {head_dim}"
        )
    if cos.shape != (x.shape[1], head_dim // 2) or sin.shape != cos.shape:
        raise ValueError(
            f"rotary_embedding: cos and sin must have shape {(x.shape[1], head_dim // 2)}, got "
            f"{cos.shape} and {sin.shape}"
        )
    return RotaryFunction.apply(x, cos, sin, head_dim)


def _check_axis(x: TileTensor, axis: int, name: str) -> None:
    if not isinstance(x, TileTensor):
        raise TypeError(f"{name} expects a TileTensor, got {type(x).__name__}")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{name}: axis {axis} is out of range for shape {x.shape}")


def softmax(x: TileTensor, axis: int = -1) -> TileTensor:
    """``exp(x) / sum(exp(x))`` along ``axis`` (differentiable, fused softmax kernels).

    Tiles along ``axis`` are merged for the kernel; the result keeps the tiling of ``x``.

    >>> import numtile as nt
    >>> [round(float(v), 4) for v in softmax(nt.from_numpy([[0.0, 1.0, 2.0]])).to_numpy()[0]]
    [0.09, 0.2447, 0.6652]
    """
    _check_axis(x, axis, "softmax")
    return Softmax.apply(x, axis)


def log_softmax(x: TileTensor, axis: int = -1) -> TileTensor:
    """``log(softmax(x))`` along ``axis``, computed as ``x - max - log(sum(exp(x - max)))``
    so that it stays finite for logits of any size (differentiable).

    >>> import numtile as nt
    >>> log_softmax(nt.from_numpy([[0.0, 1000.0]])).to_numpy().tolist()
    [[-1000.0, 0.0]]
    """
    _check_axis(x, axis, "log_softmax")
    return LogSoftmax.apply(x, axis)
