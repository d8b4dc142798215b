"""``nt.fuse``: an element-wise expression run as one kernel, one task per output tile.

``x * y + z`` as three ops writes ``x * y`` to memory and reads it back; fused, every output
tile is one task that reads its input tiles once and writes the result once (as dask fuses
blockwise ops, CuPy's ``fuse`` or ``jax.jit`` element-wise code). The function is traced
once per signature (``fusion_trace``), each backend generates and compiles one kernel per
expression (``ops_cpu.fusion``, ``ops_cuda.fusion``), and the results equal the unfused ops'
bit for bit.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np

from numtile.runtime import Access, Codelet, get_runtime
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import is_narrow_floating
from numtile.tiletensor.elementwise_core import element_strides, shape_array, source_tile
from numtile.tiletensor.fusion_trace import Plan, Unfusable, trace
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.logic import _align_all
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W


def _weak_stand_in(value):
    """The value a scalar argument traces as: its type matters (weak Python numbers, strong
    NumPy scalars), never its value."""
    if isinstance(value, (bool, np.bool_)):
        return type(value)(False)
    return type(value)(0)


def _signature(args) -> tuple:
    entries = []
    for value in args:
        if isinstance(value, TileTensor):
            entries.append(("tensor", value.dtype, value.ndim))
        elif isinstance(value, (numbers.Number, np.generic)):
            # the type too: 0, 0.0 and False (and NumPy zeros) are equal keys
            entries.append(("scalar", _weak_stand_in(value), type(value)))
        else:
            raise TypeError(
                f"nt.fuse: arguments are TileTensors and scalars, got {type(value).__name__}"
            )
    return tuple(entries)


def _describe(expression: tuple) -> str:
    """A short name of the expression for traces: its ops in order (``multiply+add``)."""
    names = [step[2] if step[0] not in ("cast", "where") else step[0] for step in expression]
    ops = [n for n, step in zip(names, expression) if step[0] not in ("input", "scalar")]
    return "+".join(ops) or "copy"


def _kernel(expression: tuple, inputs: int):
    def kernel(ops, *buffers_and_args):
        tiles, out = buffers_and_args[:inputs], buffers_and_args[inputs]
        strides = buffers_and_args[inputs + 1 : 2 * inputs + 1]
        shape, scalars = buffers_and_args[2 * inputs + 1], buffers_and_args[2 * inputs + 2 :]
        flat = tuple(t.reshape(-1) for t in tiles)
        ops.fused(expression, out.reshape(-1), shape, flat, strides, scalars)

    return kernel


@functools.lru_cache(maxsize=1024)
def _codelet(expression: tuple, inputs: int) -> Codelet:
    """The codelet of one expression (``fused:multiply+add`` in traces and perf models)."""
    count = sum(step[0] not in ("input", "scalar", "cast") for step in expression)
    return Codelet(
        f"fused:{_describe(expression)}",
        kernel=_kernel(expression, inputs),
        flops=lambda *shapes_and_args: count * float(np.prod(shapes_and_args[inputs])),
    )


def _scalar_values(plan: Plan, args) -> tuple:
    """The kernel's scalar arguments: each scalar of the call or constant, in its dtype
    (``np.full(1, value, dtype)`` as the unfused ops pass it)."""
    values = []
    for argument, constant, dtype in plan.scalars:
        value = constant if argument is None else args[argument]
        values.append(np.full(1, value, np.dtype(dtype))[0])
    return tuple(values)


def _aligned(tensor: TileTensor, layout: Layout) -> TileTensor:
    """``tensor`` (of ``layout``'s ndim) tiled as ``layout`` along every axis it spans."""
    wanted = tuple(
        tile if extent == size != 1 else own
        for own, tile, extent, size in zip(
            tensor.tile_shape, layout.tile_shape, tensor.shape, layout.shape
        )
    )
    return tensor if wanted == tensor.tile_shape else retile(tensor, wanted)


def run(plan: Plan, args, layout: Layout | None = None) -> TileTensor:
    """Submit one task per output tile of ``plan`` on the tensors and scalars ``args``; the
    result takes ``layout`` (of the inputs' broadcast shape and ndim) or ``_align_all``'s."""
    tensors = [args[index] for index in plan.inputs]
    if layout is None:
        tensors, layout = _align_all(*tensors)
    else:
        tensors = [_aligned(t, layout) for t in tensors]
    out = TileTensor(layout, plan.dtype)
    codelet = _codelet(plan.expression, len(tensors))
    scalars = _scalar_values(plan, args)
    runtime = get_runtime()
    for index, dst in zip(layout.indices(), out.handles):
        tiles = [source_tile(t, index) for t in tensors]
        shape = dst.shape
        strides = tuple(element_strides(t.shape, shape) for t in tiles)
        handles = [(t, R) for t in tiles] + [(dst, W)]
        runtime.submit(codelet, handles, (*strides, shape_array(shape), *scalars))
    return out


@dispatched(name="fused", public="numtile.fuse")
def fused_call(fused: Fused, /, *args) -> TileTensor:
    """``fused.function(*args)`` as one kernel (the op ``nt.fuse``'s functions call; autograd
    runs the function unfused when an input requires grad)."""
    return fused.run(*args)


class Fused:
    """An element-wise function that runs fused (what ``nt.fuse`` returns)."""

    def __init__(self, function) -> None:
        self.function = function
        self.plans: dict[tuple, Plan | None] = {}  # signature -> plan (None: run unfused)
        functools.update_wrapper(self, function)

    def __call__(self, *args) -> TileTensor:
        return fused_call(self, *args)

    def plan(self, args) -> Plan | None:
        """The traced plan of ``args``' signature (traced on first use), or None when the
        expression runs unfused."""
        signature = _signature(args)
        if signature not in self.plans:
            if any(e[0] == "tensor" and is_narrow_floating(e[1]) for e in signature):
                self.plans[signature] = None
            else:
                try:
                    self.plans[signature] = trace(self.function, signature)
                except Unfusable:
                    self.plans[signature] = None
        return self.plans[signature]

    def run(self, *args) -> TileTensor:
        if not any(isinstance(a, TileTensor) for a in args):
            raise TypeError("nt.fuse: a fused function needs at least one TileTensor argument")
        plan = self.plan(args)
        if plan is None:
            return self.function(*args)
        return run(plan, args)


def fuse(function) -> Fused:
    """``function`` of TileTensors and scalars, made of element-wise ops, run as ONE kernel:
    one task per output tile reads the input tiles once and writes the result once.

    The inputs broadcast together. ``function`` is traced once per signature (dtypes, ndims,
    which arguments are scalars) on stand-ins that take the operators and the element-wise
    functions (``nt.exp``, ``nt.sin``, ``nt.where``, ``nt.maximum``, ``nt.clip``,
    ``nt.astype``...), so Python values it captures are read once, as ``jax.jit`` reads them;
    a non-element-wise function inside it raises ``TypeError`` naming it. Dtypes promote as
    the unfused ops promote them, and the result equals theirs bit for bit. With an input
    that requires grad, or complex, bfloat16 or float16 values, integer powers or an
    operation between two scalars, ``function`` runs unfused (so gradients flow).
    Kernels are compiled once per expression and kept in Numba's disk cache.

    >>> import numtile as nt
    >>> axpy = nt.fuse(lambda x, y, a: a * x + y)
    >>> axpy(nt.ones((2, 3)), nt.ones((3,)), 2.0).to_numpy().tolist()
    [[3.0, 3.0, 3.0], [3.0, 3.0, 3.0]]
    """
    if not callable(function):
        raise TypeError(f"nt.fuse expects a function, got {type(function).__name__}")
    return Fused(function)


fuse.dispatch_name = "fused"  # what a fused function's calls dispatch on (autograd's rule)
