"""The weight gradient of a bf16-mixed linear layer whose input is an activation of tiles the
backward keeps anyway (``act(h) @ op(W)`` with act ``gelu_tanh`` of h, or ``swiglu`` of
(gate, up)): ``linear.linear_backward_weight`` of ``act(h)``, with ``act(h)`` recomputed tile
by tile inside each GEMM task (``codelets.activated``) instead of kept from the forward. The
same tasks in the same order, so the same float32 sums, bit for bit."""

from __future__ import annotations

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.dtypes import is_bfloat16
from numtile.tiletensor.fused.rows import lead_indices, match_last_tile
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.placement import zero_first
from numtile.tiletensor.tensor import TileTensor

R, W, RW = Access.R, Access.W, Access.RW

ACTIVATIONS = tuple(codelets.activated.ACTIVATIONS)


def activated_weight_grad(
    activation: str,
    inputs: tuple[TileTensor, ...],
    grad: TileTensor,
    weight_layout: Layout,
    transposed: bool = False,
) -> TileTensor:
    """d(act(inputs) @ op(W))/dW, float32 in ``weight_layout`` (W (in, out), or (out, in)
    when ``transposed``), for bfloat16 ``inputs`` of one layout whose last tile matches W's
    input tile and the bfloat16 gradient ``grad`` of the layer's output.

    >>> import numtile as nt
    >>> h = nt.zeros((2, 4), dtype=nt.bfloat16, tile_shape=(2, 2))
    >>> g = nt.ones((2, 3), dtype=nt.bfloat16, tile_shape=(2, 3))
    >>> w = nt.zeros((4, 3), tile_shape=(2, 3)).layout
    >>> activated_weight_grad("gelu_tanh", (h,), g, w).to_numpy().tolist()[0]
    [0.0, 0.0, 0.0]
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    first = inputs[0]
    assert all(t.layout == first.layout and is_bfloat16(t.dtype) for t in inputs)
    assert (
        is_bfloat16(grad.dtype)
        and first.tile_shape[-1] == weight_layout.tile_shape[1 if transposed else 0]
    )
    grad = match_last_tile(grad, weight_layout.tile_shape[0 if transposed else 1])
    gw = TileTensor(weight_layout, np.float32)
    codelet = codelets.activated.weight_grad[activation]
    runtime = get_runtime()
    leads = list(lead_indices(first))
    for index in weight_layout.indices():
        j, k = (index[0], index[1]) if transposed else (index[1], index[0])
        out_tile = gw.tile(index)
        # per lead: the activation's input tiles and grad's, in linear_bf16's operand order
        tasks = [([t.tile(lead + (k,)) for t in inputs], grad.tile(lead + (j,))) for lead in leads]
        split = zero_first(
            runtime, out_tile, [(g, *acts) if transposed else (*acts, g) for acts, g in tasks]
        )
        for n, (acts, g_tile) in enumerate(tasks):
            first_task = n == 0 and not split
            runtime.submit(
                codelet,
                [*((t, R) for t in acts), (g_tile, R), (out_tile, W if first_task else RW)],
                (not transposed, True, False, 0.0 if first_task else 1.0),
            )
    return gw
