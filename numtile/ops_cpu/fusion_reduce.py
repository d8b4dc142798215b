"""Fused reductions: a reduction of an element-wise expression, one generated Numba kernel.

``sum(x * x, axis=0)`` or ``any(x > 2)`` unfused writes the element-wise result to memory and
reads it back to reduce it; here each element of the expression (``ops_cpu.fusion``'s steps,
computed by the same scalar functions) goes straight into the reduction's partials, which
accumulate as ``ops_cpu.reduction``'s kernels accumulate them: the load, transform and
combine steps of its table (sums and products in float64, int64 or uint64; extrema in the
element's own type, bools as uint8) and, where the reduced axis is not innermost, its column
loop (blocks of up to ``COLUMNS`` columns, a row of each quarter of the rows a step), in its
order: the column sums equal the unfused ones bit for bit. Where the reduced axis is
innermost (``post == 1``) a row is read as ``LANES`` columns whose partials combine at the
end: a loop that vectorises without the unfused kernels' ``reassoc`` flag, whose sums and
products may differ from theirs in the last bits. The max, min, any and all equal the
unfused ones everywhere.

The kernels take no fast-math flag, so no step of the expression is reassociated (``x + 1 +
2`` stays two roundings, as the unfused ops compute it). The generated ``value`` and ``view``
are inlined at Numba's IR level and index the inputs with the loops' own counters: LLVM
vectorises them (a function of its own, or indices that are products of a step, it did not).
The loops that read the elements are one generated function, ``partials``, that both
reductions call once (a 2048^2 float64 tile, one thread: 1.8-2.2 ms, as ``sum_columns``):
each place the expression is inlined costs compile time (a row loop of its own, and a second
call that LLVM inlines, took the first fused ``any`` from 2.7 to 6 s of CPU). Inputs are
whole tiles read in C order, or one element. sin, cos and tan take their exact form per
element (libm beyond their reduction).

The source goes through ``fusion.load_module`` (the same digest-named file under the cache
dir, kept compiled by Numba's disk cache); it names the digest of this module and
``ops_cpu.reduction``, whose loops and steps it inlines. There is no CUDA twin: automatic
fusion, its only caller, is off on runtimes with GPU workers.
"""

from __future__ import annotations

import hashlib
import pathlib
import warnings

import numpy as np
from numba.core.errors import NumbaIRAssumptionWarning

from numtile.ops_cpu.fusion import generated, header, step_code, step_imports
from numtile.ops_cpu.helpers import inlined
from numtile.ops_cpu.reduction import _REDUCTIONS, _combine_into

COLUMNS = 2048  # as ops_cpu.reduction's column blocks: partials in L1 cache
LANES = 256  # columns a row is read as (reduce_rows)
_FLAGS = 'nogil=True, cache=True, error_model="numpy"'  # of the generated kernels: no fastmath
_HERE = pathlib.Path(__file__).parent
# Numba's pedantic check of the IR it inlines trips over the closures of float32 pow's overload
# inlined here twice (``value`` into ``column_partials``): "variable ... is not in scope", with
# the right results. Silenced for that overload only.
warnings.filterwarnings(
    "ignore", r".*variable '_overload_for_floats.*' is not in scope", NumbaIRAssumptionWarning
)
_DEPENDENCIES = hashlib.sha256(
    b"".join((_HERE / f"{name}.py").read_bytes() for name in ("fusion_reduce", "reduction"))
).hexdigest()[:16]


@inlined
def _element(value, load, transform, j, args):
    return transform(load(value(j, args)))


@inlined
def column_partials(value, view, load, transform, combine, partial, args, start, n, post, width):
    """partial[q] = combine over j of the elements start + j * post + q (q < ``width``), as
    ``ops_cpu.reduction._reduce_columns`` combines them: the first row, then a row of each
    quarter of the rows a step (four long streams), then the rows left."""
    first = view(args, start, width)
    for q in range(width):
        partial[q] = _element(value, load, transform, q, first)
    band = (n - 1) // 4  # rows a quarter of the rows after the first
    span = band * post
    for j in range(1, band + 1):
        row = start + j * post
        r0, r1 = view(args, row, width), view(args, row + span, width)
        r2, r3 = view(args, row + 2 * span, width), view(args, row + 3 * span, width)
        for q in range(width):
            pair0 = combine(
                _element(value, load, transform, q, r0), _element(value, load, transform, q, r1)
            )
            pair1 = combine(
                _element(value, load, transform, q, r2), _element(value, load, transform, q, r3)
            )
            partial[q] = combine(partial[q], combine(pair0, pair1))
    for k in range(1 + 4 * band, n):
        values = view(args, start + k * post, width)
        for q in range(width):
            partial[q] = combine(partial[q], _element(value, load, transform, q, values))


@inlined
def reduce_columns(partials, value, load, combine, out, pre, n, post, args):
    """out[p, q] = combine(out[p, q], combine over j of the elements (p, j, q)), as
    ``ops_cpu.reduction._reduce_columns``: blocks of up to ``COLUMNS`` columns, in its order
    (``partials``: the module's ``column_partials``)."""
    partial = np.full(min(post, COLUMNS), load(value(0, args)))
    for p in range(pre):
        for first in range(0, post, COLUMNS):
            width = min(COLUMNS, post - first)
            partials(partial, args, p * n * post + first, n, post, width)
            for q in range(width):
                _combine_into(combine, out, p * post + first + q, partial[q])


@inlined
def reduce_rows(partials, value, load, combine, out, pre, n, args):
    """out[p] = combine(out[p], combine over j of the elements (p, j)): each row read as
    ``LANES`` columns whose partials combine in turn (a loop that vectorises without the
    unfused kernels' ``reassoc`` flag), then its last elements as one column. (One call of
    ``partials`` serves both: LLVM would inline and optimise it again at each call.)"""
    lanes = np.full(LANES, load(value(0, args)))
    for p in range(pre):
        blocks = n // LANES
        for part in range(2):
            rows, width = (blocks, LANES) if part == 0 else (n - blocks * LANES, 1)
            if rows:
                previous = lanes[0]
                partials(lanes, args, p * n + part * blocks * LANES, rows, width, width)
                for k in range(1, width):
                    lanes[0] = combine(lanes[0], lanes[k])
                if part and blocks:
                    lanes[0] = combine(previous, lanes[0])
        _combine_into(combine, out, p, lanes[0])


def source(expression: tuple, whole: tuple[bool, ...], scalars: int, op: str) -> str:
    """The source of ``value(j, args)`` (element ``j`` of ``expression``; ``args`` = in0, ...,
    c0, ...: input ``i`` a whole tile where ``whole[i]``, else one element), ``view(args,
    start, width)`` (``args`` with the whole inputs cut to ``width`` elements from ``start``)
    and the reductions ``rows(out, pre, n, args)`` and ``columns(out, pre, n, post, args)`` of
    op ``op`` (a name of ``ops_cpu.reduction``'s table) over it."""
    imports = {
        "numtile.ops_cpu.helpers": {"inlined"},
        "numtile.ops_cpu.fusion_reduce": {"column_partials", "reduce_columns", "reduce_rows"},
        "numtile.ops_cpu.reduction": {"part"},
    }
    step_imports(expression, imports)
    inputs = [f"in{i}" for i in range(len(whole))]
    names = ", ".join([*inputs, *(f"c{i}" for i in range(scalars))])
    cut = [f"{name}[start : start + width]" if w else name for name, w in zip(inputs, whole)]
    lines = header("A fused reduction kernel generated by numtile.ops_cpu.fusion_reduce.", imports)
    lines += ["", f"# inlined code: {_DEPENDENCIES}", "", ""]
    lines += ["@inlined", "def value(j, args):", f"    {names}, = args"]
    for k, step in enumerate(expression):
        if step[0] == "input":  # a signed index from a range: LLVM vectorises the loads
            index = "j" if whole[step[2]] else "0"
            lines += [f"    t{k} = in{step[2]}[{index}]"]
        else:
            lines += ["    " + line for line in step_code(step, k, True, flat=True)]
    lines += [f"    return t{len(expression) - 1}", "", ""]
    lines += ["@inlined", "def view(args, start, width):", f"    {names}, = args"]
    lines += [f"    return {', '.join([*cut, *names.split(', ')[len(whole) :]])},"]
    load, transform, combine = (f'part("{name}")' for name in _REDUCTIONS[op])
    signature = "partial, args, start, n, post, width"
    lines += ["", "", f"@numba.njit({_FLAGS})", f"def partials({signature}):"]
    lines += [f"    column_partials(value, view, {load}, {transform}, {combine}, {signature})"]
    for loop, sizes in (("rows", "out, pre, n"), ("columns", "out, pre, n, post")):
        lines += ["", "", f"@numba.njit({_FLAGS})", f"def {loop}({sizes}, args):"]
        lines += [f"    reduce_{loop}(partials, value, {load}, {combine}, {sizes}, args)"]
    return "\n".join(lines) + "\n"


def fused_reduce(expression: tuple, op: str, out, pre, n, post, inputs, scalars) -> None:
    """out[p, q] = op(out[p, q], op over j of ``expression``'s element (p, j, q)) of flat
    tiles ``inputs`` (whole tiles of (pre, n, post) elements, or one element) and scalars."""
    whole = tuple(x.size == pre * n * post for x in inputs)  # (else one element)
    key = ("reduce", op, expression, whole, len(scalars))
    module = generated(key, lambda: source(expression, whole, len(scalars), op))
    args = (*inputs, *scalars)
    if post == 1:
        module.rows(out, pre, n, args)
    else:
        module.columns(out, pre, n, post, args)
