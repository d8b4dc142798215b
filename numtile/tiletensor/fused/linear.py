"""Linear layers as GEMMs on row blocks: ``x @ W`` over the last axis, and its two gradients.

W is stored (in, out), or (out, in) when ``transposed`` (the GEMM reads it transposed, no
copy). Activation tiles are read as (rows, features) blocks, so any tiling of the leading
axes works.

bfloat16 operands (bf16-mixed, ``numtile.nn.functional.linear``) multiply through the bf16
GEMM with float32 accumulation: a float32 output sums in place, a bfloat16 one sums its
products in float32 (a partial tile when the inner axis has several tiles), adds the bias
and is rounded once, by the last task of its chain.
"""

from __future__ import annotations

import numpy as np

from numtile.runtime import Access, DataHandle, get_runtime
from numtile.tiletensor.codelets.linalg import gemm_rows, gemm_rows_rounded
from numtile.tiletensor.codelets.narrow import is_narrow
from numtile.tiletensor.codelets.nn import linear_bf16, linear_bf16_out
from numtile.tiletensor.dtypes import is_bfloat16
from numtile.tiletensor.fused.rows import lead_indices, match_last_tile
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.placement import zero_first
from numtile.tiletensor.precision import FULL, gemm_rounding
from numtile.tiletensor.tensor import TileTensor

R, W, RW = Access.R, Access.W, Access.RW


class GemmSum:
    """out_tile = sum of op(a) @ op(b) over ``count`` pairs handed to ``add`` one at a time,
    one GEMM task each, so that chains of several tiles can be submitted interleaved (the LM
    head's backward walks the vocabulary tiles once for both of its gradients).

    ``rounding`` (input, output mantissa bits; ``precision.gemm_rounding``) rounds each GEMM's
    inputs and the finished sum (only the last task rounds its output). With ``bf16`` operands
    the sum is float32: in ``out_tile`` itself when it is float32, else in a float32 partial
    that the last task adds to its product and ``bias_tile``, rounding once. ``split``: the
    target already holds zeros (``placement.zero_first``), so every GEMM adds."""

    def __init__(
        self, runtime, out_tile, count, trans_a, trans_b, *, bf16, rounding=None, bias_tile=None
    ):
        self.runtime, self.out, self.count = runtime, out_tile, count
        self.trans, self.bf16, self.rounding, self.bias = (
            (trans_a, trans_b),
            bf16,
            rounding,
            bias_tile,
        )
        self.narrow = bf16 and is_bfloat16(out_tile.dtype)
        if self.narrow:
            self.partial = DataHandle(out_tile.shape, np.float32) if count > 1 else None
        else:
            self.partial = out_tile
        self.split = False
        self.done = 0

    def add(self, a, b) -> None:
        n, self.done = self.done, self.done + 1
        first, last = n == 0 and not self.split, n == self.count - 1
        if self.narrow and last:
            extra = [(t, R) for t in (self.partial, self.bias) if t is not None]
            args = self.trans + (self.partial is not None, self.bias is not None)
            self.runtime.submit(linear_bf16_out, [(a, R), (b, R), *extra, (self.out, W)], args)
            return
        accesses = [(a, R), (b, R), (self.partial, W if first else RW)]
        if self.bf16:
            self.runtime.submit(linear_bf16, accesses, self.trans + (0.0 if first else 1.0,))
            return
        in_bits, out_bits = self.rounding
        args = self.trans + (1.0, 0.0 if first else 1.0)
        if (in_bits, out_bits) == (FULL, FULL):
            self.runtime.submit(gemm_rows, accesses, args)
        else:
            self.runtime.submit(
                gemm_rows_rounded, accesses, args + (in_bits, out_bits if last else FULL)
            )


def _chain(runtime, out_tile, pairs, trans_a, trans_b, rounding=None, bf16=False, bias_tile=None):
    """out_tile = sum of op(a) @ op(b) over ``pairs`` (``GemmSum``), submitted in order. Under
    MPI the sum starts from zeros (``placement.zero_first``) and every GEMM adds."""
    total = GemmSum(
        runtime,
        out_tile,
        len(pairs),
        trans_a,
        trans_b,
        bf16=bf16,
        rounding=rounding,
        bias_tile=bias_tile,
    )
    body = pairs[:-1] if total.narrow else pairs
    total.split = bool(body) and zero_first(runtime, total.partial, body)
    for a, b in pairs:
        total.add(a, b)


def _rounding(rounding, dtype) -> tuple[int, int]:
    """``rounding`` (default: the current precision's), or none for a non-float32 GEMM."""
    if np.dtype(dtype) != np.float32:
        return FULL, FULL
    return rounding or gemm_rounding()


def _rows_times_weight(
    a: TileTensor, weight: TileTensor, out: TileTensor, weight_tile, trans_b, rounding, bias=None
):
    """out[..., col] = sum over inner of a[..., inner] @ op(W[weight_tile(col, inner)])
    (+ ``bias[col]``: bfloat16 operands only, added before the one rounding)."""
    runtime = get_runtime()
    narrow = is_narrow(a)
    rounding = _rounding(rounding, out.dtype)
    for lead in lead_indices(out):
        for col in range(out.grid[-1]):
            pairs = [
                (a.tile(lead + (inner,)), weight.tile(weight_tile(col, inner)))
                for inner in range(a.grid[-1])
            ]
            bias_tile = None if bias is None else bias.tile((col,))
            _chain(
                runtime, out.tile(lead + (col,)), pairs, False, trans_b, rounding, narrow, bias_tile
            )
    return out


def linear_forward(
    x: TileTensor, weight: TileTensor, transposed: bool = False, rounding=None, bias=None
) -> TileTensor:
    """``x @ W`` (W (in, out)) or ``x @ W^T`` (W (out, in)); ``x``'s last tile must match W's.
    ``rounding``: the GEMMs' (input, output) mantissa bits (default: the current precision's).
    For bfloat16 ``x`` and ``W`` the result is bfloat16 (float32 sums rounded once), and
    ``bias`` (float32, tiled like W's output axis) is added before that rounding.

    >>> import numtile as nt
    >>> w = nt.ones((3, 2), tile_shape=(2, 2))
    >>> linear_forward(nt.ones((4, 3), tile_shape=(3, 2)), w).to_numpy()[0].tolist()
    [3.0, 3.0]
    """
    in_axis, out_axis = (1, 0) if transposed else (0, 1)
    x = match_last_tile(x, weight.tile_shape[in_axis])
    n_out = weight.shape[out_axis]
    layout = Layout(x.shape[:-1] + (n_out,), x.tile_shape[:-1] + (weight.tile_shape[out_axis],))
    assert bias is None or (is_narrow(x) and bias.tile_shape == layout.tile_shape[-1:])
    # out column j, inner k: W tile (j, k) stored (out, in), (k, j) stored (in, out)
    return _rows_times_weight(
        x,
        weight,
        TileTensor(layout, x.dtype),
        lambda j, k: (j, k) if transposed else (k, j),
        transposed,
        rounding,
        bias,
    )


def linear_backward_input(
    grad: TileTensor,
    weight: TileTensor,
    x: TileTensor,
    transposed: bool = False,
    rounding=None,
    dtype=None,
) -> TileTensor:
    """d(x @ op(W))/dx: ``grad @ op(W)^T``, tiled like ``x`` (whose last tile matches W's),
    of ``dtype`` (default ``x``'s)."""
    out_axis = 0 if transposed else 1
    grad = match_last_tile(grad, weight.tile_shape[out_axis])
    # input column k, inner j (an output column): the same W tile as forward's (j, k)
    return _rows_times_weight(
        grad,
        weight,
        TileTensor(x.layout, dtype or x.dtype),
        lambda k, j: (j, k) if transposed else (k, j),
        not transposed,
        rounding,
    )


def linear_backward_weight(
    x: TileTensor,
    grad: TileTensor,
    weight_layout: Layout,
    transposed: bool = False,
    rounding=None,
    dtype=None,
) -> TileTensor:
    """d(x @ op(W))/dW: ``x^T grad`` ((in, out)), or ``grad^T x`` when ``transposed``, of
    ``dtype`` (default ``x``'s; bfloat16 operands sum into float32 ones in float32)."""
    out_axis = 0 if transposed else 1
    grad = match_last_tile(grad, weight_layout.tile_shape[out_axis])
    gw = TileTensor(weight_layout, dtype or x.dtype)
    runtime = get_runtime()
    rounding = _rounding(rounding, gw.dtype)
    leads = list(lead_indices(x))
    for index in weight_layout.indices():
        j, k = (index[0], index[1]) if transposed else (index[1], index[0])
        pairs = []
        for lead in leads:
            g_tile, x_tile = grad.tile(lead + (j,)), x.tile(lead + (k,))
            pairs.append((g_tile, x_tile) if transposed else (x_tile, g_tile))
        _chain(runtime, gw.tile(index), pairs, True, False, rounding, is_narrow(x))
    return gw
