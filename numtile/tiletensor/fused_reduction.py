"""Reductions of deferred element-wise expressions, one fused task per chain of tiles.

``nt.any(x > 2, axis=0)`` unfused writes the bool tensor ``x > 2`` and reduces it; with
automatic fusion on (``auto_fusion``), ``x > 2`` is a deferred expression when the reduction
sees it, and here each task evaluates the expression over its tiles and combines every
element straight into the reduction's partials (``ops_cpu.fusion_reduce``): x is read once and
nothing but the result is written. Every reduction of ``reduction._reduce`` takes this path
(sum, prod, max, min, any, all, mean's sum, the vector norms' sums and maximum), with the
conversion to the accumulator's dtype (``sum`` of bools in int64) fused as a last step.

Tasks are chains of tiles, as the column sums' (``reduction.submit_chains``): a task reduces
a few tiles of one output tile in turn, the first chain writing it; with fewer output tiles
than workers each chain writes a partial tile and a last task combines them in order. The
max, min, any and all equal the unfused ones exactly; sums and products accumulate in the
same precision and order of tiles, and may differ from them in the last bits.

The expression runs unfused first (materialised as before, then reduced), where:

- a runtime has workers of another kind than CPU (automatic fusion is off with GPU workers:
  no CUDA twin), or the expression cannot be traced with the conversion (complex);
- the reduced axes are not adjacent (the unfused kernels gather them first), an axis is
  empty, or an input broadcasts along some axes only (inputs are whole tiles or one
  element);
- an input's task was cut by a runtime shutdown (the materialised tiles carry the error).

A deferred tensor that is reduced stays deferred: read again later, its expression runs
then (once more). Its deferred operands held elsewhere are materialised first, as
``auto_fusion`` does for any consumer.
"""

from __future__ import annotations

import functools
import math

from numtile.opcodes import REDUCE_OPS
from numtile.runtime import Access, Codelet, get_runtime
from numtile.tiletensor.elementwise_core import source_tile
from numtile.tiletensor.fusion import _aligned, _describe, _scalar_values
from numtile.tiletensor.fusion_trace import Plan
from numtile.tiletensor.reduction import (
    _COMBINE,
    _identity,
    _tile_plan,
    reduced_layout,
    submit_chains,
)
from numtile.tiletensor.tensor import TileTensor

R, W, ACC = Access.R, Access.W, Access.ACCUMULATE


def _chain_kernel(expression: tuple, op: str):
    def kernel(ops, *tiles_and_args):
        """dst (op)= the reduction of the expression over each tile of the chain: arguments
        (pre, n, post) of each, the inputs' positions among the tiles, first, identity and
        the scalars."""
        plans, positions, first, identity, scalars = tiles_and_args[-5:]
        tiles, out = tiles_and_args[:-6], tiles_and_args[-6].reshape(-1)
        if first:
            ops.fill(out, out.dtype.type(identity))
        for (pre, n, post), position in zip(plans, positions):
            inputs = tuple(tiles[k].reshape(-1) for k in position)
            ops.fused_reduce(expression, op, out, pre, n, post, inputs, scalars)

    return kernel


def _chain_flops(*shapes_and_args):
    plans = shapes_and_args[-5]
    return float(sum(math.prod(plan) for plan in plans))


@functools.lru_cache(maxsize=1024)
def _codelet(expression: tuple, op: str) -> Codelet:
    """The codelet of one expression and reduction (``fused_reduce:max:greater``)."""
    return Codelet(
        f"fused_reduce:{op}:{_describe(expression)}",
        implementations={"cpu": _chain_kernel(expression, op)},
        flops=_chain_flops,
    )


def _combine_kernel(ops, *tiles_and_args):
    """dst = identity, then each partial tile combined into it in turn (by op ``code``)."""
    code, identity = tiles_and_args[-2:]
    partials, out = tiles_and_args[:-3], tiles_and_args[-3].reshape(-1)
    ops.fill(out, out.dtype.type(identity))
    for partial in partials:
        ops.reduce_accumulate(partial.reshape(-1), out, 1, 1, out.size, code)


_combine = Codelet(
    "fused_reduce:combine",
    implementations={"cpu": _combine_kernel},
    flops=lambda *shapes_and_args: float(sum(map(math.prod, shapes_and_args[:-3]))),
)


def fusable(runtime) -> bool:
    """True where every worker of ``runtime`` runs the fused reductions (CPU workers)."""
    return set(runtime.kinds) == {"cpu"} and all(hasattr(o, "fused_reduce") for o in runtime.ops)


def _flat(tensors, layout) -> bool:
    """True where every input is read whole or as one element by each tile of ``layout``."""
    return all(t.shape == layout.shape or t.size == 1 for t in tensors)


def reduce(plan: Plan, leaves: list, layout, op: str, axes, dtype) -> TileTensor | None:
    """The reduction ``op`` over ``axes`` (in ``dtype``, plan's) of ``plan`` on ``leaves``
    (tensors and scalars) of ``layout``, one fused task per chain of tiles; None (nothing
    submitted) where it does not fuse."""
    tensors = [leaves[index] for index in plan.inputs]
    contiguous = all(b == a + 1 for a, b in zip(axes, axes[1:]))
    if not contiguous or 0 in layout.shape or not _flat(tensors, layout):
        return None
    tensors = [_aligned(t, layout) for t in tensors]
    kept = [a for a in range(layout.ndim) if a not in axes]
    out = TileTensor(reduced_layout(layout, kept), dtype)
    groups: dict[tuple, list] = {}  # output tile -> the indices of the tiles reduced into it
    for index in layout.indices():
        groups.setdefault(tuple(index[a] for a in kept), []).append(index)
    runtime = get_runtime()
    codelet = _codelet(plan.expression, op)
    scalars = _scalar_values(plan, leaves)
    identity = _identity(op, dtype)

    def chain_task(chain, dst, first):
        handles: dict[int, tuple] = {}  # id -> (position, handle): a broadcast tile once
        positions, plans = [], []
        for index in chain:
            tiles = [source_tile(t, index) for t in tensors]
            for tile in tiles:
                handles.setdefault(id(tile), (len(handles), tile))
            positions.append(tuple(handles[id(tile)][0] for tile in tiles))
            plans.append(_tile_plan(layout.tile_shape_at(index), axes)[1:])
        accesses = [(tile, R) for _, tile in handles.values()] + [(dst, W if first else ACC)]
        args = (tuple(plans), tuple(positions), first, identity, scalars)
        runtime.submit(codelet, accesses, args)

    def combine_task(partials, dst):
        code = REDUCE_OPS[_COMBINE[op]]
        runtime.submit(_combine, [*((p, R) for p in partials), (dst, W)], (code, identity))

    submit_chains(runtime, groups, out, chain_task, combine_task)
    return out
