"""Automatic fusion: element-wise ops wait, then run as one ``nt.fuse`` kernel.

An element-wise op (an operator, or a function that ``nt.fuse`` traces) on tensors that
require no gradient returns at once a *deferred* tensor: its layout and dtype are known
(checked now, so a bad shape or dtype raises at the call), its tasks are not submitted. An
element-wise op on a deferred tensor composes its expression instead of computing it. The
first time anything reads a deferred tensor's tiles (``TileTensor.handles``: ``to_numpy``,
``wait``, any other op, autograd, an in-place write) the expression runs as one generated
kernel, one task per output tile (``fusion.run``); an expression of one op runs that op's
own tasks (nothing new to compile). So ``x * y + z`` reads x, y and z once and writes once,
as dask and JAX fuse lazily, while numtile stays eager to its users.

Hazards, and how they are met:

- an input overwritten before the deferred tensor runs (``x += 1``, ``x[...] = v``, an
  optimizer step, ``copy_into``...): a deferred tensor is a weak *deferred reader* of its
  inputs' tiles (``runtime.handle.defer_read``); ``Runtime.submit`` materialises the readers
  of every tile a task writes before it submits the task, so they read the old values;
- an intermediate used twice: a deferred operand is inlined only while its consumer is all
  that holds it (a temporary: NumPy's temporary elision tells them apart by the reference
  count too); one with a name or a second consumer runs on its own, once, and its consumers
  read its tiles;
- what fused kernels do not compute as the unfused ops do, bit for bit (complex, bfloat16 and
  float16 values, integer powers, ops that VML or the AVX-512 power compute: ``fused_exact``),
  tensors under MPI, runtimes with GPU workers, and tensors that require grad or belong to an
  autograd graph: the op runs at once, unfused;
- an expression stops growing at ``MAX_OPS`` ops or ``MAX_INPUTS`` inputs: its operands run
  first (a loop ``x = x * 0.5 + 1`` submits every few iterations);
- a deferred tensor dropped unused costs nothing: no task was submitted.

``NUMTILE_AUTO_FUSE=0``, or ``set_enabled(False)``, runs every op at once.

>>> import numtile as nt
>>> x = nt.ones((4,), tile_shape=(2,))
>>> y = x * 2 + 1  # deferred: nothing submitted yet
>>> y.to_numpy().tolist()  # one fused:multiply+add task per tile
[3.0, 3.0, 3.0, 3.0]
"""

from __future__ import annotations

import functools
import sys
import threading

import numpy as np

from numtile import opcodes
from numtile.config import Config
from numtile.runtime import get_runtime
from numtile.runtime.handle import defer_read, forget_reader
from numtile.tiletensor import dispatch, fused_reduction
from numtile.tiletensor.dtypes import is_narrow_floating
from numtile.tiletensor.elementwise_core import result_tile_shape
from numtile.tiletensor.fusion import _scalar_values, run
from numtile.tiletensor.fusion_trace import RECORDERS, Trace, Traced, Unfusable, _finish, _scalar
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

MAX_OPS = 16  # ops in one expression (a kernel compiles once per expression)
MAX_INPUTS = 8  # tensors it reads
# a reduction fuses with its deferred operand from this many elements of it: below, writing and
# reading the intermediate costs under a millisecond (8 MiB of float64 at most), while the
# fused kernel (one per expression and reduction) takes 2-6 s of CPU to compile on first use
# (the typical start-up script: 21.6 s cold with every small reduction fused, 20 s the target)
FUSED_REDUCTION_MIN = 1 << 20
# the ops that defer: element-wise, one or two operands, a fused form (fusion_trace)
DEFERRABLE = tuple(
    name
    for table in (
        opcodes.UNARY_OPS,
        opcodes.BINARY_OPS,
        opcodes.COMPARE_OPS,
        opcodes.BITWISE_OPS,
        opcodes.PREDICATE_OPS,
    )
    for name in table
    if name in RECORDERS
)
_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)
_lock = threading.RLock()  # one thread at a time composes or materialises


class Expression:
    """What a deferred tensor computes: op ``name`` of ``operands`` (tensors, deferred or
    not, and scalars); ``ops`` and ``inputs`` bound the size it would have inlined."""

    __slots__ = ("name", "operands", "ops", "inputs", "runtime")

    def __init__(self, name: str, operands: tuple, ops: int, inputs: int, runtime) -> None:
        self.name, self.operands, self.ops, self.inputs = name, operands, ops, inputs
        self.runtime = runtime  # the runtime it was deferred under

    def materialise(self, tensor: TileTensor) -> None:
        _materialise(tensor)

    def reduced(self, tensor: TileTensor, op: str, axes: tuple, dtype) -> TileTensor | None:
        """The reduction ``op`` (of ``reduction._reduce``) of ``tensor`` over ``axes`` in
        ``dtype``, fused with this expression (``fused_reduction``), or None where it is not:
        the reduction then materialises ``tensor`` and reduces its tiles."""
        return _reduced(tensor, op, axes, dtype)


def _entry(value):
    """``value``'s part of a signature, or None where it cannot defer."""
    if isinstance(value, TileTensor):
        dtype = value.dtype
        fusable = value.requires_grad is False and value._node is None
        if fusable and value.distribution is None and dtype.kind in "biuf":
            return None if is_narrow_floating(dtype) else ("tensor", dtype)
        return None
    if isinstance(value, _SCALARS):
        return ("scalar", type(value))
    return None


def _stand_in(recording: Trace, entry: tuple, index: int) -> Traced:
    """The traced value of argument ``index`` (a tensor, or a scalar of its type)."""
    if entry[0] == "tensor":
        dtype = np.dtype(entry[1])
        return Traced(recording, recording.add(("input", dtype.name, index), ndim=entry[2]), dtype)
    return _scalar(recording, entry[1](0), index)


@functools.lru_cache(maxsize=4096)
def _plan(key, signature: tuple, dtype=None):
    """The fused plan of expression ``key`` (an argument index, or ``(op name, *operand
    keys)``) over arguments of ``signature``, converted to ``dtype`` if given; None where it
    does not fuse."""
    recording = Trace()
    values = [_stand_in(recording, entry, index) for index, entry in enumerate(signature)]

    def evaluate(node):
        if isinstance(node, int):
            return values[node]
        return RECORDERS[node[0]](*(evaluate(child) for child in node[1:]))

    try:
        result = evaluate(key)
        return _finish(recording, result if dtype is None else RECORDERS["astype"](result, dtype))
    except (Unfusable, TypeError, ValueError, OverflowError):
        return None


def _exact(runtime, plan, name: str) -> bool:
    """True where ``runtime``'s workers are all CPU workers whose fused kernels compute op
    ``name`` as its own kernel does (``ops_cpu.fused_exact``)."""
    exact = getattr(runtime.ops[0], "fused_exact", None) if runtime.ops else None
    if exact is None or len(set(runtime.kinds)) != 1:
        return False
    return exact(name, plan.dtype)


def _layout(tensors: list[TileTensor]) -> Layout | None:
    """The layout the unfused op gives its result (``elementwise_core._align``), or None
    where deferring is not worth it (operands of different ndims) or the shapes do not
    broadcast (the op itself raises)."""
    if len(tensors) == 1:
        return tensors[0].layout
    x, y = tensors
    if x.layout == y.layout:  # the common case: no broadcast, one tiling
        return x.layout
    if x.ndim != y.ndim:
        return None
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return None
    return Layout(shape, result_tile_shape(x, y, shape))


def defer(name: str, args: tuple) -> TileTensor | None:
    """Op ``name`` of ``args`` as a deferred tensor (``dispatch.DEFERRED``'s entries), or None
    where the op must run now."""
    if len(args) > 2:
        return None
    entries = tuple(_entry(a) for a in args)
    tensors = [a for a in args if isinstance(a, TileTensor)]
    if None in entries or not tensors:
        return None
    signature = tuple(e + (1,) if e[0] == "tensor" else e for e in entries)
    plan = _plan((name, *range(len(args))), signature)
    runtime = get_runtime()
    if plan is None or not _exact(runtime, plan, name):
        return None
    layout = _layout(tensors)
    if layout is None:
        return None
    try:
        _scalar_values(plan, args)  # a scalar its dtype cannot hold raises now, unfused
    except (OverflowError, ValueError, TypeError):
        return None
    with _lock:
        pending = {id(t): t._pending for t in tensors if t._pending is not None}
        if any(h.invalidated for t in tensors if t._pending is None for h in t._handles):
            return None  # the op itself raises InvalidatedError now
        ops = 1 + sum(e.ops for e in pending.values())
        inputs = sum(e.inputs for e in pending.values()) + len(tensors) - len(pending)
        if ops > MAX_OPS or inputs > MAX_INPUTS:
            for tensor in tensors:
                tensor.materialise()
            ops, inputs = 1, len(tensors)
        out = TileTensor.deferred(layout, plan.dtype, Expression(name, args, ops, inputs, runtime))
        defer_read([h for t in tensors if t._pending is None for h in t._handles], out)
    return out


class _Cut(Exception):  # noqa: N818  (a signal, caught by _materialise)
    """An input's task was cut by the shutdown of the runtime the tensor was deferred under."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def _temporary(tensor: TileTensor, holders: tuple) -> bool:
    """True when ``holders`` (a consumer's operands) are all that hold ``tensor``."""
    held = sum(holder is tensor for holder in holders)
    # beyond those: the caller's loop variable, this argument and getrefcount's own
    return sys.getrefcount(tensor) - 3 <= held


def _flatten(expression: Expression, leaves: list, seen: dict) -> tuple:
    """The key of ``expression`` with its temporary deferred operands inlined; the tensors
    and scalars it reads are appended to ``leaves`` (a tensor once: ``seen`` maps id ->
    index). Deferred operands held elsewhere are materialised and read as tensors."""
    children = []
    operands = expression.operands
    for operand in operands:
        if isinstance(operand, TileTensor):
            if operand._pending is not None:
                if _temporary(operand, operands):
                    children.append(_flatten(operand._pending, leaves, seen))
                    continue
                operand.materialise()
            index = seen.get(id(operand))
            if index is None:
                if expression.runtime.closed:  # deferred before a shutdown that cut its input
                    for handle in operand._handles:
                        if handle.error is not None:
                            raise _Cut(handle.error)
                index = seen[id(operand)] = len(leaves)
                leaves.append(operand)
        else:
            index = len(leaves)
            leaves.append(operand)
        children.append(index)
    return (expression.name, *children)


def _signature(leaves: list) -> tuple:
    return tuple(
        ("tensor", v.dtype, v.ndim) if isinstance(v, TileTensor) else ("scalar", type(v))
        for v in leaves
    )


def _unfused(key, leaves: list) -> TileTensor:
    """Expression ``key`` op by op (the ops' own tasks)."""
    if isinstance(key, int):
        return leaves[key]
    return dispatch.TABLE[key[0]](*(_unfused(child, leaves) for child in key[1:]))


def _materialise(tensor: TileTensor) -> None:
    """Submit the tasks of deferred ``tensor`` and give it the result's tiles."""
    with _lock:
        expression = tensor._pending
        if expression is None:  # materialised meanwhile (another reader's write)
            return
        leaves: list = []
        try:
            key = _flatten(expression, leaves, {})
        except _Cut as cut:  # the tiles carry the error, as the cut tasks' results would
            result = TileTensor(tensor.layout, tensor.dtype)
            for handle in result.handles:
                handle.error = cut.error
        else:
            fused = any(isinstance(child, tuple) for child in key[1:])
            plan = _plan(key, _signature(leaves)) if fused else None
            if plan is None:
                result = _unfused(key, leaves)
            else:
                result = run(plan, leaves, tensor.layout)
        assert result.layout == tensor.layout and result.dtype == tensor.dtype, (
            f"deferred {expression.name}: {result.layout} {result.dtype} != {tensor.layout} "
            f"{tensor.dtype}"
        )
        tensor._handles, tensor._pending = result.handles, None
        for operand in expression.operands:
            if isinstance(operand, TileTensor) and operand._pending is None:
                forget_reader(operand._handles, tensor)


def _reduced(tensor: TileTensor, op: str, axes: tuple, dtype) -> TileTensor | None:
    """``Expression.reduced``: the fused tasks, submitted now, or None (nothing submitted)."""
    if tensor.size < FUSED_REDUCTION_MIN or not fused_reduction.fusable(get_runtime()):
        return None
    with _lock:
        expression = tensor._pending
        if expression is None:  # materialised meanwhile
            return None
        leaves: list = []
        try:
            key = _flatten(expression, leaves, {})
        except _Cut:  # materialising gives the tiles the error
            return None
        plan = _plan(key, _signature(leaves), np.dtype(dtype))
        if plan is None:
            return None
        return fused_reduction.reduce(plan, leaves, tensor.layout, op, axes, plan.dtype)


def enabled() -> bool:
    """True while element-wise ops defer to run fused (``NUMTILE_AUTO_FUSE``)."""
    return bool(dispatch.DEFERRED)


def set_enabled(on: bool) -> bool:
    """Turn automatic fusion on or off for this process; returns the previous setting.
    Tensors already deferred still run fused when used.

    >>> previous = set_enabled(False); set_enabled(previous)
    False
    """
    previous = enabled()
    dispatch.DEFERRED.clear()
    if on:
        dispatch.DEFERRED.update(dict.fromkeys(DEFERRABLE, defer))
    return previous


set_enabled(Config.defaults().auto_fuse)
