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
products of tile v run before the loss gradients of tile v + 1. Under a host memory limit the
logits are not kept at all: the backward computes each tile again (a third more GEMM work in
the head; GPT-2 small: 98 MiB fewer at the step's peak, where every activation is alive).
"""

from __future__ import annotations

from numtile.runtime import Access, DataHandle, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.dtypes import bfloat16_dtype, is_bfloat16
from numtile.tiletensor.fused.linear import GemmSum, _rounding
from numtile.tiletensor.fused.loss import add_loss_grad, add_loss_stats, finish_loss, loss_stats
from numtile.tiletensor.fused.rows import lead_indices
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W


def logit_columns(logits: TileTensor) -> list[list[DataHandle]]:
    """The logits' tiles by vocabulary tile: ``columns[v][i]`` is lead tile i's tile v."""
    leads = list(lead_indices(logits))
    return [[logits.tile(lead + (v,)) for lead in leads] for v in range(logits.grid[-1])]


def linear_cross_entropy_forward(
    x: TileTensor, weight: TileTensor, targets: TileTensor, count: int, rounding=None
):
    """(loss, m, s, logits) of ``cross_entropy(x @ W^T, targets)``, as
    ``cross_entropy_forward`` of ``linear_forward(x, W, transposed=True, rounding)``'s logits
    (the same logits bits; the row statistics fold tiles in any order, as there), computed a
    vocabulary tile at a time: each logits column is folded into the loss's row statistics
    right after its products, so logits the caller drops die column by column; for bfloat16
    ``x``, W's tile row v is cast to bfloat16 just before its products (one tile row of the
    copy alive instead of all of it: GPT-2 small, 10 of 74 MiB)."""
    runtime = get_runtime()
    layout = Layout(x.shape[:-1] + weight.shape[:1], x.tile_shape[:-1] + weight.tile_shape[:1])
    logits = TileTensor(layout, x.dtype)
    rounding = _rounding(rounding, logits.dtype)
    stats = loss_stats(logits)
    leads = list(lead_indices(x))
    for v in range(weight.grid[0]):
        after = (
            x.tile(leads[-1] + (x.grid[-1] - 1,)) if v < 2 else logits.tile(leads[-1] + (v - 2,))
        )
        weights = _weight_row(runtime, weight, v, x.dtype, after)
        for lead in leads:
            _logit_tile(runtime, x, lead, weights, logits.tile(lead + (v,)), rounding)
            add_loss_stats(stats, logits, targets, lead, v)
    return (*finish_loss(stats, targets, count, logits.dtype), logits)


def linear_cross_entropy_backward(
    columns: list[list[DataHandle]] | None,
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
    logits die column by column; None computes each logits tile again (the forward's
    bits). ``x`` is bfloat16 in bf16-mixed (W is then cast a tile row at a time), else of
    W's dtype with ``rounding`` for the GEMMs; ``x``'s last tile matches W's (vocabulary,
    features) tiles' second axis. The gradients have ``x_dtype`` and ``weight_dtype``
    (default: ``x``'s and W's)."""
    runtime = get_runtime()
    bf16 = is_bfloat16(x.dtype)
    leads = list(lead_indices(x))
    n_vocab, n_feat = weight.grid
    v_starts = weight.layout.starts[0]
    gx = TileTensor(x.layout, x_dtype or x.dtype) if want_x else None
    gw = TileTensor(weight.layout, weight_dtype or weight.dtype) if want_weight else None

    def sums(out, count, trans_a):
        rounded = _rounding(rounding, out.dtype)
        return GemmSum(runtime, out, count, trans_a, False, bf16=bf16, rounding=rounded)

    gx_sums = [
        [sums(gx.tile(lead + (k,)), n_vocab, False) for k in range(n_feat)]
        for lead in (leads if gx is not None else ())
    ]
    logit_rounding = _rounding(rounding, x.dtype)
    behind: list[DataHandle] = []
    if columns is not None:
        columns.reverse()  # popped from the end: vocabulary tile 0 first
    for v in range(n_vocab):
        logit_tiles = columns.pop() if columns is not None else None
        weights = None
        if gx is not None or logit_tiles is None:
            after = m.tile(leads[-1]) if v < 2 else behind[0]
            weights = _weight_row(runtime, weight, v, x.dtype, after)
        dlogits = []
        for i, lead in enumerate(leads):
            if logit_tiles is None:
                shape = x.tile(lead + (0,)).shape[:-1] + weight.tile((v, 0)).shape[:1]
                tile = DataHandle(shape, x.dtype)
                _logit_tile(runtime, x, lead, weights, tile, logit_rounding)
            else:
                tile = logit_tiles[i]
            dl = DataHandle(tile.shape, tile.dtype)
            add_loss_grad(tile, dl, targets, m, s, grad, count, lead, v_starts[v])
            del tile
            dlogits.append(dl)
            for k, total in enumerate(gx_sums[i] if gx_sums else ()):
                total.add(dl, weights[k])
        del logit_tiles, weights
        behind = (behind + [dlogits[-1]])[-2:]  # the last loss-gradient tiles of v - 1 and v
        if gw is None:
            continue
        for k in range(n_feat):
            total = sums(gw.tile((v, k)), len(leads), True)
            for lead, dl in zip(leads, dlogits):
                total.add(dl, x.tile(lead + (k,)))
    return gx, gw


def _weight_row(runtime, weight: TileTensor, v: int, dtype, after: DataHandle) -> list:
    """W's tile row ``v``, each tile cast to bfloat16 (``astype``'s bits) when ``dtype`` (the
    activations') is bfloat16 and W is not. The casts wait for the tile ``after`` (two
    vocabulary tiles back): W's tiles are ready from the start, and casts free to run would
    run early, when a worker waits during the forward, holding the copy all along."""
    tiles = [weight.tile((v, k)) for k in range(weight.grid[1])]
    if not is_bfloat16(dtype) or is_bfloat16(weight.dtype):
        return tiles
    copies = []
    for tile in tiles:
        copies.append(DataHandle(tile.shape, bfloat16_dtype()))
        runtime.submit(codelets.copy.cast_after, [(tile, R), (after, R), (copies[-1], W)])
    return copies


def _logit_tile(runtime, x: TileTensor, lead, weights, out: DataHandle, rounding) -> None:
    """out = x's row tile ``lead`` times the transposed W tiles ``weights`` (one tile row)."""
    total = GemmSum(
        runtime, out, len(weights), False, True, bf16=is_bfloat16(x.dtype), rounding=rounding
    )
    for k, tile in enumerate(weights):
        total.add(x.tile(lead + (k,)), tile)
