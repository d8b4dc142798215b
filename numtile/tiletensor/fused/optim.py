"""Optimizer steps on a parameter tensor, one fused task per tile: AdamW and SGD."""

from __future__ import annotations

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.tensor import TileTensor

R, RW = Access.R, Access.RW


def adamw_step(
    param: TileTensor,
    grad: TileTensor,
    exp_avg: TileTensor,
    exp_avg_sq: TileTensor,
    *,
    lr: float,
    betas: tuple[float, float],
    eps: float,
    weight_decay: float,
    step: int,
) -> None:
    """One ``torch.optim.AdamW`` step of ``param`` in place (moments updated in place too).

    All four tensors share one layout.

    >>> import numtile as nt
    >>> w, g = nt.ones((3,)), nt.ones((3,))
    >>> m, v = nt.zeros((3,)), nt.zeros((3,))
    >>> adamw_step(w, g, m, v, lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, step=1)
    >>> [round(float(x), 4) for x in w.to_numpy()]
    [0.9, 0.9, 0.9]
    """
    args = (lr, betas[0], betas[1], eps, weight_decay, step)
    runtime = get_runtime()
    for p, g, m, v in zip(param.handles, grad.handles, exp_avg.handles, exp_avg_sq.handles):
        runtime.submit(codelets.nn.adamw, [(p, RW), (g, R), (m, RW), (v, RW)], args)


def sgd_step(param: TileTensor, grad: TileTensor, *, lr: float) -> None:
    """``param -= lr * grad`` in place, one task per tile.

    >>> import numtile as nt
    >>> w = nt.ones((2,)); sgd_step(w, nt.ones((2,)), lr=0.5); w.to_numpy().tolist()
    [0.5, 0.5]
    """
    runtime = get_runtime()
    for p, g in zip(param.handles, grad.handles):
        runtime.submit(codelets.nn.sgd, [(p, RW), (g, R)], (lr,))
