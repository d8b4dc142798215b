"""Cross-entropy fused over vocabulary tiles: no softmax copy of the logits is ever made.

Forward: per logits tile, an online log-sum-exp (running max and sum per row) and the pick
of the target logit, both accumulated across vocabulary tiles in any order. Backward: each
logits tile's gradient ``scale * (softmax - onehot)`` straight from the saved row statistics.
"""

from __future__ import annotations

import numpy as np

from numtile.autograd.tape import Function
from numtile.nn.functional import flat, lead_indices, row_stats, rows
from numtile.runtime import Access, Codelet, get_runtime
from numtile.tiletensor import elementwise as ew
from numtile.tiletensor import reduction as rd
from numtile.tiletensor.creation import from_numpy
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

R, W, ACC = Access.R, Access.W, Access.ACCUMULATE
IGNORE = -1


def _lse(ops, logits, m, s):
    ops.nn.logsumexp_accumulate(rows(logits), flat(m), flat(s))


def _pick(ops, logits, targets, picked, v_start):
    ops.nn.cross_entropy_pick(rows(logits), flat(targets), v_start, flat(picked))


def _backward(ops, logits, targets, m, s, grad, dlogits, v_start, inverse_count):
    scale = float(ops.to_host(grad).reshape(-1)[0]) * inverse_count
    ops.nn.cross_entropy_backward(
        rows(logits), flat(targets), flat(m), flat(s), v_start, scale, rows(dlogits)
    )


LOGSUMEXP = Codelet("logsumexp", kernel=_lse)
PICK = Codelet("cross_entropy_pick", kernel=_pick)
CROSS_ENTROPY_BACKWARD = Codelet("cross_entropy_backward", kernel=_backward)


class CrossEntropy(Function):
    """Mean over non-ignored positions of -log softmax(logits)[target]."""

    @staticmethod
    def forward(ctx, logits, targets, count):
        runtime = get_runtime()
        m, s, picked = row_stats(logits, -np.inf), row_stats(logits), row_stats(logits)
        v_starts = logits.layout.starts[-1]
        for lead in lead_indices(logits):
            t = targets.tile(lead)
            for v in range(logits.grid[-1]):
                tile = logits.tile(lead + (v,))
                runtime.submit(LOGSUMEXP, [(tile, R), (m.tile(lead), ACC), (s.tile(lead), ACC)])
                runtime.submit(PICK, [(tile, R), (t, R), (picked.tile(lead), ACC)], (v_starts[v],))
        row_loss = ew.subtract(ew.add(m, ew.log(s)), picked)
        mask = ew.astype(ew.not_equal(targets, IGNORE), np.float64)
        total = rd.sum(ew.multiply(row_loss, mask))
        ctx.save_for_backward(logits, targets, m, s)
        ctx.inverse_count = 1.0 / count
        return ew.astype(ew.multiply(total, 1.0 / count), logits.dtype)

    @staticmethod
    def backward(ctx, g):
        logits, targets, m, s = ctx.saved
        dlogits = TileTensor(logits.layout, logits.dtype)
        runtime = get_runtime()
        v_starts = logits.layout.starts[-1]
        grad = g.handles[0]
        for lead in lead_indices(logits):
            for v in range(logits.grid[-1]):
                runtime.submit(
                    CROSS_ENTROPY_BACKWARD,
                    [
                        (logits.tile(lead + (v,)), R),
                        (targets.tile(lead), R),
                        (m.tile(lead), R),
                        (s.tile(lead), R),
                        (grad, R),
                        (dlogits.tile(lead + (v,)), W),
                    ],
                    (v_starts[v], ctx.inverse_count),
                )
        return dlogits, None, None


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
