"""Codelets of the tiled linear algebra: GEMM (batched, and on row blocks), POTRF, TRSM, SYRK,
and the checks that make singular or non-symmetric inputs fail the result."""

from __future__ import annotations

import math

import numpy as np

from numtile.runtime import Codelet
from numtile.tiletensor.codelets.views import rows


def _gemm(ops, a, b, c, trans_a, trans_b, alpha, beta):
    if c.ndim == 2:
        ops.gemm(a, b, c, trans_a, trans_b, alpha, beta)
        return
    batch = c.shape[:-2]
    if a.shape[:-2] in (batch, (1,) * len(batch)) and b.shape[:-2] in (batch, (1,) * len(batch)):
        ops.gemm_batched(
            a.reshape((-1,) + a.shape[-2:]),
            b.reshape((-1,) + b.shape[-2:]),
            c.reshape((-1,) + c.shape[-2:]),
            trans_a,
            trans_b,
            alpha,
            beta,
        )
        return
    for index in np.ndindex(batch):  # batch axes broadcast one at a time
        ia = tuple(0 if s == 1 else i for s, i in zip(a.shape[:-2], index))
        ib = tuple(0 if s == 1 else i for s, i in zip(b.shape[:-2], index))
        ops.gemm(a[ia], b[ib], c[index], trans_a, trans_b, alpha, beta)


def _gemm_flops(a, b, c, trans_a, trans_b, alpha, beta) -> float:
    return 2.0 * math.prod(c) * (a[-2] if trans_a else a[-1])


def _gemm_rows(ops, a, b, c, trans_a, trans_b, alpha, beta):
    ops.gemm(rows(a), rows(b), rows(c), trans_a, trans_b, alpha, beta)


def _gemm_rows_flops(a, b, c, trans_a, trans_b, alpha, beta) -> float:
    inner = math.prod(a[:-1]) if trans_a else a[-1]
    return 2.0 * math.prod(c) * inner


def _potrf(ops, a, offset):
    info = ops.potrf(a)
    if info > 0:
        raise np.linalg.LinAlgError(
            f"matrix is not positive definite: the leading minor of order {offset + info} "
            f"is not positive"
        )


def _trsm(ops, a, b, left, lower, trans, unit, alpha):
    ops.trsm(a, b, left, lower, trans, unit, alpha)


def _syrk(ops, a, c, trans, alpha, beta):
    ops.syrk(a, c, trans, alpha, beta)


gemm = Codelet("gemm", kernel=_gemm, flops=_gemm_flops)
# GEMM of tiles read as (rows, last axis): the leading (batch, sequence) axes are merged
gemm_rows = Codelet("gemm_rows", kernel=_gemm_rows, flops=_gemm_rows_flops)
potrf = Codelet("potrf", kernel=_potrf, flops=lambda a, offset: a[0] ** 3 / 3.0)
trsm = Codelet(
    "trsm",
    kernel=_trsm,
    flops=lambda a, b, left, *args: float(a[0]) * a[0] * (b[1] if left else b[0]),
)
syrk = Codelet(
    "syrk",
    kernel=_syrk,
    flops=lambda a, c, trans, *args: float(c[0]) * c[0] * (a[0] if trans else a[1]),
)


def _check_diagonal(ops, a, *guarded_then_offset):
    # LAPACK's trtrs check: a zero on the diagonal of a triangular a makes it singular
    offset = guarded_then_offset[-1]
    zero = np.flatnonzero(np.diagonal(ops.to_host(a)) == 0)
    if zero.size:
        raise np.linalg.LinAlgError(
            f"singular matrix: a has a zero on its diagonal at row {offset + int(zero[0])}"
        )


def _check_symmetric(ops, *tiles_then_args):
    # tiles: the diagonal tile, then (a[i, j], a[j, i]) pairs, then the tiles it guards
    *tiles, row, pairs, tile = tiles_then_args
    blocks = [ops.to_host(t) for t in tiles[: 1 + 2 * pairs]]
    checks = [(blocks[0], blocks[0], row)]
    checks += [(blocks[1 + 2 * k], blocks[2 + 2 * k], row + k + 1) for k in range(pairs)]
    for upper, lower, column in checks:
        scale = max(float(np.abs(upper).max(initial=0)), float(np.abs(lower).max(initial=0)))
        tolerance = np.sqrt(np.finfo(upper.dtype).eps) * scale
        difference = np.abs(upper - lower.T)
        if difference.size and difference.max() > tolerance:
            p, q = np.unravel_index(int(np.argmax(difference)), difference.shape)
            r, c = row * tile + int(p), column * tile + int(q)
            raise np.linalg.LinAlgError(
                f"solve: a is not symmetric (a[{r}, {c}] = {upper[p, q]} but a[{c}, {r}] = "
                f"{lower[q, p]}) but assume_a='pos' asks for a symmetric positive definite "
                f"matrix; the default assume_a='gen' solves general systems (LU)"
            )


check_diagonal = Codelet("check_diagonal", kernel=_check_diagonal)
check_symmetric = Codelet("check_symmetric", kernel=_check_symmetric)
