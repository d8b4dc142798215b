"""Linear layers as GEMMs on row blocks: ``x @ W`` over the last axis, and its two gradients.

W is stored (in, out), or (out, in) when ``transposed`` (the GEMM reads it transposed, no
copy). Activation tiles are read as (rows, features) blocks, so any tiling of the leading
axes works.
"""

from __future__ import annotations

from numtile.runtime import Access, get_runtime
from numtile.tiletensor.codelets.linalg import gemm_rows
from numtile.tiletensor.fused.rows import lead_indices, match_last_tile
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.placement import zero_first
from numtile.tiletensor.tensor import TileTensor

R, W, RW = Access.R, Access.W, Access.RW


def _chain(runtime, out_tile, pairs, trans_a: bool, trans_b: bool) -> None:
    """out_tile = sum of op(a) @ op(b) over ``pairs``: one GEMM task per pair, in order."""
    split = zero_first(runtime, out_tile)
    for n, (a, b) in enumerate(pairs):
        first = n == 0 and not split
        runtime.submit(
            gemm_rows,
            [(a, R), (b, R), (out_tile, W if first else RW)],
            (trans_a, trans_b, 1.0, 0.0 if first else 1.0),
        )


def _rows_times_weight(a: TileTensor, weight: TileTensor, out: TileTensor, weight_tile, trans_b):
    """out[..., col] = sum over inner of a[..., inner] @ op(W[weight_tile(col, inner)])."""
    runtime = get_runtime()
    for lead in lead_indices(out):
        for col in range(out.grid[-1]):
            pairs = [
                (a.tile(lead + (inner,)), weight.tile(weight_tile(col, inner)))
                for inner in range(a.grid[-1])
            ]
            _chain(runtime, out.tile(lead + (col,)), pairs, False, trans_b)
    return out


def linear_forward(x: TileTensor, weight: TileTensor, transposed: bool = False) -> TileTensor:
    """``x @ W`` (W (in, out)) or ``x @ W^T`` (W (out, in)); ``x``'s last tile must match W's.

    >>> import numtile as nt
    >>> w = nt.ones((3, 2), tile_shape=(2, 2))
    >>> linear_forward(nt.ones((4, 3), tile_shape=(3, 2)), w).to_numpy()[0].tolist()
    [3.0, 3.0]
    """
    in_axis, out_axis = (1, 0) if transposed else (0, 1)
    x = match_last_tile(x, weight.tile_shape[in_axis])
    n_out = weight.shape[out_axis]
    layout = Layout(x.shape[:-1] + (n_out,), x.tile_shape[:-1] + (weight.tile_shape[out_axis],))
    # out column j, inner k: W tile (j, k) stored (out, in), (k, j) stored (in, out)
    return _rows_times_weight(
        x,
        weight,
        TileTensor(layout, x.dtype),
        lambda j, k: (j, k) if transposed else (k, j),
        transposed,
    )


def linear_backward_input(
    grad: TileTensor, weight: TileTensor, x: TileTensor, transposed: bool = False
) -> TileTensor:
    """d(x @ op(W))/dx: ``grad @ op(W)^T``, tiled like ``x`` (whose last tile matches W's)."""
    out_axis = 0 if transposed else 1
    grad = match_last_tile(grad, weight.tile_shape[out_axis])
    # input column k, inner j (an output column): the same W tile as forward's (j, k)
    return _rows_times_weight(
        grad,
        weight,
        TileTensor(x.layout, x.dtype),
        lambda k, j: (j, k) if transposed else (k, j),
        not transposed,
    )


def linear_backward_weight(
    x: TileTensor, grad: TileTensor, weight_layout: Layout, transposed: bool = False
) -> TileTensor:
    """d(x @ op(W))/dW: ``x^T grad`` ((in, out)), or ``grad^T x`` when ``transposed``."""
    out_axis = 0 if transposed else 1
    grad = match_last_tile(grad, weight_layout.tile_shape[out_axis])
    gw = TileTensor(weight_layout, x.dtype)
    runtime = get_runtime()
    leads = list(lead_indices(x))
    for index in weight_layout.indices():
        j, k = (index[0], index[1]) if transposed else (index[1], index[0])
        pairs = []
        for lead in leads:
            g_tile, x_tile = grad.tile(lead + (j,)), x.tile(lead + (k,))
            pairs.append((g_tile, x_tile) if transposed else (x_tile, g_tile))
        _chain(runtime, gw.tile(index), pairs, True, False)
    return gw
