"""Optimizers (``AdamW`` as one fused tile kernel, ``SGD``), LR schedule, gradient clipping."""

from __future__ import annotations

import math
from collections.abc import Iterable

from numtile.autograd.tape import backward
from numtile.tiletensor.creation import zeros
from numtile.tiletensor.elementwise import multiply
from numtile.tiletensor.fused.optim import adamw_step, sgd_step
from numtile.tiletensor.placement import distributed, host_memory_limited, wait_tensors
from numtile.tiletensor.reduction import sum_of_squares
from numtile.tiletensor.tensor import TileTensor


def _groups(params) -> list[dict]:
    params = list(params)
    if params and isinstance(params[0], dict):
        return [dict(group, params=list(group["params"])) for group in params]
    return [{"params": params}]


class Optimizer:
    """Parameter groups (lists of tensors with their own hyper-parameters) and a step count."""

    defaults: dict = {}

    def __init__(self, params: Iterable, **hyper) -> None:
        self.param_groups = []
        for group in _groups(params):
            merged = {**self.defaults, **hyper, **group}
            for p in merged["params"]:
                if not isinstance(p, TileTensor) or not p.requires_grad:
                    raise TypeError("optimizers take TileTensors that require gradients")
            self.param_groups.append(merged)
        self.step_count = 0

    def parameters(self) -> list[TileTensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def step(self) -> None:
        """Update every parameter that has a gradient."""
        self.step_count += 1
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, group)

    def _update(self, p: TileTensor, group: dict) -> None:
        raise NotImplementedError

    def step_in_backward(self, loss: TileTensor) -> None:
        """``loss.backward(); self.step(); self.zero_grad()`` in one pass: each parameter is
        updated, and its gradient dropped, as soon as the backward has submitted the last
        rule that adds to that gradient, while the rest of the backward runs.

        The updates are the same numbers as step()'s (the update tasks read the completed
        gradients: the runtime orders them after every task that adds to them), but the
        gradients never all exist at once, and the optimizer's memory-bound tasks run beside
        the backward's GEMMs instead of after them. Not for what needs every gradient before
        any update: clipping by the global norm, accumulating gradients over several batches
        (for those, call backward() and step()). A parameter that the loss does not reach
        keeps the gradient it had, and is updated with it, as step() would. Under MPI it runs
        backward(), step() and zero_grad().

        >>> import numtile as nt
        >>> w = nt.ones((3,)).requires_grad_()
        >>> opt = SGD([w], lr=0.5)
        >>> opt.step_in_backward((w * w).sum())
        >>> w.to_numpy().tolist(), w.grad
        ([0.0, 0.0, 0.0], None)
        """
        if not loss.requires_grad:
            raise RuntimeError("step_in_backward() on a loss that does not require grad")
        if distributed():
            backward(loss)
            self.step()
            self.zero_grad()
            return
        self.step_count += 1
        groups = {id(p): group for group in self.param_groups for p in group["params"]}

        def update(leaf: TileTensor) -> None:  # an updated parameter's gradient is dropped
            group = groups.get(id(leaf))
            if group is not None and leaf.grad is not None:
                self._update(leaf, group)
                leaf.grad = None

        backward(loss, on_leaf_done=update)
        for p in self.parameters():  # beyond the loss's graph: as step() and zero_grad()
            update(p)

    @property
    def lr(self) -> float:
        return self.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value: float) -> None:
        for group in self.param_groups:
            group["lr"] = value


class AdamW(Optimizer):
    """``torch.optim.AdamW`` semantics; each parameter tile is updated by one fused task.

    >>> import numtile as nt
    >>> w = nt.ones((3,)).requires_grad_()
    >>> opt = AdamW([w], lr=0.1, weight_decay=0.0)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(float(v), 4) for v in w.to_numpy()]
    [0.9, 0.9, 0.9]
    """

    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2}

    def __init__(self, params: Iterable, **hyper) -> None:
        super().__init__(params, **hyper)
        for group in self.param_groups:
            b1, b2 = group["betas"]
            if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
                raise ValueError(f"betas must lie in [0, 1), got {group['betas']}")
            if group["lr"] < 0 or group["eps"] < 0 or group["weight_decay"] < 0:
                raise ValueError(
                    f"lr, eps and weight_decay must be >= 0, got {group['lr']}, "
                    f"{group['eps']}, {group['weight_decay']}"
                )
        self.state: dict[int, tuple[TileTensor, TileTensor]] = {}

    def _moments(self, p: TileTensor) -> tuple[TileTensor, TileTensor]:
        if id(p) not in self.state:
            self.state[id(p)] = (
                zeros(p.shape, p.dtype, p.tile_shape),
                zeros(p.shape, p.dtype, p.tile_shape),
            )
        return self.state[id(p)]

    def _update(self, p: TileTensor, group: dict) -> None:
        exp_avg, exp_avg_sq = self._moments(p)
        adamw_step(
            p,
            p.grad,
            exp_avg,
            exp_avg_sq,
            lr=group["lr"],
            betas=group["betas"],
            eps=group["eps"],
            weight_decay=group["weight_decay"],
            step=self.step_count,
        )
        # under a host memory limit the moments, read once a step, are the first tiles to
        # leave RAM after their update (before the weights the next forward reads)
        if host_memory_limited():
            exp_avg.wont_use()
            exp_avg_sq.wont_use()


class SGD(Optimizer):
    """Plain gradient descent: ``p -= lr * grad``, one task per tile."""

    defaults = {"lr": 1e-2}

    def _update(self, p: TileTensor, group: dict) -> None:
        sgd_step(p, p.grad, lr=group["lr"])


def cosine_schedule(step: int, *, lr: float, warmup: int, total: int, min_lr: float = 0.0):
    """Linear warm-up to ``lr`` over ``warmup`` steps, then cosine decay to ``min_lr``.

    >>> [round(cosine_schedule(s, lr=1.0, warmup=2, total=6), 3) for s in range(7)]
    [0.5, 1.0, 1.0, 0.854, 0.5, 0.146, 0.0]
    """
    if step < warmup:
        return lr * (step + 1) / warmup
    if step >= total:
        return min_lr
    progress = (step - warmup) / max(1, total - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def clip_grad_norm(parameters: Iterable[TileTensor], max_norm: float) -> float:
    """Scale all gradients so their global 2-norm is at most ``max_norm``; return the norm.

    (The norm is read on the host: one synchronisation per call.)
    """
    grads = [p for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    squares = [sum_of_squares(p.grad) for p in grads]
    wait_tensors(squares)  # under MPI: one exchange for all, not one per item()
    total = math.sqrt(sum(float(s.item()) for s in squares))
    if max_norm > 0 and total > max_norm:
        factor = max_norm / (total + 1e-6)
        for p in grads:
            p.grad = multiply(p.grad, factor)
    return total
