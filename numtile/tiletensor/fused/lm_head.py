"""The backward of a language model's head and its loss, ``cross_entropy(x @ W^T, targets)``,
walked one vocabulary tile at a time.

Done as two ops (the loss's backward, then the linear's), the backward holds at once the
logits, their whole gradient and (in bf16-mixed) a bfloat16 copy of W: GPT-2 small at batch
4 x 256, 98 + 98 + 74 MiB, at the point where every activation of the forward is still alive.
Here each vocabulary tile v is finished before the next starts: its logits' gradient tiles,
then W's tile row v cast to bfloat16, the products they add to the input's gradient, and W's
gradient rows v. Only one vocabulary tile of each temporary is alive at a time, and the
logits' tile column v is released once read (when the caller holds no other reference).
Tasks are submitted in that order and the scheduler runs ready tasks oldest first, so the
products of tile v run before the loss gradients of tile v + 1.
"""

from __future__ import annotations

from numtile.runtime import Access, DataHandle, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.dtypes import bfloat16
from numtile.tiletensor.fused.linear import GemmSum, _rounding
from numtile.tiletensor.fused.rows import lead_indices
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W


def logit_columns(logits: TileTensor) -> list[list[DataHandle]]:
    """The logits' tiles by vocabulary tile: ``columns[v][i]`` is lead tile i's tile v."""
    leads = list(lead_indices(logits))
    return [[logits.tile(lead + (v,)) for lead in leads] for v in range(logits.grid[-1])]


def head_logits(x: TileTensor, weight: TileTensor, rounding=None) -> TileTensor:
    """``x @ W^T`` with W (vocabulary, features), a vocabulary tile at a time: for bfloat16
    ``x``, W's tile row v is cast to bfloat16 just before its products, so one tile row of
    the copy is alive at a time instead of all of it (GPT-2 small: 10 of 74 MiB). Otherwise
    as ``linear_forward(x, W, transposed=True, rounding)``, the same bits either way."""
    runtime = get_runtime()
    bf16 = x.dtype == bfloat16
    layout = Layout(x.shape[:-1] + weight.shape[:1], x.tile_shape[:-1] + weight.tile_shape[:1])
    logits = TileTensor(layout, x.dtype)
    rounding = _rounding(rounding, logits.dtype)
    leads = list(lead_indices(x))
    n_vocab, n_feat = weight.grid
    for v in range(n_vocab):
        weights = [weight.tile((v, k)) for k in range(n_feat)]
        if bf16 and weight.dtype != bfloat16:
            weights = [_cast(runtime, tile) for tile in weights]
        for lead in leads:
            total = GemmSum(
                runtime, logits.tile(lead + (v,)), n_feat, False, True, bf16=bf16, rounding=rounding
            )
            for k in range(n_feat):
                total.add(x.tile(lead + (k,)), weights[k])
    return logits


def linear_cross_entropy_backward(
    columns: list[list[DataHandle]],
    x: TileTensor,
    weight: TileTensor,
    targets: TileTensor,
    m: TileTensor,
    s: TileTensor,
    grad: TileTensor,
    count: int,
    *,
    x_dtype=None,
    weight_dtype=None,
    want_x: bool = True,
    want_weight: bool = True,
    rounding=None,
) -> tuple[TileTensor | None, TileTensor | None]:
    """(d loss/d x, d loss/d W) of ``loss = cross_entropy(x @ W^T, targets)`` (mean over the
    ``count`` kept rows; ``m``, ``s``: the forward's row statistics; ``grad``: the 0-d loss
    gradient). ``columns`` (``logit_columns``) is emptied as the tiles are used, so that the
    logits die column by column. ``x`` is bfloat16 in bf16-mixed (W is then cast a tile at a
    time), else of W's dtype with ``rounding`` for the GEMMs; ``x``'s last tile matches W's
    (vocabulary, features) tiles' second axis. The gradients have ``x_dtype`` and
    ``weight_dtype`` (default: ``x``'s and W's)."""
    runtime = get_runtime()
    bf16 = x.dtype == bfloat16
    leads = list(lead_indices(x))
    n_vocab, n_feat = weight.grid
    v_starts = weight.layout.starts[0]
    gx = TileTensor(x.layout, x_dtype or x.dtype) if want_x else None
    gw = TileTensor(weight.layout, weight_dtype or weight.dtype) if want_weight else None
    gx_sums = []
    if gx is not None:
        x_rounding = _rounding(rounding, gx.dtype)
        gx_sums = [
            [
                GemmSum(
                    runtime,
                    gx.tile(lead + (k,)),
                    n_vocab,
                    False,
                    False,
                    bf16=bf16,
                    rounding=x_rounding,
                )
                for k in range(n_feat)
            ]
            for lead in leads
        ]
    w_rounding = None if gw is None else _rounding(rounding, gw.dtype)
    grad_tile = grad.handles[0]
    columns.reverse()  # popped from the end: vocabulary tile 0 first
    for v in range(n_vocab):
        logit_tiles = columns.pop()
        weights = [weight.tile((v, k)) for k in range(n_feat)]
        if bf16 and gx is not None and weight.dtype != bfloat16:
            weights = [_cast(runtime, tile) for tile in weights]
        dlogits = []
        for i, (lead, tile) in enumerate(zip(leads, logit_tiles)):
            dl = DataHandle(tile.shape, tile.dtype)
            runtime.submit(
                codelets.nn.cross_entropy_backward,
                [
                    (tile, R),
                    (targets.tile(lead), R),
                    (m.tile(lead), R),
                    (s.tile(lead), R),
                    (grad_tile, R),
                    (dl, W),
                ],
                (v_starts[v], 1.0 / count),
            )
            dlogits.append(dl)
            for k, total in enumerate(gx_sums[i] if gx_sums else ()):
                total.add(dl, weights[k])
        del logit_tiles, weights
        if gw is None:
            continue
        for k in range(n_feat):
            total = GemmSum(
                runtime, gw.tile((v, k)), len(leads), True, False, bf16=bf16, rounding=w_rounding
            )
            for lead, dl in zip(leads, dlogits):
                total.add(dl, x.tile(lead + (k,)))
    return gx, gw


def _cast(runtime, tile: DataHandle) -> DataHandle:
    """A bfloat16 copy of one float32 tile (the same bits as ``astype``'s)."""
    out = DataHandle(tile.shape, bfloat16)
    runtime.submit(codelets.copy.cast, [(tile, R), (out, W)])
    return out
