"""Cross-entropy of logits against integer targets: one autograd Function over the tiled
op of ``numtile.tiletensor.fused.loss``, fused over vocabulary tiles (no softmax copy); and a
language model's head and loss as one Function (``linear_cross_entropy``), whose backward
finishes one vocabulary tile before the next (``numtile.tiletensor.fused.lm_head``)."""

from __future__ import annotations

import numpy as np

from numtile.autograd.tape import Function, Later
from numtile.nn.functional import BF16_MIXED, _bf16_able, _to_bf16, linear
from numtile.tiletensor.creation import from_numpy
from numtile.tiletensor.dtypes import is_bfloat16
from numtile.tiletensor.fused.lm_head import (
    linear_cross_entropy_backward,
    linear_cross_entropy_forward,
    logit_columns,
)
from numtile.tiletensor.fused.loss import IGNORE, cross_entropy_backward, cross_entropy_forward
from numtile.tiletensor.fused.rows import match_last_tile
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.placement import distributed, host_memory_limited
from numtile.tiletensor.precision import gemm_rounding
from numtile.tiletensor.tensor import TileTensor


class CrossEntropy(Function):
    """Mean over non-ignored positions of -log softmax(logits)[target]."""

    @staticmethod
    def forward(ctx, logits, targets, count):
        loss, m, s = cross_entropy_forward(logits, targets, count)
        ctx.save_for_backward(logits, targets, m, s)
        ctx.count = count
        return loss

    @staticmethod
    def backward(ctx, g):
        logits, targets, m, s = ctx.saved
        return cross_entropy_backward(logits, targets, m, s, g, ctx.count), None, None


class LinearCrossEntropy(Function):
    """``cross_entropy(x @ W^T, targets)`` with W (vocabulary, features), as one node; the
    logits go to ``sink`` (not differentiable: the loss is). Precision as ``linear``'s."""

    @staticmethod
    def forward(ctx, x, weight, targets, count, sink):
        ctx.x_tiles, ctx.x_dtype, ctx.count = x.tile_shape, x.dtype, count
        ctx.x_grad, ctx.weight_grad, ctx.weight_dtype = (
            x.requires_grad,
            weight.requires_grad,
            weight.dtype,
        )
        x = match_last_tile(x, weight.tile_shape[1])
        ctx.rounding = gemm_rounding()
        if ctx.rounding == BF16_MIXED and _bf16_able(x, weight, None):
            x = _to_bf16(x, share=True)  # W is cast a tile row at a time
        loss, m, s, logits = linear_cross_entropy_forward(x, weight, targets, count, ctx.rounding)
        # W itself is kept, not its bfloat16 copy (as ``LinearFunction`` does); in bf16-mixed
        # under a host memory limit not the logits either: the backward computes them again
        kept = None if host_memory_limited() and is_bfloat16(x.dtype) else logits
        ctx.save_for_backward(x, weight, kept, targets, m, s)
        sink.append(logits)
        return loss

    @staticmethod
    def backward(ctx, g):
        x, weight, logits, targets, m, s = ctx.saved
        ctx.saved = ()
        columns = None if logits is None else logit_columns(logits)
        # computing the logits again anyway (under a host limit), with gradients consumed as
        # the backward goes (``Optimizer.step_in_backward``), W's gradient is left to the end
        # of the backward, when the activations are gone: one more pass of the head's GEMMs
        # instead of W's float32 gradient held through the whole backward
        later = columns is None and ctx.x_grad and ctx.weight_grad and ctx.may_defer
        del logits  # its tiles now die column by column, unless the caller holds the logits

        def grads(want_x, want_weight):
            return linear_cross_entropy_backward(
                columns,
                x,
                weight,
                targets,
                m,
                s,
                g,
                ctx.count,
                x_dtype=ctx.x_dtype,
                weight_dtype=ctx.weight_dtype,
                want_x=want_x,
                want_weight=want_weight,
                rounding=ctx.rounding,
            )

        gx, gw = grads(ctx.x_grad, ctx.weight_grad and not later)
        if later:
            gw = Later(lambda: grads(False, True)[1])
        if gx is not None:
            gx = retile(gx, ctx.x_tiles)
        return gx, gw, None, None


def linear_cross_entropy(x: TileTensor, weight: TileTensor, targets):
    """``(logits, loss)`` of a language model's head: ``logits = x @ W^T`` (W (vocabulary,
    features), in the current precision as ``functional.linear``) and their mean
    cross-entropy against ``targets`` (as ``cross_entropy``). The loss is differentiable in
    ``x`` and W; the logits are returned for reading only (a backward from them raises).
    Fused so that the backward walks the vocabulary tiles once, holding one tile's worth of
    the logits' gradient and of W's bfloat16 copy at a time; drop the logits before the
    backward and their tiles are freed as it goes. Under a host memory limit
    (``NUMTILE_HOST_MEM_LIMIT``) the backward computes the logits again instead of keeping
    them (a third more work in the head's GEMMs, the logits' memory free at the peak).

    >>> import numtile as nt, numpy as np
    >>> x = nt.ones((2, 3), tile_shape=(1, 3))
    >>> logits, loss = linear_cross_entropy(x, nt.zeros((5, 3), tile_shape=(2, 3)), [1, 4])
    >>> logits.shape, bool(abs(loss.item() - np.log(5)) < 1e-12)
    ((2, 5), True)
    """
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"linear_cross_entropy: input has {x.shape[-1]} features but the weight has shape "
            f"{weight.shape} (vocabulary, features)"
        )
    if distributed():  # under MPI the two ops' chains place their partial sums by rank
        logits = linear(x, weight, transposed=True)
        return logits, cross_entropy(logits, targets)
    targets, count = _targets(targets, x.shape[:-1] + weight.shape[:1], x.tile_shape[:-1])
    sink: list[TileTensor] = []
    loss = LinearCrossEntropy.apply(x, weight, targets, count, sink=sink)
    return sink[0], loss


def cross_entropy(logits: TileTensor, targets) -> TileTensor:
    """Mean cross-entropy of ``logits`` (..., V) against integer ``targets`` (...).

    Targets equal to -1 are ignored; others must lie in [0, V). ``targets`` may be a NumPy
    array or an int64 TileTensor.

    >>> import numtile as nt, numpy as np
    >>> logits = nt.zeros((2, 4), tile_shape=(1, 3))
    >>> bool(abs(cross_entropy(logits, np.array([1, 3])).item() - np.log(4)) < 1e-12)
    True
    """
    targets, count = _targets(targets, logits.shape, logits.tile_shape[:-1])
    return CrossEntropy.apply(logits, targets, count)


def _targets(targets, logits_shape, lead_tiles) -> tuple[TileTensor, int]:
    """``targets`` checked against logits of ``logits_shape`` (ids in [0, V) or -1), as an
    int64 tensor tiled by ``lead_tiles``, and the number of positions not ignored."""
    vocab = logits_shape[-1]
    if isinstance(targets, TileTensor):
        if targets.dtype != np.int64:
            raise TypeError(f"targets must be int64, got {targets.dtype}")
        values = targets.to_numpy()
    else:
        values = np.asarray(targets)
        if values.dtype.kind not in "iu":
            raise TypeError(f"targets must be integers, got {values.dtype}")
    if values.shape != logits_shape[:-1]:
        raise ValueError(
            f"targets have shape {values.shape} but logits {logits_shape} need {logits_shape[:-1]}"
        )
    bad = (values != IGNORE) & ((values < 0) | (values >= vocab))
    if bad.any():
        raise ValueError(
            f"target ids must lie in [0, {vocab}) (or be -1 to ignore); got {values[bad][:5]}"
        )
    count = int((values != IGNORE).sum())
    if count == 0:
        raise ValueError("every target is ignored (-1): the mean loss is undefined")
    out = from_numpy(values.astype(np.int64), tile_shape=lead_tiles)
    return (out if out.tile_shape == lead_tiles else retile(out, lead_tiles)), count
