"""Codelets of the tiled Householder QR (PLASMA's names in brackets): ``geqrt`` (QR of one
tile), ``gemqrt`` [unmqr] (its Q applied to a tile of the same row), ``tpqrt`` [tsqrt/ttqrt]
(QR of an R stacked on a square or triangular tile below), ``tpmqrt`` [tsmqr/ttmqr] (that Q
applied to a pair of tiles), and the result builders ``triu_copy``, ``eye_fill`` and
``corner_copy``; ``geqrt_panel``, the blocked QR's panel (``linalg/qr_blocked.py``: LAPACK's
geqrt on a tile column stacked, its whole block reflector's T^T and its diagonal tile's
unit lower V as two more tiles). Each declares its copies and LAPACK workspace as scratch.

Plus ``dense_lapack``: one task on the gathered matrix for the spectral functions (eigh, svd and
their values) on a CPU worker. A large matrix goes to NumPy's LAPACK, whose BLAS is not the
one the runtime limits to a thread per worker (``runtime/blas_threads.py``), so that task runs
threaded LAPACK; a small one to SciPy's, single-threaded. The gathered copy, the outputs
before they are scattered and LAPACK's workspace are declared as the task's scratch
(``_dense_scratch``, an upper bound), so a memory manager makes room for them before the
task starts.
"""

from __future__ import annotations

import math

import numpy as np

from numtile import opcodes
from numtile.runtime import Codelet
from numtile.tiletensor.codelets.lu import COMPLEX_FLOPS, stacked, unstack


def _geqrt(ops, a, t):
    ops.geqrt(a, t)


def _gemqrt(ops, v, t, c, transpose):
    ops.gemqrt(v, t, c, transpose)


def _tpqrt(ops, a, b, t, triangular):
    ops.tpqrt(a, b, t, triangular)


def _tpmqrt(ops, v, t, a, b, transpose, triangular):
    ops.tpmqrt(v, t, a, b, transpose, triangular)


def _triu_copy(ops, source, out, diagonal):
    ops.triu_copy(source, out, diagonal)


def _eye_fill(ops, out, diagonal):
    ops.eye_fill(out, diagonal)


def _corner_copy(ops, source, out):
    # the top-left corner of out (the source's shape) becomes source
    rows, columns = source.shape
    ops.triu_copy(source, out[:rows, :columns], -rows)


def _geqrt_flops(a, t) -> float:
    # LAPACK's count for geqrf: 2 m n^2 - 2/3 n^3 when m >= n
    m, n = a
    k = min(m, n)
    return 2.0 * (2.0 * m * n * k - (m + n) * k * k + 2.0 * k**3 / 3.0)


def _gemqrt_flops(v, t, c, transpose) -> float:
    k = min(v)
    return 4.0 * c[0] * c[1] * k - 2.0 * c[1] * k * k


def _tpqrt_flops(a, b, t, triangular) -> float:
    n = a[1]
    rows = min(b[0], n) if triangular else b[0]
    return (2.0 / 3.0 if triangular else 2.0) * rows * n * n


def _tpmqrt_flops(v, t, a, b, transpose, triangular) -> float:
    rows = min(v[0], v[1]) if triangular else v[0]
    return (2.0 if triangular else 4.0) * rows * v[1] * a[1]


def _work(t, columns) -> int:
    """Elements of the LAPACK workspace a kernel with factor tile ``t`` allocates (nb x n)."""
    return min(t.shape[1], t.shape[0]) * columns


def _geqrt_scratch(a, t) -> int:
    # the column-major copy of a and the workspace
    return (math.prod(a.shape) + _work(t, a.shape[1])) * a.dtype.itemsize


def _gemqrt_scratch(v, t, c, transpose) -> int:
    return (math.prod(v.shape) + math.prod(c.shape) + _work(t, c.shape[1])) * c.dtype.itemsize


def _tpqrt_scratch(a, b, t, triangular) -> int:
    return (math.prod(a.shape) + math.prod(b.shape) + _work(t, a.shape[1])) * a.dtype.itemsize


def _tpmqrt_scratch(v, t, a, b, transpose, triangular) -> int:
    copies = math.prod(v.shape) + math.prod(a.shape) + math.prod(b.shape)
    return (copies + _work(t, a.shape[1])) * a.dtype.itemsize


def _factor_codelet(name, kernel, flops, scratch) -> Codelet:
    """A reflector kernel's codelet (complex tiles count 4x the real flops)."""
    return Codelet(name, kernel=kernel, flops=flops, scratch=scratch, complex_flops=COMPLEX_FLOPS)


geqrt = _factor_codelet("geqrt", _geqrt, _geqrt_flops, _geqrt_scratch)
gemqrt = _factor_codelet("gemqrt", _gemqrt, _gemqrt_flops, _gemqrt_scratch)
tpqrt = _factor_codelet("tpqrt", _tpqrt, _tpqrt_flops, _tpqrt_scratch)
tpmqrt = _factor_codelet("tpmqrt", _tpmqrt, _tpmqrt_flops, _tpmqrt_scratch)
triu_copy = Codelet("triu_copy", kernel=_triu_copy)
eye_fill = Codelet("eye_fill", kernel=_eye_fill)
corner_copy = Codelet("corner_copy", kernel=_corner_copy)


def _geqrt_panel(ops, *tiles):
    # a panel's tiles from the diagonal down, then its T^T (columns x columns) and the unit
    # lower V of its diagonal tile (that tile's shape): one block reflector I - V T V^T
    *column, t, v = tiles
    panel = stacked(ops, column)
    ops.geqrt(panel, t)
    if t.dtype.kind == "c":  # T^H = conj(T^T), as on a CPU worker
        factors = t.reshape(-1)
        ops.complex_unary(factors, factors, opcodes.COMPLEX_CONJ)
    unstack(ops, panel, column)
    _unit_lower(ops, column[0], v)


def _geqrt_panel_cpu(ops, *tiles):
    # as _geqrt_panel, the panel stacked column-major for LAPACK: one copy, not two
    *column, t, v = tiles
    rows, columns = sum(tile.shape[0] for tile in column), t.shape[0]
    major = np.empty((columns, rows), t.dtype)  # the panel, transposed
    starts = np.cumsum([0] + [tile.shape[0] for tile in column])
    for tile, start, stop in zip(column, starts[:-1], starts[1:]):
        major[:, start:stop] = tile.T
    ops.geqrt(major.T, t)
    if t.dtype.kind == "c":  # keep T^H = conj(T^T): the updates' GEMM flags read T and T^H
        np.conjugate(t, out=t)
    for tile, start, stop in zip(column, starts[:-1], starts[1:]):
        tile[:, :] = major[:, start:stop].T
    _unit_lower(ops, column[0], v)


def _unit_lower(ops, source, v):
    """v = the unit lower trapezoid of ``source`` (its strictly lower part, ones on the
    diagonal): the diagonal tile's reflectors."""
    rows, columns = v.shape
    ops.band(source.reshape(1, rows, columns), v.reshape(1, rows, columns), 0, 0, -rows, -1)
    ops.fill(v.reshape(-1)[:: columns + 1][: min(rows, columns)], 1)


def _geqrt_panel_flops(*shapes) -> float:
    *column, _t, _v = shapes
    return _geqrt_flops((sum(s[0] for s in column), column[0][1]), None)


def _geqrt_panel_scratch(*tiles) -> int:
    # the stacked panel and LAPACK's workspace (a GPU's geqrt works in place)
    *column, t, _v = tiles
    return sum(tile.nbytes for tile in column) + _work(t, t.shape[0]) * t.dtype.itemsize


geqrt_panel = Codelet(
    "geqrt_panel",
    kernel=_geqrt_panel,
    implementations={"cpu": _geqrt_panel_cpu},
    flops=_geqrt_panel_flops,
    complex_flops=COMPLEX_FLOPS,
    scratch=_geqrt_panel_scratch,
)


# --- one task on the gathered matrix ----------------------------------------------------------


def _gather(tiles, shape, tile_shape):
    """The (rows, columns) matrix whose C-ordered tiles are ``tiles``."""
    out = np.empty(shape, tiles[0].dtype)
    columns = -(-shape[1] // tile_shape[1]) if shape[1] else 0
    for index, tile in enumerate(tiles):
        i, j = divmod(index, columns)
        r, c = i * tile_shape[0], j * tile_shape[1]
        out[r : r + tile.shape[0], c : c + tile.shape[1]] = tile
    return out


def _scatter(value, tiles, tile_shape):
    """Copy ``value`` (1-d or 2-d) into its C-ordered output ``tiles``."""
    if value.ndim == 1:
        for index, tile in enumerate(tiles):
            tile[:] = value[index * tile_shape[0] : index * tile_shape[0] + tile.shape[0]]
        return
    columns = -(-value.shape[1] // tile_shape[1]) if value.shape[1] else 1
    for index, tile in enumerate(tiles):
        i, j = divmod(index, columns)
        r, c = i * tile_shape[0], j * tile_shape[1]
        tile[:, :] = value[r : r + tile.shape[0], c : c + tile.shape[1]]


def _finite(matrix, operation):
    if not np.isfinite(matrix).all():
        raise np.linalg.LinAlgError(
            f"linalg.{operation}: the matrix of shape {matrix.shape} contains infs or NaNs "
            "(LAPACK's iteration does not converge on them, as in numpy.linalg)"
        )


# above this many elements the gathered matrix goes to NumPy's threaded LAPACK; below, to
# SciPy's, which the runtime keeps at one thread per worker (a small problem gains nothing
# from threads, and a thread pool spinning beside the other workers costs them)
THREADED_ABOVE = 2048 * 2048


def _spectral(matrix, operation, upper):
    """The outputs of ``operation`` on the dense ``matrix``, as numpy.linalg computes them."""
    import scipy.linalg

    _finite(matrix, operation)
    threaded = matrix.size > THREADED_ABOVE
    lower = not upper
    if operation in ("eigh", "eigvalsh"):
        if threaded:
            uplo = "L" if lower else "U"
            if operation == "eigh":
                return np.linalg.eigh(matrix, UPLO=uplo)
            return (np.linalg.eigvalsh(matrix, UPLO=uplo),)
        only = operation == "eigvalsh"
        result = scipy.linalg.eigh(matrix, lower=lower, eigvals_only=only, check_finite=False)
        return (result,) if only else result
    if operation not in ("svd", "svd_reduced", "svdvals"):
        raise ValueError(f"unknown dense operation {operation!r}")
    full, values_only = operation == "svd", operation == "svdvals"
    if threaded:
        result = np.linalg.svd(matrix, full_matrices=full, compute_uv=not values_only)
    else:
        result = scipy.linalg.svd(
            matrix, full_matrices=full, compute_uv=not values_only, check_finite=False
        )
    return (result,) if values_only else result


def _dense_cpu(ops, *tiles_then_args):
    # the input's tiles (C order), then each output's tiles; args: the input's shape and tile
    # shape, the operation, the upper flag, then per output its tile count and tile shape
    *tiles, shape, tile_shape, operation, upper, outputs = tiles_then_args
    count = len(tiles) - sum(n for n, _ in outputs)
    matrix = _gather(tiles[:count], shape, tile_shape)
    results = _spectral(matrix, operation, upper)
    offset = count
    for value, (n, out_tile) in zip(results, outputs, strict=True):
        # in the output's own dtype (real eigenvalues and singular values of complex x)
        _scatter(np.asarray(value, tiles[offset].dtype), tiles[offset : offset + n], out_tile)
        offset += n


def _dense_flops(*shapes_then_args) -> float:
    *_shapes, shape, _tile, operation, _upper, _outputs = shapes_then_args
    m, n = shape
    k = min(m, n)
    return (22.0 if operation in ("svd", "svd_reduced", "eigh") else 4.0) * max(m, n) * k * k


def lapack_bytes(m: int, n: int, operation: str, itemsize: int) -> int:
    """The bytes a spectral LAPACK driver allocates beside its input for one (m, n) matrix,
    from above: its copy of the matrix (it overwrites its input), the outputs, and the
    workspace (``gesdd``: about 4 k^2 elements with vectors, ``syevd`` 2 n^2, plus
    O(max(m, n)) for every driver), plus 10 integers per row."""
    k, large = min(m, n), max(m, n)
    outputs = {
        "eigh": n * n + n,
        "eigvalsh": n,
        "svd": m * m + n * n + k,
        "svd_reduced": 2 * k * large + k,
        "svdvals": k,
    }.get(operation, 0)
    vectors = {"eigh": 2, "svd": 4, "svd_reduced": 4}.get(operation, 0)
    workspace = vectors * k * k + 64 * large
    return (m * n + outputs + workspace) * itemsize + 40 * large


def _dense_scratch(*tiles_then_args) -> int:
    """The bytes a ``dense_lapack`` call allocates beside its tiles: the gathered matrix and
    what LAPACK allocates on it (``lapack_bytes``). Measured with tracemalloc on SciPy's
    drivers, it is within 1.0-1.2x of their peak (eigh: 1.7x, its bound being NumPy's
    ``syevd``)."""
    *tiles, shape, _tile, operation, _upper, _outputs = tiles_then_args
    itemsize = tiles[0].dtype.itemsize
    return math.prod(shape) * itemsize + lapack_bytes(*shape, operation, itemsize)


dense_lapack = Codelet(
    "dense_lapack",
    implementations={"cpu": _dense_cpu},
    flops=_dense_flops,
    complex_flops=COMPLEX_FLOPS,
    scratch=_dense_scratch,
)
