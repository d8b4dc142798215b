"""Codelets of the tiled linear algebra: GEMM (batched, and on row blocks), POTRF, TRSM, SYRK,
and the checks that make singular or non-symmetric inputs fail the result."""

from __future__ import annotations

import math

import numpy as np

from numtile.runtime import Codelet
from numtile.tiletensor.codelets.narrow import bits
from numtile.tiletensor.codelets.qr import COMPLEX_FLOPS, lapack_bytes
from numtile.tiletensor.codelets.views import rows
from numtile.tiletensor.precision import bf16_gemm


def _gemm(ops, a, b, c, trans_a, trans_b, alpha, beta):
    if c.dtype.kind == "c":  # complex kernels take integer flags (2: conjugate transpose)
        trans_a, trans_b = int(trans_a), int(trans_b)
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
    ops.trsm(a, b, left, lower, int(trans) if b.dtype.kind == "c" else trans, unit, alpha)


def _syrk(ops, a, c, trans, alpha, beta):
    ops.syrk(a, c, trans, alpha, beta)


def _herk(ops, a, c, trans, alpha, beta):
    ops.herk(a, c, trans, alpha, beta)


def _syrk_flops(a, c, trans, *args) -> float:
    return float(c[0]) * c[0] * (a[0] if trans else a[1])


gemm = Codelet("gemm", kernel=_gemm, flops=_gemm_flops, complex_flops=COMPLEX_FLOPS)
# GEMM of tiles read as (rows, last axis): the leading (batch, sequence) axes are merged
gemm_rows = Codelet(
    "gemm_rows", kernel=_gemm_rows, flops=_gemm_rows_flops, complex_flops=COMPLEX_FLOPS
)
potrf = Codelet(
    "potrf", kernel=_potrf, flops=lambda a, offset: a[0] ** 3 / 3.0, complex_flops=COMPLEX_FLOPS
)
trsm = Codelet(
    "trsm",
    kernel=_trsm,
    flops=lambda a, b, left, *args: float(a[0]) * a[0] * (b[1] if left else b[0]),
    complex_flops=COMPLEX_FLOPS,
)
syrk = Codelet("syrk", kernel=_syrk, flops=_syrk_flops, complex_flops=COMPLEX_FLOPS)
# syrk's Hermitian twin on complex tiles: c = alpha op(a) op(a)^H + beta c, lower triangle
herk = Codelet("herk", kernel=_herk, flops=_syrk_flops, complex_flops=COMPLEX_FLOPS)


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
        difference = np.abs(upper - lower.T.conj())  # Hermitian for complex a
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


def _cross(ops, a, b, out, post):
    ops.cross(a.reshape(-1), b.reshape(-1), out.reshape(-1), post)


cross = Codelet("cross", kernel=_cross, flops=lambda a, b, out, post: 3.0 * math.prod(out))


# --- stacks of matrices that fit one tile: one task per tile, a loop (or one batched LAPACK
# call on a CPU) over the matrices inside it. ``first`` is the tile's first batch index and
# ``shape`` the whole stack's, for messages naming the failing member.


def _shape(tile) -> tuple[int, ...]:
    # a plain tuple: the CUDA simulator's device-array shapes take no negative index
    return tuple(tile.shape)


def _member(first, tile_batch, k) -> tuple[int, ...]:
    local = np.unravel_index(k, tile_batch) if tile_batch else ()
    return tuple(int(f + i) for f, i in zip(first, local))


def _matrices(tile):
    shape = _shape(tile)
    return tile.reshape((math.prod(shape[:-2]),) + shape[-2:])


def _check_finite(ops, a, first, shape):
    host = ops.to_host(a)
    bad = ~np.isfinite(_matrices(host)).all(axis=(1, 2))
    if bad.any():
        member = _member(first, _shape(a)[:-2], int(np.argmax(bad)))
        raise ValueError(
            f"linalg: matrix {member} of the stack of shape {shape} contains infs or NaNs"
        )


def _singular(first, a, k, shape):
    return np.linalg.LinAlgError(
        f"singular matrix: matrix {_member(first, _shape(a)[:-2], k)} of the stack of shape "
        f"{shape} has an exactly zero pivot in its LU factorisation"
    )


def _cholesky_stack(ops, a, first, shape):
    for k, matrix in enumerate(_matrices(a)):
        if ops.potrf(matrix) > 0:
            raise np.linalg.LinAlgError(
                f"matrix {_member(first, _shape(a)[:-2], k)} of the stack of shape {shape} is "
                f"not positive definite"
            )


def _cholesky_stack_cpu(ops, a, first, shape):
    try:
        a[...] = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        _cholesky_stack(ops, a, first, shape)  # names the first member that fails


def _lu_stack(ops, a, k, pivots, info, first, shape, singular_raises=True):
    ops.getrf(_matrices(a)[k], pivots, info)
    if singular_raises and int(ops.to_host(info)[0]):
        raise _singular(first, a, k, shape)


def _solve_stack(ops, a, b, first, shape, identity):
    # a: a scratch copy of the matrices, b: the right-hand sides, solved in place (set to
    # identities first for an inverse)
    _check_finite(ops, a, first, shape)
    n = _shape(a)[-1]
    pivots, info = ops.empty(n, np.int64), ops.empty(1, np.int32)
    for k, (matrix, rhs) in enumerate(zip(_matrices(a), _matrices(b))):
        if identity:
            flat = rhs.reshape(-1)
            ops.fill(flat, 0)
            ops.fill(flat[:: n + 1], 1)
        _lu_stack(ops, a, k, pivots, info, first, shape)
        ops.laswp(rhs, pivots)
        ops.trsm(matrix, rhs, True, True, False, True, 1.0)
        ops.trsm(matrix, rhs, True, False, False, False, 1.0)


def _solve_stack_cpu(ops, a, b, first, shape, identity):
    _check_finite(ops, a, first, shape)
    try:
        b[...] = np.linalg.inv(a) if identity else np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        _solve_stack(ops, a, b, first, shape, identity)  # names the first singular member


def sign_and_log(values, swaps: int):
    """(sign, log|det|) of a determinant from an LU factor's diagonal ``values`` and its
    number of row ``swaps``: the sign is the product of the values' phases (+-1 for real
    ones), 0 for a zero value; the log a float."""
    magnitudes = np.abs(values)
    with np.errstate(divide="ignore"):
        log = float(np.log(magnitudes).sum())
    if (magnitudes == 0).any():
        return 0 * values.dtype.type(1), log
    phase = values / magnitudes
    return np.prod(phase) * (-1.0) ** (swaps % 2), log


def _slogdet_stack(ops, a, sign, logabs, first, shape):
    _check_finite(ops, a, first, shape)
    n = _shape(a)[-1]
    pivots, info = ops.empty(n, np.int64), ops.empty(1, np.int32)
    signs, logs = sign.reshape(-1), logabs.reshape(-1)
    for k in range(signs.shape[0]):
        _lu_stack(ops, a, k, pivots, info, first, shape, singular_raises=False)
        values = np.diagonal(ops.to_host(_matrices(a)[k]))
        swaps = int(np.count_nonzero(ops.to_host(pivots) != np.arange(n)))
        value, log = sign_and_log(values, swaps)
        ops.fill(signs[k : k + 1], value)
        ops.fill(logs[k : k + 1], log)


def _slogdet_stack_cpu(ops, a, sign, logabs, first, shape):
    _check_finite(ops, a, first, shape)
    sign[...], logabs[...] = np.linalg.slogdet(a)


def _slogdet_factor(ops, *tiles_then_count):
    # the diagonal tiles of a tiled LU factor, their pivots, then the sign and log|det| tiles
    # (linalg/lu.py's slogdet of complex matrices: sign complex, log|det| real)
    *tiles, sign, logabs, count = tiles_then_count
    values = np.concatenate([np.diagonal(ops.to_host(t)) for t in tiles[:count]])
    swaps = sum(
        int(np.count_nonzero(ops.to_host(p) != np.arange(p.shape[0]))) for p in tiles[count:]
    )
    value, log = sign_and_log(values, swaps)
    ops.fill(sign.reshape(-1), value)
    ops.fill(logabs.reshape(-1), log)


slogdet_factor = Codelet("slogdet_factor", kernel=_slogdet_factor)


def _stack_flops(a, *args) -> float:
    return 2.0 / 3.0 * math.prod(a) * a[-1]


cholesky_stack = Codelet(
    "cholesky_stack",
    kernel=_cholesky_stack,
    implementations={"cpu": _cholesky_stack_cpu},
    flops=lambda a, *args: math.prod(a) * a[-1] / 3.0,
    complex_flops=COMPLEX_FLOPS,
)
solve_stack = Codelet(
    "solve_stack",
    kernel=_solve_stack,
    implementations={"cpu": _solve_stack_cpu},
    flops=_stack_flops,
    complex_flops=COMPLEX_FLOPS,
)
slogdet_stack = Codelet(
    "slogdet_stack",
    kernel=_slogdet_stack,
    implementations={"cpu": _slogdet_stack_cpu},
    flops=_stack_flops,
    complex_flops=COMPLEX_FLOPS,
)


# --- GEMMs of the precision modes (numtile.tiletensor.precision): inputs rounded to
# ``in_bits`` mantissa bits, the result to ``out_bits``; float32 accumulation


def _gemm_rounded(ops, a, b, c, trans_a, trans_b, alpha, beta, in_bits, out_bits):
    _each_matrix(ops.gemm_rounded, a, b, c, trans_a, trans_b, alpha, beta, in_bits, out_bits)


def _gemm_rows_rounded(ops, a, b, c, trans_a, trans_b, alpha, beta, in_bits, out_bits):
    ops.gemm_rounded(rows(a), rows(b), rows(c), trans_a, trans_b, alpha, beta, in_bits, out_bits)


gemm_rounded = Codelet(
    "gemm_rounded", kernel=_gemm_rounded, flops=lambda *shapes_args: _gemm_flops(*shapes_args[:7])
)
gemm_rows_rounded = Codelet(
    "gemm_rows_rounded",
    kernel=_gemm_rows_rounded,
    flops=lambda *shapes_args: _gemm_rows_flops(*shapes_args[:7]),
)


# --- bf16 x bf16 -> float32 GEMM: a and b bfloat16 tiles (their uint16 bits reach the
# kernel), c float32. On a CPU with bf16 units and oneMKL, MKL's cblas_gemm_bf16bf16f32; else
# the exact widen-to-float32-and-sgemm kernel (numtile.tiletensor.precision says which)


def _each_matrix(gemm2d, a, b, c, *args):
    if c.ndim == 2:
        gemm2d(a, b, c, *args)
        return
    for index in np.ndindex(c.shape[:-2]):  # batch axes, broadcast ones read at 0
        ia = tuple(0 if s == 1 else i for s, i in zip(a.shape[:-2], index))
        ib = tuple(0 if s == 1 else i for s, i in zip(b.shape[:-2], index))
        gemm2d(a[ia], b[ib], c[index], *args)


def _gemm_bf16(ops, a, b, c, trans_a, trans_b, alpha, beta):
    _each_matrix(ops.gemm_bf16, bits(a), bits(b), c, trans_a, trans_b, alpha, beta)


def _gemm_bf16_cpu(ops, a, b, c, trans_a, trans_b, alpha, beta):
    _each_matrix(bf16_gemm(ops), bits(a), bits(b), c, trans_a, trans_b, alpha, beta)


gemm_bf16 = Codelet(
    "gemm_bf16",
    kernel=_gemm_bf16,
    implementations={"cpu": _gemm_bf16_cpu},
    flops=_gemm_flops,
)


# --- spectral functions of stacks that fit one tile: one batched numpy.linalg call per tile


def _spectral_values(a, operation):
    """numpy.linalg's outputs of ``operation`` on the stack ``a`` (..., M, N)."""
    if operation == "eigh":
        return np.linalg.eigh(a, UPLO="L")
    if operation == "eigvalsh":
        return (np.linalg.eigvalsh(a, UPLO="L"),)
    if operation == "svdvals":
        return (np.linalg.svd(a, compute_uv=False),)
    return np.linalg.svd(a, full_matrices=operation == "svd")


def _spectral_stack_cpu(ops, a, *outputs_then_args):
    # a: the tile's stack; then the outputs' tiles; args: the operation, first, the stack shape
    *outputs, operation, first, shape = outputs_then_args
    bad = ~np.isfinite(_matrices(a)).all(axis=(1, 2))
    if bad.any():
        member = _member(first, _shape(a)[:-2], int(np.argmax(bad)))
        raise np.linalg.LinAlgError(
            f"linalg.{operation}: matrix {member} of the stack of shape {shape} contains infs "
            "or NaNs (LAPACK's iteration does not converge on them, as in numpy.linalg)"
        )
    for out, value in zip(outputs, _spectral_values(a, operation), strict=True):
        out[...] = value


def _spectral_stack_flops(a, *shapes_then_args) -> float:
    m, n = a[-2:]
    k = min(m, n)
    operation = shapes_then_args[-3]
    per_matrix = (22.0 if operation in ("svd", "svd_reduced", "eigh") else 4.0) * max(m, n) * k * k
    return math.prod(a[:-2]) * per_matrix


def _spectral_stack_scratch(a, *outputs_then_args) -> int:
    # the finiteness check's booleans, numpy's result arrays before they are copied into the
    # output tiles, and one matrix's LAPACK copy and workspace (numpy's loop reuses them)
    *outputs, operation, _first, _shape = outputs_then_args
    m, n = a.shape[-2:]
    results = sum(out.nbytes for out in outputs)
    return math.prod(a.shape) + results + lapack_bytes(m, n, operation, a.dtype.itemsize)


spectral_stack = Codelet(
    "spectral_stack",
    implementations={"cpu": _spectral_stack_cpu},
    flops=_spectral_stack_flops,
    complex_flops=COMPLEX_FLOPS,
    scratch=_spectral_stack_scratch,
)
