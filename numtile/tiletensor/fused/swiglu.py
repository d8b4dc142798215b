"""SwiGLU, LLaMA's gated activation ``silu(gate) * up``: one task per tile, forward and
backward (the unfused ops take two tasks forward and three backward, and keep ``silu(gate)``
for the backward as well)."""

from __future__ import annotations

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W


def _like(x: TileTensor, model: TileTensor) -> TileTensor:
    """``x`` in ``model``'s tiles (the shapes must agree)."""
    if x.shape != model.shape:
        raise ValueError(f"swiglu: operands of shapes {model.shape} and {x.shape} differ")
    return x if x.tile_shape == model.tile_shape else retile(x, model.tile_shape)


def swiglu_forward(gate: TileTensor, up: TileTensor) -> TileTensor:
    """``silu(gate) * up`` element by element, in ``gate``'s dtype and tiles.

    >>> import numtile as nt, numpy as np
    >>> gate, up = nt.from_numpy(np.array([0.0, 1.0])), nt.from_numpy(np.array([2.0, 3.0]))
    >>> [round(v, 4) for v in swiglu_forward(gate, up).to_numpy().tolist()]
    [0.0, 2.1932]
    """
    up = _like(up, gate)
    out = TileTensor(gate.layout, gate.dtype)
    runtime = get_runtime()
    for index in gate.layout.indices():
        runtime.submit(
            codelets.nn.swiglu,
            [(gate.tile(index), R), (up.tile(index), R), (out.tile(index), W)],
            (),
        )
    return out


def swiglu_backward(
    gate: TileTensor, up: TileTensor, grad: TileTensor
) -> tuple[TileTensor, TileTensor]:
    """The gradients of ``silu(gate) * up`` for the output's gradient ``grad``: (grad * up *
    silu'(gate), grad * silu(gate)), in ``gate``'s and ``up``'s dtypes and ``gate``'s tiles."""
    up, grad = _like(up, gate), _like(grad, gate)
    grad_gate = TileTensor(gate.layout, gate.dtype)
    grad_up = TileTensor(gate.layout, up.dtype)
    runtime = get_runtime()
    for index in gate.layout.indices():
        tiles = [(t.tile(index), R) for t in (gate, up, grad)]
        runtime.submit(
            codelets.nn.swiglu_backward,
            tiles + [(grad_gate.tile(index), W), (grad_up.tile(index), W)],
            (),
        )
    return grad_gate, grad_up
