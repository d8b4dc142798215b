"""Layer and RMS normalisation over the last axis, whose features may be split across column
tiles.

Forward: per row, the sums of x and x^2 accumulated over the column tiles, then each tile
normalised from them. Backward: two more row sums, then dx and the parameter gradients.
"""

from __future__ import annotations

from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import zeros
from numtile.tiletensor.fused.rows import lead_indices, match_last_tile, row_stats
from numtile.tiletensor.tensor import TileTensor

R, W, ACC = Access.R, Access.W, Access.ACCUMULATE


def _row_moments(x: TileTensor, gamma: TileTensor):
    """(x retiled to ``gamma``'s feature tiles, row sums s1, row sums of squares s2)."""
    x = match_last_tile(x, gamma.tile_shape[0])
    runtime = get_runtime()
    s1, s2 = row_stats(x), row_stats(x)
    for lead in lead_indices(x):
        for c in range(x.grid[-1]):
            runtime.submit(
                codelets.nn.row_moments,
                [(x.tile(lead + (c,)), R), (s1.tile(lead), ACC), (s2.tile(lead), ACC)],
            )
    return x, s1, s2


def layer_norm_forward(x: TileTensor, gamma: TileTensor, beta: TileTensor, eps: float):
    """(y, x, s1, s2): y normalised, ``x`` retiled to ``gamma``'s tiles, and the row sums.

    >>> import numtile as nt
    >>> x = nt.from_numpy([[1.0, 2.0, 3.0]], tile_shape=(1, 2))
    >>> g, b = nt.ones((3,), tile_shape=2), nt.zeros((3,), tile_shape=2)
    >>> [round(float(v), 4) for v in layer_norm_forward(x, g, b, 1e-5)[0].to_numpy()[0]]
    [-1.2247, 0.0, 1.2247]
    """
    x, s1, s2 = _row_moments(x, gamma)
    runtime = get_runtime()
    n = x.shape[-1]
    y = TileTensor(x.layout, x.dtype)
    for lead in lead_indices(x):
        for c in range(x.grid[-1]):
            runtime.submit(
                codelets.nn.layer_norm,
                [
                    (x.tile(lead + (c,)), R),
                    (gamma.tile((c,)), R),
                    (beta.tile((c,)), R),
                    (s1.tile(lead), R),
                    (s2.tile(lead), R),
                    (y.tile(lead + (c,)), W),
                ],
                (n, eps),
            )
    return y, x, s1, s2


def layer_norm_backward(x, grad, gamma, s1, s2, eps: float):
    """(dx, dgamma, dbeta) from what ``layer_norm_forward`` returned and the output's grad."""
    n = x.shape[-1]
    grad = match_last_tile(grad, x.tile_shape[-1])
    runtime = get_runtime()
    a1, a2 = row_stats(x), row_stats(x)
    for lead in lead_indices(x):
        for c in range(x.grid[-1]):
            runtime.submit(
                codelets.nn.layer_norm_backward_sums,
                [
                    (x.tile(lead + (c,)), R),
                    (grad.tile(lead + (c,)), R),
                    (gamma.tile((c,)), R),
                    (s1.tile(lead), R),
                    (s2.tile(lead), R),
                    (a1.tile(lead), ACC),
                    (a2.tile(lead), ACC),
                ],
                (n, eps),
            )
    dx = TileTensor(x.layout, x.dtype)
    dgamma = zeros(gamma.shape, gamma.dtype, gamma.tile_shape)
    dbeta = zeros(gamma.shape, gamma.dtype, gamma.tile_shape)
    for lead in lead_indices(x):
        for c in range(x.grid[-1]):
            xs, gs = x.tile(lead + (c,)), grad.tile(lead + (c,))
            stats = [(s1.tile(lead), R), (s2.tile(lead), R)]
            runtime.submit(
                codelets.nn.layer_norm_backward,
                [(xs, R), (gs, R), (gamma.tile((c,)), R), *stats]
                + [(a1.tile(lead), R), (a2.tile(lead), R), (dx.tile(lead + (c,)), W)],
                (n, eps),
            )
            runtime.submit(
                codelets.nn.layer_norm_param_grad,
                [(xs, R), (gs, R), *stats, (dgamma.tile((c,)), ACC), (dbeta.tile((c,)), ACC)],
                (n, eps),
            )
    return dx, dgamma, dbeta


def rms_norm_forward(x: TileTensor, gamma: TileTensor, eps: float):
    """(y, x, s2): RMS-normalised ``y = x / sqrt(mean(x**2) + eps) * gamma``, ``x`` retiled to
    ``gamma``'s tiles and the row sums of squares.

    >>> import numtile as nt
    >>> x = nt.from_numpy([[3.0, 4.0]], tile_shape=(1, 1))
    >>> [round(float(v), 4) for v in rms_norm_forward(x, nt.ones((2,), tile_shape=1), 0.0)[0]
    ...  .to_numpy()[0]]
    [0.8485, 1.1314]
    """
    x, _, s2 = _row_moments(x, gamma)  # the row sums s1 are not needed
    runtime = get_runtime()
    n = x.shape[-1]
    y = TileTensor(x.layout, x.dtype)
    for lead in lead_indices(x):
        for c in range(x.grid[-1]):
            runtime.submit(
                codelets.nn.rms_norm,
                [(x.tile(lead + (c,)), R), (gamma.tile((c,)), R), (s2.tile(lead), R)]
                + [(y.tile(lead + (c,)), W)],
                (n, eps),
            )
    return y, x, s2


def rms_norm_backward(x, grad, gamma, s2, eps: float):
    """(dx, dgamma) from what ``rms_norm_forward`` returned and the output's gradient."""
    n = x.shape[-1]
    grad = match_last_tile(grad, x.tile_shape[-1])
    runtime = get_runtime()
    a2 = row_stats(x)
    for lead in lead_indices(x):
        for c in range(x.grid[-1]):
            runtime.submit(
                codelets.nn.rms_norm_backward_sums,
                [(x.tile(lead + (c,)), R), (grad.tile(lead + (c,)), R), (gamma.tile((c,)), R)]
                + [(s2.tile(lead), R), (a2.tile(lead), ACC)],
                (n, eps),
            )
    dx = TileTensor(x.layout, x.dtype)
    dgamma = zeros(gamma.shape, gamma.dtype, gamma.tile_shape)
    for lead in lead_indices(x):
        for c in range(x.grid[-1]):
            xs, gs, stats = x.tile(lead + (c,)), grad.tile(lead + (c,)), (s2.tile(lead), R)
            runtime.submit(
                codelets.nn.rms_norm_backward,
                [(xs, R), (gs, R), (gamma.tile((c,)), R), stats, (a2.tile(lead), R)]
                + [(dx.tile(lead + (c,)), W)],
                (n, eps),
            )
            runtime.submit(
                codelets.nn.rms_norm_param_grad,
                [(xs, R), (gs, R), stats, (dgamma.tile((c,)), ACC)],
                (n, eps),
            )
    return dx, dgamma
