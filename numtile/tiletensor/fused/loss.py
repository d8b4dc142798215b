"""Cross-entropy fused over vocabulary tiles: no softmax copy of the logits is ever made.

Forward: per logits tile, an online log-sum-exp (running max and sum per row) and the pick
of the target logit, both accumulated across vocabulary tiles in any order. Backward: each
logits tile's gradient ``scale * (softmax - onehot)`` straight from the saved row statistics.
"""

from __future__ import annotations

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.dtypes import is_bfloat16
from numtile.tiletensor.elementwise import add, astype, log, multiply, not_equal, subtract
from numtile.tiletensor.fused.rows import lead_indices, row_stats
from numtile.tiletensor.reduction import sum as tensor_sum
from numtile.tiletensor.tensor import TileTensor

R, W, ACC = Access.R, Access.W, Access.ACCUMULATE
IGNORE = -1  # the target id of positions the loss skips


def cross_entropy_forward(logits: TileTensor, targets: TileTensor, count: int):
    """(loss, m, s): the mean over the ``count`` non-ignored rows of -log softmax[target], and
    each row's running max ``m`` and sum ``s`` of exp(logit - m) (for the backward).

    ``targets`` holds int64 ids tiled like ``logits`` without its last axis.

    >>> import numtile as nt, numpy as np
    >>> targets = nt.from_numpy(np.array([1, 3]), tile_shape=1)
    >>> loss = cross_entropy_forward(nt.zeros((2, 4), tile_shape=(1, 3)), targets, 2)[0]
    >>> bool(abs(loss.item() - np.log(4)) < 1e-12)
    True
    """
    stats = loss_stats(logits)
    for lead in lead_indices(logits):
        for v in range(logits.grid[-1]):
            add_loss_stats(stats, logits, targets, lead, v)
    return finish_loss(stats, targets, count, logits.dtype)


def loss_stats(logits: TileTensor) -> tuple[TileTensor, TileTensor, TileTensor]:
    """Each row's running max ``m``, sum ``s`` of exp(logit - m) and target logit, before the
    first vocabulary tile."""
    return row_stats(logits, -np.inf), row_stats(logits), row_stats(logits)


def add_loss_stats(stats, logits: TileTensor, targets: TileTensor, lead, v: int) -> None:
    """Fold logits tile ``lead + (v,)`` into ``stats`` (``loss_stats``), in any order."""
    runtime = get_runtime()
    tile = logits.tile(lead + (v,))
    m, s, picked = (t.tile(lead) for t in stats)
    runtime.submit(codelets.nn.logsumexp, [(tile, R), (m, ACC), (s, ACC)])
    runtime.submit(
        codelets.nn.cross_entropy_pick,
        [(tile, R), (targets.tile(lead), R), (picked, ACC)],
        (logits.layout.starts[-1][v],),
    )


def finish_loss(stats, targets: TileTensor, count: int, dtype):
    """(loss, m, s) once every logits tile is in ``stats``, for logits of ``dtype``."""
    m, s, picked = stats
    row_loss = subtract(add(m, log(s)), picked)
    mask = astype(not_equal(targets, IGNORE), np.float64)
    total = tensor_sum(multiply(row_loss, mask))
    # a bfloat16 loss would keep 3 digits: float32, as autocast computes the loss
    loss_dtype = np.float32 if is_bfloat16(dtype) else dtype
    return astype(multiply(total, 1.0 / count), loss_dtype), m, s


def cross_entropy_backward(logits, targets, m, s, grad: TileTensor, count: int) -> TileTensor:
    """d(loss)/d(logits) for the 0-d ``grad`` of the loss ``cross_entropy_forward`` gave
    (of the logits' dtype: computed in float32 and rounded once for bfloat16 logits)."""
    dlogits = TileTensor(logits.layout, logits.dtype)
    for lead in lead_indices(logits):
        for v in range(logits.grid[-1]):
            add_loss_grad(
                logits.tile(lead + (v,)),
                dlogits.tile(lead + (v,)),
                targets,
                m,
                s,
                grad,
                count,
                lead,
                logits.layout.starts[-1][v],
            )
    return dlogits


def add_loss_grad(tile, out, targets, m, s, grad: TileTensor, count: int, lead, v_start):
    """``out`` = the loss's gradient for logits ``tile`` (lead tile ``lead``, first vocabulary
    id ``v_start``), from the row statistics ``m``, ``s`` and the 0-d loss gradient ``grad``."""
    get_runtime().submit(
        codelets.nn.cross_entropy_backward,
        [
            (tile, R),
            (targets.tile(lead), R),
            (m.tile(lead), R),
            (s.tile(lead), R),
            (grad.handles[0], R),
            (out, W),
        ],
        (v_start, 1.0 / count),
    )
