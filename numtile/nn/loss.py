"""Cross-entropy of logits against integer targets: one autograd Function over the tiled
op of ``numtile.tiletensor.fused.loss``, fused over vocabulary tiles (no softmax copy)."""

from __future__ import annotations

import numpy as np

from numtile.autograd.tape import Function
from numtile.tiletensor.creation import from_numpy
from numtile.tiletensor.fused.loss import IGNORE, cross_entropy_backward, cross_entropy_forward
from numtile.tiletensor.manipulation import retile
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


def cross_entropy(logits: TileTensor, targets) -> TileTensor:
    """Mean cross-entropy of ``logits`` (..., V) against integer ``targets`` (...).

    Targets equal to -1 are ignored; others must lie in [0, V). ``targets`` may be a NumPy
    array or an int64 TileTensor.

    >>> import numtile as nt, numpy as np
    >>> logits = nt.zeros((2, 4), tile_shape=(1, 3))
    >>> bool(abs(cross_entropy(logits, np.array([1, 3])).item() - np.log(4)) < 1e-12)
    True
    """
    vocab = logits.shape[-1]
    if isinstance(targets, TileTensor):
        if targets.dtype != np.int64:
            raise TypeError(f"targets must be int64, got {targets.dtype}")
        values = targets.to_numpy()
    else:
        values = np.asarray(targets)
        if values.dtype.kind not in "iu":
            raise TypeError(f"targets must be integers, got {values.dtype}")
    if values.shape != logits.shape[:-1]:
        raise ValueError(
            f"targets have shape {values.shape} but logits {logits.shape} need {logits.shape[:-1]}"
        )
    bad = (values != IGNORE) & ((values < 0) | (values >= vocab))
    if bad.any():
        raise ValueError(
            f"target ids must lie in [0, {vocab}) (or be -1 to ignore); got {values[bad][:5]}"
        )
    count = int((values != IGNORE).sum())
    if count == 0:
        raise ValueError("every target is ignored (-1): the mean loss is undefined")
    targets = from_numpy(values.astype(np.int64), tile_shape=logits.tile_shape[:-1])
    if targets.tile_shape != logits.tile_shape[:-1]:
        targets = retile(targets, logits.tile_shape[:-1])
    return CrossEntropy.apply(logits, targets, count)
