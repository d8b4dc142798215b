"""Spectral functions: eigh, eigvalsh, svd, svdvals, pinv, matrix_rank, and the matrix norms
that need singular values (ord 2, -2, 'nuc').

A tall matrix (at least twice as many rows as columns) is first reduced by the tiled QR
(TSQR with an explicit Q when it has one tile column: U = Q @ U_R is then one matrix
product; otherwise U = Q @ U_R is applied as reflector tasks, ``apply_q``): the SVD of its
n x n R is the small problem; a wide one is transposed. The small or square
problem is one task on the gathered matrix (the ``dense_lapack`` codelet) on a CPU worker:
NumPy's threaded LAPACK above 2048 x 2048 elements, SciPy's single-threaded one below. A
tiled two-sided reduction (band, then bidiagonal or tridiagonal) is not written yet. That
task holds every tile of its input and outputs, and declares its gathered copy, the outputs
before they are scattered and LAPACK's workspace as scratch (about 2 n x n matrices for the
values, 5 for eigh, 8 for svd), so under a memory limit the manager evicts other tiles to
make room for them before it starts, or refuses it (``OutOfMemoryError``) when its tiles and
scratch exceed the limit. Infs or NaNs raise ``numpy.linalg.LinAlgError`` when the result is
read (NumPy raises for NaNs and returns NaNs for some infs).

Stacks ``(..., M, N)``: when a tile holds whole matrices, one batched ``numpy.linalg`` task per
tile (``batched.spectral``); larger matrices run the 2-d path per matrix, all submitted at
once.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from numtile.runtime import get_runtime
from numtile.tiletensor.codelets.qr import corner_copy, dense_lapack
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.elementwise import astype, multiply, reciprocal
from numtile.tiletensor.elementwise import greater as greater_than
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.linalg import batched
from numtile.tiletensor.linalg.common import RW, R, W, float_matrices
from numtile.tiletensor.linalg.matmul import matmul
from numtile.tiletensor.linalg.qr import apply_q, eye, qr_factor, r_matrix
from numtile.tiletensor.linalg.tsqr import one_tile_column, tsqr
from numtile.tiletensor.logic import where
from numtile.tiletensor.manipulation import matrix_transpose, reshape
from numtile.tiletensor.reduction import max as tensor_max
from numtile.tiletensor.reduction import min as tensor_min
from numtile.tiletensor.reduction import sum as tensor_sum
from numtile.tiletensor.tensor import TileTensor


class EighResult(NamedTuple):
    """``eigh``'s result, as NumPy's: eigenvalues ascending, eigenvectors as columns."""

    eigenvalues: TileTensor
    eigenvectors: TileTensor


class SVDResult(NamedTuple):
    """``svd``'s result, as NumPy's: x = U @ diag(S) @ Vh, S descending."""

    U: TileTensor
    S: TileTensor
    Vh: TileTensor


def _tall(x: TileTensor) -> bool:
    m, n = x.shape
    return n > 0 and m >= 2 * n


def _wide(x: TileTensor) -> bool:
    m, n = x.shape
    return m > 0 and n >= 2 * m


def check_matrices(x, name: str) -> TileTensor:
    """``x`` as a float matrix or stack of matrices, or the error NumPy's linalg raises."""
    (x,), _ = float_matrices(name, x)
    if x.ndim < 2:
        raise np.linalg.LinAlgError(  # NumPy's error (a ValueError)
            f"{name}: expected a 2-d matrix or a stack of them, got an array of shape {x.shape}"
        )
    return x


def _square(x: TileTensor, name: str) -> TileTensor:
    x = check_matrices(x, name)
    if x.shape[-2] != x.shape[-1]:
        raise np.linalg.LinAlgError(
            f"{name}: expected square matrices, got an array of shape {x.shape}"
        )
    return x


def _side(x: TileTensor) -> int:
    return max(1, min(x.tile_shape))


def _dense(x: TileTensor, operation: str, layouts, upper: bool = False) -> list[TileTensor]:
    """One task: ``operation`` on the gathered ``x``, writing outputs of these layouts."""
    # vectors (eigenvalues, singular values) are real, matrices x's dtype
    outputs = [
        TileTensor(layout, batched.real_dtype(x.dtype) if layout.ndim == 1 else x.dtype)
        for layout in layouts
    ]
    accesses = [(x.tile(index), R) for index in x.layout.indices()]
    for out in outputs:
        accesses += [(out.tile(index), W) for index in out.layout.indices()]
    summary = tuple((out.layout.ntiles, out.tile_shape) for out in outputs)
    args = (x.shape, x.tile_shape, operation, upper, summary)
    get_runtime().submit(dense_lapack, accesses, args, priority=1)
    return outputs


def _vector(length: int, side: int) -> Layout:
    return Layout((length,), (max(1, min(side, length)),))


def _matrix(rows: int, columns: int, tiles) -> Layout:
    return Layout((rows, columns), (max(1, min(tiles[0], rows)), max(1, min(tiles[1], columns))))


@dispatched(public="numtile.linalg.eigh")
def eigh(x: TileTensor, /) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of a symmetric (complex: Hermitian) matrix,
    from its lower triangle, as ``numpy.linalg.eigh``; the eigenvalues are real.

    >>> import numtile as nt, numpy as np
    >>> w, v = nt.linalg.eigh(nt.from_numpy(np.array([[2.0, 1.0], [1.0, 2.0]])))
    >>> np.round(w.to_numpy(), 12).tolist()
    [1.0, 3.0]
    """
    x = _square(x, "eigh")
    if x.ndim > 2:
        return EighResult(*batched.spectral(x, "eigh", _eigh))
    return EighResult(*_eigh(x))


def _eigh(x: TileTensor) -> list[TileTensor]:
    n, side = x.shape[0], _side(x)
    return _dense(x, "eigh", [_vector(n, side), _matrix(n, n, (side, side))])


@dispatched(public="numtile.linalg.eigvalsh")
def eigvalsh(x: TileTensor, /) -> TileTensor:
    """Eigenvalues (ascending) of a symmetric matrix, from its lower triangle.

    >>> import numtile as nt, numpy as np
    >>> w = nt.linalg.eigvalsh(nt.from_numpy(np.array([[2.0, 1.0], [1.0, 2.0]])))
    >>> np.round(w.to_numpy(), 12).tolist()
    [1.0, 3.0]
    """
    x = _square(x, "eigvalsh")
    if x.ndim > 2:
        return batched.spectral(x, "eigvalsh", _eigvalsh)[0]
    return _eigvalsh(x)[0]


def _eigvalsh(x: TileTensor) -> list[TileTensor]:
    return _dense(x, "eigvalsh", [_vector(x.shape[0], _side(x))])


def _embedded(small: TileTensor, rows: int, columns: int) -> TileTensor:
    """numpy.eye(rows, columns) with ``small`` in its top-left corner, small's tile shape."""
    out = eye(rows, columns, small.tile_shape, small.dtype)
    runtime = get_runtime()
    for index in small.layout.indices():
        runtime.submit(corner_copy, [(small.tile(index), R), (out.tile(index), RW)])
    return out


def _svd(x: TileTensor, full_matrices: bool) -> SVDResult:
    m, n = x.shape
    k = min(m, n)
    if _tall(x) and not full_matrices and one_tile_column(x):  # x = Q R: U = Q U_R (a GEMM)
        q, r = tsqr(x)
        u_small, s, vh = _dense(r, "svd_reduced", [r.layout, _vector(n, n), r.layout])
        return SVDResult(matmul(q, u_small), s, vh)
    if _tall(x):  # x = Q R, R = U_R S Vh: U = Q [U_R 0; 0 I]
        factor = qr_factor(x)
        tiles = factor.a.tile_shape
        r = r_matrix(factor, n)
        layouts = [Layout((n, n), tiles), _vector(n, tiles[1]), _matrix(n, n, tiles)]
        u_small, s, vh = _dense(r, "svd_reduced", layouts)
        u = _embedded(u_small, m, m if full_matrices else n)
        apply_q(factor, u)
        return SVDResult(u, s, vh)
    if _wide(x):  # x^T = U' S Vh': x = Vh'^T S U'^T
        u, s, vh = _svd(matrix_transpose(x), full_matrices)
        return SVDResult(matrix_transpose(vh), s, matrix_transpose(u))
    tiles = x.tile_shape
    rows, columns = (m, n) if full_matrices else (k, k)
    layouts = [_matrix(m, rows, tiles), _vector(k, _side(x)), _matrix(columns, n, tiles)]
    operation = "svd" if full_matrices else "svd_reduced"
    return SVDResult(*_dense(x, operation, layouts))


@dispatched(public="numtile.linalg.svd")
def svd(x: TileTensor, /, *, full_matrices: bool = True) -> SVDResult:
    """Singular value decomposition x = U @ diag(S) @ Vh, as ``numpy.linalg.svd``
    (``full_matrices=False``: U (m, k) and Vh (k, n) with k = min(m, n)). Singular vectors
    are unique up to sign.

    >>> import numtile as nt, numpy as np
    >>> u, s, vh = nt.linalg.svd(nt.from_numpy(np.diag([3.0, 4.0])))
    >>> s.to_numpy().tolist()
    [4.0, 3.0]
    """
    x = check_matrices(x, "svd")
    if x.ndim > 2:
        operation = "svd" if full_matrices else "svd_reduced"
        return SVDResult(*batched.spectral(x, operation, lambda m: _svd(m, full_matrices)))
    return _svd(x, full_matrices)


def singular_values(x: TileTensor) -> TileTensor:
    """svdvals of a float matrix or stack (TSQR first when tall)."""
    if x.ndim > 2:
        return batched.spectral(x, "svdvals", lambda m: [singular_values(m)])[0]
    if _wide(x):
        x = matrix_transpose(x)
    if _tall(x) and one_tile_column(x):
        _, x = tsqr(x, form_q=False)
    elif _tall(x):
        factor = qr_factor(x)
        x = r_matrix(factor, x.shape[1])
    (values,) = _dense(x, "svdvals", [_vector(min(x.shape), _side(x))])
    return values


@dispatched(public="numtile.linalg.svdvals")
def svdvals(x: TileTensor, /) -> TileTensor:
    """The singular values of a matrix, descending.

    >>> import numtile as nt, numpy as np
    >>> nt.linalg.svdvals(nt.from_numpy(np.diag([3.0, -4.0]))).to_numpy().tolist()
    [4.0, 3.0]
    """
    return singular_values(check_matrices(x, "svdvals"))


def _cutoff(s: TileTensor, shape, rtol, dtype):
    """rtol * the largest singular value of each matrix, (..., 1) (rtol: max(m, n) * eps by
    default, as NumPy; a tensor of rtols broadcasts against the stack's batch axes)."""
    if rtol is None:
        rtol = max(shape[-2:]) * float(np.finfo(dtype).eps)
    elif isinstance(rtol, TileTensor):
        rtol = reshape(rtol, rtol.shape + (1,))
    return multiply(tensor_max(s, axis=-1, keepdims=True), rtol)


def _empty(x: TileTensor) -> bool:
    return min(x.shape[-2:]) == 0


@dispatched(public="numtile.linalg.pinv")
def pinv(x: TileTensor, /, *, rtol=None) -> TileTensor:
    """The Moore-Penrose pseudo-inverse, from the SVD: singular values at most ``rtol``
    times the largest (default max(m, n) * eps) count as zero, as ``numpy.linalg.pinv``.

    >>> import numtile as nt, numpy as np
    >>> nt.linalg.pinv(nt.from_numpy(np.array([[2.0, 0.0], [0.0, 0.0]]))).to_numpy().tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    x = check_matrices(x, "pinv")
    if _empty(x):
        return astype(matrix_transpose(x), x.dtype, copy=True)
    u, s, vh = svd(x, full_matrices=False)
    inverse = where(greater_than(s, _cutoff(s, x.shape, rtol, x.dtype)), reciprocal(s), 0.0)
    inverse = reshape(inverse, s.shape[:-1] + (1, s.shape[-1]))  # (..., 1, k): scales columns
    # V S^+ U^H (U^T for real x): the conjugate flags are GEMM 'C' flags
    return matmul(
        vh,
        multiply(u, inverse),
        transpose_a=True,
        transpose_b=True,
        conjugate_a=True,
        conjugate_b=True,
    )


@dispatched(public="numtile.linalg.matrix_rank")
def matrix_rank(x: TileTensor, /, *, rtol=None) -> TileTensor:
    """The number of singular values above ``rtol`` times the largest (default
    max(m, n) * eps), an int64 scalar, as ``numpy.linalg.matrix_rank``.

    >>> import numtile as nt, numpy as np
    >>> nt.linalg.matrix_rank(nt.from_numpy(np.ones((3, 3)))).item()
    1
    """
    x = check_matrices(x, "matrix_rank")
    if _empty(x):
        return astype(tensor_sum(x, axis=(-2, -1)), np.int64)
    s = singular_values(x)
    above = greater_than(s, _cutoff(s, x.shape, rtol, x.dtype))
    return tensor_sum(astype(above, np.int64), axis=-1)


def spectral_norm(x: TileTensor, ord, keepdims: bool) -> TileTensor:
    """matrix_norm for ord 2 (largest singular value), -2 (smallest) and 'nuc' (their sum);
    through the public svdvals, so that its gradient rule records (matrix_norm is composite)."""
    s = svdvals(check_matrices(x, "matrix_norm"))
    value = {2: tensor_max, -2: tensor_min, "nuc": tensor_sum}[ord](s, axis=-1)
    return reshape(value, value.shape + (1, 1)) if keepdims else value
