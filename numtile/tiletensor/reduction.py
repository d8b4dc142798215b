"""Reductions over any axes: sum, mean, max, min, prod, vector norms and softmax."""

from __future__ import annotations

import builtins
import math

import numpy as np

from numtile import opcodes
from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.codelets import statistics as statistics_codelets
from numtile.tiletensor.copying import normalize_axis
from numtile.tiletensor.creation import fill_tiles
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import (
    bool_,
    check_dtype,
    float32,
    float64,
    int64,
    is_floating,
    is_inexact,
    is_narrow_floating,
    uint64,
)
from numtile.tiletensor.elementwise import abs as absolute
from numtile.tiletensor.elementwise import astype, exp, log, refuse_complex, sqrt
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.manipulation import reshape, retile
from numtile.tiletensor.tensor import TileTensor

R, W, ACC = Access.R, Access.W, Access.ACCUMULATE
TASKS_PER_WORKER = 8  # column-sum tasks a worker (``_column_chains``)


def require_inexact(x: TileTensor, name: str) -> None:
    """Raise ``TypeError`` unless ``x`` has a real or complex floating dtype (the norms: the
    standard defines them for floating dtypes only, and array-api-strict refuses the rest).

    >>> import numtile as nt
    >>> require_inexact(nt.ones((2,), dtype="int64"), "vector_norm")
    Traceback (most recent call last):
    TypeError: vector_norm needs a real or complex floating dtype, got int64 (cast it with astype)
    """
    if not is_inexact(x.dtype):
        raise TypeError(
            f"{name} needs a real or complex floating dtype, got {x.dtype.name} "
            "(cast it with astype)"
        )


def normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    """``axis`` (an int, a sequence or None for all) as sorted non-negative axes.

    >>> normalize_axes(-1, 3), normalize_axes(None, 2)
    ((2,), (0, 1))
    """
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    out = []
    for a in axes:
        out.append(normalize_axis(a, ndim))
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis}")
    return tuple(sorted(out))


def _identity(op: str, dtype: np.dtype):
    if op in ("sum", "sumsq", "sumabs"):
        return 0
    if op == "prod":
        return 1
    if op == "maxabs":
        return 0
    if dtype.kind == "f":
        return -np.inf if op == "max" else np.inf
    if dtype.kind == "b":
        return op == "min"
    info = np.iinfo(dtype)
    return info.min if op == "max" else info.max


def _tile_plan(tile_shape, axes):
    """Kernel arguments (move_axes, pre, n, post) reducing ``axes`` of a tile."""
    contiguous = all(b == a + 1 for a, b in zip(axes, axes[1:]))
    if contiguous and axes:
        first, last = axes[0], axes[-1]
        return (
            None,
            math.prod(tile_shape[:first]),
            math.prod(tile_shape[first : last + 1]),
            math.prod(tile_shape[last + 1 :]),
        )
    kept = [s for a, s in enumerate(tile_shape) if a not in axes]
    reduced = math.prod(tile_shape[a] for a in axes)
    return (tuple(axes) if axes else None), math.prod(kept), reduced, 1


def reduce_bools(x: TileTensor, op: str, axis, keepdims: bool) -> TileTensor:
    """The ``max`` (``any``) or ``min`` (``all``) of a bool tensor over ``axis``, its tiles
    reduced as they are (no integer copy of the tensor)."""
    assert x.dtype == bool_ and op in ("max", "min")
    return _reduce(x, op, axis, keepdims, bool_)


def _reduce(x: TileTensor, op: str, axis, keepdims: bool, dtype) -> TileTensor:
    if is_narrow_floating(dtype):  # accumulated in float32, rounded once at the end
        return astype(_reduce(x, op, axis, keepdims, float32), dtype)
    axes = normalize_axes(axis, x.ndim)
    # the moduli of complex tiles reduce into real partials, read by the kernels themselves
    modulus = x.dtype.kind == "c" and op in opcodes.MODULUS_REDUCE_OPS
    if op not in ("sum", "prod") and not modulus:
        refuse_complex(x, op)
    empty = any(x.shape[a] == 0 for a in axes)
    if empty and op in ("max", "min", "maxabs") and dtype != bool_:  # (any, all: False, True)
        raise ValueError(f"{op} of an empty axis has no identity (shape {x.shape}, axis {axis})")
    # a deferred element-wise expression (auto_fusion): reduced as it is computed, if it can be
    out = None if x._pending is None else x._pending.reduced(x, op, axes, dtype)
    if out is None:
        out = _reduce_tiled(x, op, axes, dtype, modulus)
    if keepdims:
        out = reshape(out, tuple(1 if a in axes else s for a, s in enumerate(x.shape)))
    return out


def _reduce_tiled(x: TileTensor, op: str, axes, dtype, modulus: bool) -> TileTensor:
    """The reduction ``op`` of ``x`` over ``axes`` into a new tensor of ``dtype``, from x's
    tiles (converted to ``dtype`` first, but for the moduli and 16-bit floats)."""
    widened = is_narrow_floating(x.dtype) and dtype == float32
    if x.dtype != dtype and not widened and not modulus:
        x = astype(x, dtype)  # (the codelets widen bfloat16 tiles to float32 themselves)
    kept = [a for a in range(x.ndim) if a not in axes]
    out = TileTensor(reduced_layout(x.layout, kept), dtype)
    runtime = get_runtime()
    if not _sum_column_chains(runtime, x, out, op, axes, kept):
        _reduce_tiles(runtime, x, out, op, axes, kept)
    return out


def reduced_layout(layout: Layout, kept) -> Layout:
    """The layout of a reduction of ``layout`` that keeps axes ``kept``."""
    return Layout(tuple(layout.shape[a] for a in kept), tuple(layout.tile_shape[a] for a in kept))


# how the partial results of a reduction combine: sums of |x| or x^2 are sums
_COMBINE = {"sum": "sum", "sumsq": "sum", "sumabs": "sum", "prod": "prod"}
_COMBINE.update(max="max", maxabs="max", min="min")


def tile_groups(x: TileTensor, kept) -> dict[tuple, list]:
    """x's tile handles by the index of the output tile they reduce into (its ``kept``
    axes), in x's tile order."""
    groups: dict[tuple, list] = {}
    for index, handle in zip(x.layout.indices(), x.handles):
        groups.setdefault(tuple(index[a] for a in kept), []).append(handle)
    return groups


def partial_tiles(layout: Layout, chains: int, dtype) -> TileTensor:
    """``chains`` partial results of a reduction into ``layout``, one tile each along a new
    leading axis (tiled as ``layout`` on the others)."""
    return TileTensor(Layout((chains, *layout.shape), (1, *layout.tile_shape)), dtype)


def partial_count(runtime, x: TileTensor, groups: dict) -> int:
    """How many partial results each output tile of a reduction of ``x`` takes: 1 (its tiles
    accumulate into it), or with fewer output tiles than workers (not under MPI) a few, which
    the tiles go into in turn: accumulating into one tile, they would run one at a time."""
    workers = len(runtime.kinds)
    if not groups or len(groups) >= workers or x.distribution is not None:
        return 1
    longest = builtins.max(map(len, groups.values()))
    return builtins.min(longest, 2 * -(-workers // len(groups)))


def _reduce_tiles(runtime, x: TileTensor, out: TileTensor, op: str, axes, kept) -> None:
    """One task a tile of x, accumulating into its output tile, or (``partial_count``) into
    partial tiles that tasks at the end combine into it."""
    identity = _identity(op, out.dtype)
    fill_tiles(out, identity)
    groups = tile_groups(x, kept)
    chains = partial_count(runtime, x, groups)
    if chains > 1:
        partials = fill_tiles(partial_tiles(out.layout, chains, out.dtype), identity)
    # the first tile of every group, then the second...: workers side by side accumulate into
    # different tiles (a group at a time, a worker waited while another accumulated into the
    # tile its task writes: max over axis 0 of 4 x 4 tiles, 25-36 ms of 2 workers idle a call)
    for i, handles in enumerate(zip(*groups.values())):  # (every group holds as many tiles)
        for at, handle in zip(groups, handles):
            dst = out.tile(at) if chains == 1 else partials.tile((i % chains, *at))
            plan = _tile_plan(handle.shape, axes)
            runtime.submit(_reduce_codelet(op, x.dtype, plan), [(handle, R), (dst, ACC)], plan)
    combine = codelets.reduction.reduce[_COMBINE[op]]
    for at in groups:
        for k in range(chains if chains > 1 else 0):
            dst = out.tile(at)
            plan = (None, 1, 1, math.prod(dst.shape))
            runtime.submit(combine, [(partials.tile((k, *at)), R), (dst, ACC)], plan)


def _reduce_codelet(op: str, dtype, plan):
    """The codelet reducing a tile of ``dtype`` with ``plan``: the streaming column sum for
    float sums over an axis that is not innermost, else the reduction of ``op``."""
    move_axes, _, n, post = plan
    if op == "sum" and dtype in (float32, float64) and move_axes is None and n and post > 1:
        return statistics_codelets.sum_columns
    return codelets.reduction.reduce[op]


def _sum_column_chains(runtime, x: TileTensor, out: TileTensor, op: str, axes, kept) -> bool:
    """Submit the column sums of ``x`` into ``out`` as chains of tiles, one task a chain
    (``submit_chains``); False (nothing submitted) where the tiles reduce one a task, each
    into a filled ``out`` (not a float sum over an axis that is not innermost, an empty axis,
    or under MPI)."""
    last_tile = tuple(s - t * (g - 1) for s, t, g in zip(x.shape, x.tile_shape, x.grid))
    columns = statistics_codelets.sum_columns
    if (
        x.distribution is not None
        or not x.layout.ntiles
        or 0 in x.shape
        or any(
            _reduce_codelet(op, x.dtype, _tile_plan(shape, axes)) is not columns
            for shape in (x.tile_shape, last_tile)
        )
    ):
        return False
    plans = {shape: _tile_plan(shape, axes) for shape in {h.shape for h in x.handles}}

    def chain_task(chain, dst, first):
        _, pre, _, post = plans[chain[0].shape]
        extents = tuple(plans[h.shape][2] for h in chain)
        _submit_chain(runtime, chain, dst, (pre, post, extents), first)

    def combine_task(chain, dst):
        _submit_chain(runtime, chain, dst, (1, math.prod(dst.shape), (1,) * len(chain)), True)

    submit_chains(runtime, tile_groups(x, kept), out, chain_task, combine_task)
    return True


def submit_chains(runtime, groups: dict, out: TileTensor, chain_task, combine_task) -> None:
    """Reduce each group of tiles (output tile index -> its tiles, as many in each) into its
    tile of ``out`` as chains: ``chain_task(tiles, dst, first)`` submits one task that
    reduces ``tiles`` in turn into ``dst`` (written when ``first``, else accumulated).

    About ``TASKS_PER_WORKER`` chains a worker: enough for the workers to finish together,
    few enough that many small tiles do not cost a task each. The first chain of an output
    tile writes it (no fill task before it); the later ones wait for it, then accumulate.
    Chains go first ones first, so workers side by side reduce into different output tiles.
    With fewer output tiles than workers, each chain writes a partial tile of its own (chains
    accumulating into one tile would run one at a time), and ``combine_task(partials, dst)``
    submits the task combining an output tile's partials into it."""
    workers, count = len(runtime.kinds), len(next(iter(groups.values())))  # tiles a group
    step = -(-count // -(-TASKS_PER_WORKER * workers // len(groups)))  # tiles a chain
    chains = -(-count // step)  # chains a group
    partials = None
    if len(groups) < workers and chains > 1:
        partials = partial_tiles(out.layout, chains, out.dtype)
    for part in range(chains):
        for dst_index, tiles in groups.items():
            chain = tiles[part * step : (part + 1) * step]
            if partials is None:
                chain_task(chain, out.tile(dst_index), part == 0)
            else:
                chain_task(chain, partials.tile((part, *dst_index)), True)
    for dst_index in groups if partials is not None else ():
        chain = [partials.tile((part, *dst_index)) for part in range(chains)]
        combine_task(chain, out.tile(dst_index))


def _submit_chain(runtime, chain, dst, plan, first: bool) -> None:
    """One ``sum_column_chain`` task: the tiles of ``chain`` summed into ``dst`` (written
    when ``first``, else accumulated)."""
    accesses = [*((tile, R) for tile in chain), (dst, W if first else ACC)]
    runtime.submit(statistics_codelets.sum_column_chain, accesses, (*plan, first))


def _sum_dtype(x: TileTensor, dtype):
    """The array API's accumulator of sum and prod: the default integer (int64; uint64 for
    unsigned integers) for integers and booleans, the input's dtype otherwise."""
    if dtype is not None:
        return check_dtype(dtype)
    if x.dtype.kind == "u":
        return uint64
    return int64 if x.dtype.kind in "bi" else x.dtype


def _extremum_dtype(x: TileTensor, name: str):
    refuse_complex(x, name)
    return int64 if x.dtype == bool_ else x.dtype


@dispatched
def sum(x: TileTensor, /, *, axis=None, dtype=None, keepdims: bool = False) -> TileTensor:  # noqa: A001
    """Sum over ``axis`` (an int, a tuple, or None for all axes).

    >>> import numtile as nt
    >>> nt.sum(nt.ones((4, 6), tile_shape=(3, 4)), axis=0).to_numpy().tolist()
    [4.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    """
    return _reduce(x, "sum", axis, keepdims, _sum_dtype(x, dtype))


@dispatched
def prod(x: TileTensor, /, *, axis=None, dtype=None, keepdims: bool = False) -> TileTensor:
    """Product over ``axis``."""
    return _reduce(x, "prod", axis, keepdims, _sum_dtype(x, dtype))


@dispatched
def max(x: TileTensor, /, *, axis=None, keepdims: bool = False) -> TileTensor:  # noqa: A001
    """Maximum over ``axis``."""
    return _reduce(x, "max", axis, keepdims, _extremum_dtype(x, "max"))


@dispatched
def min(x: TileTensor, /, *, axis=None, keepdims: bool = False) -> TileTensor:  # noqa: A001
    """Minimum over ``axis``."""
    return _reduce(x, "min", axis, keepdims, _extremum_dtype(x, "min"))


@dispatched
def mean(x: TileTensor, /, *, axis=None, keepdims: bool = False) -> TileTensor:
    """Arithmetic mean over ``axis`` (integers average in float64).

    >>> import numtile as nt
    >>> nt.mean(nt.arange(5)).item()
    2.0
    """
    narrow = is_narrow_floating(x.dtype)  # bfloat16: a float32 sum and scaling, rounded once
    dtype = float32 if narrow else x.dtype if x.dtype.kind in "fc" else float64
    count = math.prod(x.shape[a] for a in normalize_axes(axis, x.ndim))
    # through the public sum and *: mean is differentiable wherever they are
    total = sum(x, axis=axis, keepdims=keepdims, dtype=dtype)
    out = total * (1.0 / count if count else np.nan)
    return astype(out, x.dtype) if narrow else out


@dispatched(public="numtile.linalg.vector_norm")
def vector_norm(x: TileTensor, /, *, axis=None, keepdims: bool = False, ord=2) -> TileTensor:
    """Vector p-norm over ``axis`` (array API ``linalg.vector_norm``): 2, 1, inf, -inf, 0, p.

    Real or complex floating input; a complex one gives the real dtype of its precision
    (complex64 -> float32), the norm of the moduli ``|z|``: ord 2, 1 and inf read them in the
    reduction kernels, the other ords reduce one tiled ``abs``. Integers and booleans raise
    ``TypeError``, as in the standard.

    >>> import numtile as nt
    >>> nt.linalg.vector_norm(nt.full((4,), 3.0)).item()
    6.0
    >>> nt.linalg.vector_norm(nt.asarray([3 + 4j, 0j], dtype="complex64")).dtype.name
    'float32'
    """
    require_inexact(x, "vector_norm")
    ord = 2 if ord is None else ord  # NumPy's default, which array_api_strict takes too
    if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise ValueError(f"vector_norm: ord must be a real number, inf or -inf, got {ord!r}")
    if is_narrow_floating(x.dtype):  # bfloat16: in float32, rounded once (as PyTorch)
        norm = vector_norm(astype(x, float32), axis=axis, keepdims=keepdims, ord=ord)
        return astype(norm, x.dtype)
    dtype = np.finfo(x.dtype).dtype  # the real dtype of x's precision
    if ord == 2:
        return sqrt(_reduce(x, "sumsq", axis, keepdims, dtype))
    if ord == 1:
        return _reduce(x, "sumabs", axis, keepdims, dtype)
    if ord == np.inf:
        return _reduce(x, "maxabs", axis, keepdims, dtype)
    if x.dtype.kind == "c":  # the other ords: the norm of the moduli
        x = absolute(x)
    if ord == -np.inf:
        return _reduce(absolute(astype(x, dtype)), "min", axis, keepdims, dtype)
    if ord == 0:
        return _reduce(astype(x != 0, dtype), "sum", axis, keepdims, dtype)
    powered = _reduce(absolute(astype(x, dtype)) ** ord, "sum", axis, keepdims, dtype)
    return powered ** (1.0 / ord)


def sum_of_squares(x: TileTensor, dtype=float64) -> TileTensor:
    """The sum of the squares of every element, accumulated in ``dtype`` (a 0-d tensor).

    >>> import numtile as nt
    >>> sum_of_squares(nt.full((4,), 3.0, dtype="float32")).item()
    36.0
    """
    return _reduce(x, "sumsq", None, False, np.dtype(dtype))


def _whole_axis(x: TileTensor, axis: int) -> TileTensor:
    """``x`` retiled, if needed, so that each tile holds the whole of ``axis``."""
    if x.tile_shape[axis] == (x.shape[axis] or 1):
        return x
    return retile(x, x.tile_shape[:axis] + ((x.shape[axis] or 1),) + x.tile_shape[axis + 1 :])


def _axis_plan(tile_shape, axis: int) -> tuple[int, int, int]:
    """(pre, n, post) of a tile read as three axes, ``axis`` in the middle."""
    return (
        math.prod(tile_shape[:axis]),
        tile_shape[axis],
        math.prod(tile_shape[axis + 1 :]),
    )


def softmax(x: TileTensor, axis: int = -1) -> TileTensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (tiles hold the whole axis).

    The result has the tiling of ``x``; an axis cut into several tiles is retiled whole
    first. ``numtile.nn.functional.softmax`` is its differentiable form.

    >>> import numtile as nt
    >>> [round(v, 4) for v in softmax(nt.from_numpy([0.0, 1.0, 2.0])).to_numpy().tolist()]
    [0.09, 0.2447, 0.6652]
    """
    (axis,) = normalize_axes(axis, x.ndim)
    if not is_floating(x.dtype):
        x = astype(x, float64)
    whole = _whole_axis(x, axis)
    out = TileTensor(whole.layout, whole.dtype)
    runtime = get_runtime()
    for src, dst in zip(whole.handles, out.handles):
        runtime.submit(
            codelets.reduction.softmax, [(src, R), (dst, W)], _axis_plan(src.shape, axis)
        )
    return _tiled_like(out, x)


def softmax_backward(y: TileTensor, grad: TileTensor, axis: int = -1) -> TileTensor:
    """``y * (grad - sum(grad * y, axis))``: the gradient through ``y = softmax(x, axis)``.

    >>> import numtile as nt
    >>> y = softmax(nt.zeros((2,)))
    >>> softmax_backward(y, nt.from_numpy([1.0, 0.0])).to_numpy().tolist()
    [0.25, -0.25]
    """
    (axis,) = normalize_axes(axis, y.ndim)
    tiled = y
    y = _whole_axis(y, axis)
    if grad.tile_shape != y.tile_shape:
        grad = retile(grad, y.tile_shape)
    if grad.dtype != y.dtype:
        grad = astype(grad, y.dtype)
    out = TileTensor(y.layout, y.dtype)
    runtime = get_runtime()
    for ys, gs, dst in zip(y.handles, grad.handles, out.handles):
        runtime.submit(
            codelets.reduction.softmax_backward,
            [(ys, R), (gs, R), (dst, W)],
            _axis_plan(ys.shape, axis),
        )
    return _tiled_like(out, tiled)


def _tiled_like(x: TileTensor, like: TileTensor) -> TileTensor:
    if x.tile_shape == like.tile_shape:
        return x
    return retile(x, like.tile_shape)


def log_softmax(x: TileTensor, axis: int = -1) -> TileTensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``: finite even for huge logits.

    ``numtile.nn.functional.log_softmax`` is its differentiable form.

    >>> import numtile as nt
    >>> log_softmax(nt.from_numpy([0.0, 1000.0])).to_numpy().tolist()
    [-1000.0, 0.0]
    """
    (axis,) = normalize_axes(axis, x.ndim)
    if is_narrow_floating(x.dtype):  # in float32, rounded once (as PyTorch)
        return astype(log_softmax(astype(x, float32), axis), x.dtype)
    if x.dtype.kind != "f":
        x = astype(x, float64)
    shifted = x - max(x, axis=axis, keepdims=True)
    return shifted - log(sum(exp(shifted), axis=axis, keepdims=True))
