"""Tracing an element-wise function for ``nt.fuse``: symbolic stand-ins record the ops.

``trace(function, signature)`` calls ``function`` once on ``Traced`` values, one per
argument: a tensor stands in with its dtype and ndim, a Python scalar with its kind (weak in
promotion, as the unfused ops take it). The operators and the element-wise functions of the
namespace (``nt.exp``, ``nt.where``, ``nt.clip``, ``nt.astype``...) record steps of an
expression (the format of ``ops_cpu.fusion``); every dtype is decided by the rules the unfused
ops apply (``elementwise_core``), casts included, so the fused kernel computes exactly what
they compute. While a trace runs, the dispatch table answers a call with a traced argument
by its recorder, or by a ``TypeError`` naming a function that has no fused form; calls
without one run as usual.

What the fused kernel cannot compute exactly as the unfused ops raises ``Unfusable`` and the
expression runs unfused: complex or bfloat16/float16 values, integer powers (their negative
exponent check reads the data), and operations between two scalars.
"""

from __future__ import annotations

import numbers
import threading
from typing import NamedTuple

import numpy as np

from numtile import opcodes
from numtile.tiletensor import dispatch
from numtile.tiletensor.dtypes import (
    bool_,
    check_dtype,
    is_floating,
    is_narrow_floating,
    result_type,
)
from numtile.tiletensor.elementwise_core import NUMERIC_UNARY, _operation_dtype, refuse_bool
from numtile.tiletensor.elementwise_math import _bound
from numtile.tiletensor.tensor import TileTensor


class Unfusable(Exception):  # noqa: N818  (a signal, caught by fuse: never reaches users)
    """The expression has a value or op the fused kernel does not compute: run it unfused."""


class Traced:
    """A symbolic element of a traced expression: a tensor's, or a scalar's (``weak``: the
    Python value standing in for it in promotion; None for a tensor)."""

    __array_ufunc__ = None  # np.exp(traced) raises TypeError instead of making an object array

    def __init__(self, trace: Trace, step: int | None, dtype, weak=None):
        self.trace, self.step, self.dtype, self.weak = trace, step, dtype, weak
        self.argument = self.constant = None  # a scalar's: its argument index, or its value

    @property
    def ndim(self) -> int:
        return 0 if self.is_scalar else self.trace.ndims[self.step]

    @property
    def is_scalar(self) -> bool:
        return self.step is None

    def promotion_operand(self):
        """What ``result_type`` sees: the dtype of a tensor, the stand-in value of a scalar."""
        return self.weak if self.is_scalar else self.dtype

    def __bool__(self):
        raise TypeError("nt.fuse: a traced value has no truth value (use nt.where)")

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        raise TypeError(
            f"nt.fuse: a traced value has no .{name} (only element-wise operators and "
            f"functions fuse; the shape is not known while tracing)"
        )

    def astype(self, dtype, /, *, copy=True, device=None):
        return _astype(self, dtype)

    def __repr__(self) -> str:
        return f"Traced(step={self.step}, dtype={self.dtype})"


def _binary_method(name: str, family: str, reflected: bool = False):
    if reflected:
        return lambda self, other: _binary(other, self, name, family)
    return lambda self, other: _binary(self, other, name, family)


for _name, _family, _dunder in (
    ("add", "binary", "add"),
    ("subtract", "binary", "sub"),
    ("multiply", "binary", "mul"),
    ("divide", "binary", "truediv"),
    ("floor_divide", "binary", "floordiv"),
    ("remainder", "binary", "mod"),
    ("power", "binary", "pow"),
    ("bitwise_and", "bitwise", "and"),
    ("bitwise_or", "bitwise", "or"),
    ("bitwise_xor", "bitwise", "xor"),
    ("bitwise_left_shift", "bitwise", "lshift"),
    ("bitwise_right_shift", "bitwise", "rshift"),
):
    setattr(Traced, f"__{_dunder}__", _binary_method(_name, _family))
    setattr(Traced, f"__r{_dunder}__", _binary_method(_name, _family, reflected=True))
for _name, _dunder in (
    ("equal", "eq"),
    ("not_equal", "ne"),
    ("less", "lt"),
    ("less_equal", "le"),
    ("greater", "gt"),
    ("greater_equal", "ge"),
):
    setattr(Traced, f"__{_dunder}__", _binary_method(_name, "compare"))
Traced.__hash__ = object.__hash__
Traced.__neg__ = lambda self: _unary(self, "negative", float_only=False)
Traced.__abs__ = lambda self: _unary(self, "abs", float_only=False)
dispatch.TENSOR_TYPES += (Traced,)  # public ops take traced values while nt.fuse records
Traced.__pos__ = lambda self: self
Traced.__invert__ = lambda self: _bitwise_invert(self)


class Trace:
    """The steps recorded so far, the scalar arguments they read, and the inputs used."""

    def __init__(self) -> None:
        self.steps: list[tuple] = []
        self.ndims: list[int] = []  # of each step's value: its operands broadcast together
        self.memo: dict[tuple, int] = {}
        # scalar argument k of the kernel: (argument index or None, constant value, dtype)
        self.scalars: list[tuple] = []

    def add(self, step: tuple, ndim: int = 0) -> int:
        """The index of ``step`` (recorded once; ``ndim``: an input's)."""
        found = self.memo.get(step)
        if found is None:
            found = self.memo[step] = len(self.steps)
            self.steps.append(step)
            self.ndims.append(max([ndim, *(self.ndims[a] for a in operands(step))]))
        return found

    def node(self, step: tuple, dtype) -> Traced:
        return Traced(self, self.add(step), np.dtype(dtype))

    def scalar_step(self, value: Traced, dtype) -> int:
        """The step reading scalar ``value`` as ``dtype`` (a kernel argument)."""
        constant = value.constant if value.argument is None else None
        entry = (value.argument, constant, np.dtype(dtype).name)
        if entry not in self.scalars:
            self.scalars.append(entry)
        return self.add(("scalar", np.dtype(dtype).name, self.scalars.index(entry)))


def operands(step: tuple) -> tuple[int, ...]:
    """The steps that step ``step`` reads (the ``ops_cpu.fusion`` format)."""
    kind = step[0]
    if kind in ("input", "scalar"):
        return ()
    return step[2:] if kind in ("cast", "where") else step[3:]


def _check_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.kind == "c" or is_narrow_floating(dtype):
        raise Unfusable(f"{dtype.name} values")
    return dtype


def _scalar(trace: Trace, value, argument: int | None) -> Traced:
    """A scalar operand: argument ``argument`` of the call, or the constant ``value``."""
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        raise Unfusable("complex scalars")
    if isinstance(value, (bool, int, float)):
        weak = value if argument is None else type(value)(0)
    else:  # a NumPy scalar other than float64: strong, of its dtype
        weak = value.dtype.type(0)
        _check_dtype(value.dtype)
    traced = Traced(trace, None, None, weak=weak)
    traced.argument, traced.constant = argument, value
    return traced


def _operand(trace: Trace, value) -> Traced:
    if isinstance(value, Traced):
        return value
    if isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, np.ndarray):
        return _scalar(trace, value, None)
    if isinstance(value, TileTensor):
        raise TypeError(
            "nt.fuse: the function reads a TileTensor that is not one of its arguments; "
            "pass it as an argument"
        )
    raise TypeError(f"nt.fuse: unsupported operand type {type(value).__name__}")


def _read(value: Traced, dtype) -> int:
    """The step of ``value`` converted to ``dtype`` (a scalar read as ``dtype``)."""
    trace = value.trace
    if value.is_scalar:
        return trace.scalar_step(value, dtype)
    if value.dtype == dtype:
        return value.step
    return trace.add(("cast", np.dtype(dtype).name, value.step))


def _binary(x, y, name: str, family: str) -> Traced:
    trace = (x if isinstance(x, Traced) else y).trace
    x, y = _operand(trace, x), _operand(trace, y)
    if x.is_scalar and y.is_scalar:
        raise Unfusable("an operation between two scalars")
    x_weak, y_weak = x.promotion_operand(), y.promotion_operand()
    dtype = _check_dtype(_operation_dtype(x_weak, y_weak, name, family, y.is_scalar))
    if name == "power" and dtype.kind in "iu":
        raise Unfusable("integer powers")
    out_dtype = bool_ if family == "compare" else dtype
    step = (family, out_dtype.name, name, _read(x, dtype), _read(y, dtype))
    return trace.node(step, out_dtype)


def _tensor(x, name: str) -> Traced:
    if not isinstance(x, Traced) or x.is_scalar:
        raise Unfusable(f"{name} of a scalar")
    _check_dtype(x.dtype)
    return x


def _unary(x, name: str, float_only: bool = True) -> Traced:
    """As ``elementwise_core.unary_op``: booleans, and integers where the op is a float
    function, are converted first (to float64, or int64)."""
    x = _tensor(x, name)
    if name in NUMERIC_UNARY:
        refuse_bool(x, name)
    dtype = x.dtype
    if dtype == bool_ or (float_only and not is_floating(dtype)):
        dtype = np.dtype(np.float64 if float_only else np.int64)
    return x.trace.node(("unary", dtype.name, name, _read(x, dtype)), dtype)


def _positive(x) -> Traced:
    x = _tensor(x, "positive")
    refuse_bool(x, "positive")
    return x


def _rounding(x, name: str) -> Traced:
    x = _tensor(x, name)
    return x if x.dtype.kind in "biu" else _unary(x, name)


def _astype(x, dtype, /, *, copy=True, device=None) -> Traced:
    x = _tensor(x, "astype")
    dtype = _check_dtype(check_dtype(dtype))
    if dtype == x.dtype:
        return x
    return x.trace.node(("cast", dtype.name, x.step), dtype)


def _predicate(x, name: str) -> Traced:
    x = _tensor(x, name)
    if x.dtype.kind in "biu":
        if name == "signbit":
            return _binary(x, 0, "less", "compare")
        # integers are never NaN nor infinite: a constant, as the unfused op fills
        constant = _scalar(x.trace, name == "isfinite", None)
        return Traced(x.trace, x.trace.scalar_step(constant, bool_), bool_)
    return x.trace.node(("predicate", "bool", name, x.step), bool_)


def _bitwise_invert(x) -> Traced:
    x = _tensor(x, "bitwise_invert")
    dtype = x.dtype
    all_ones = True if dtype == bool_ else (-1 if dtype.kind == "i" else np.iinfo(dtype).max)
    return _binary(x, dtype.type(all_ones), "bitwise_xor", "bitwise")


def _logical_not(x) -> Traced:
    x = _tensor(x, "logical_not")
    return _binary(x, 0, "equal", "compare") if x.dtype != bool_ else _bitwise_invert(x)


def _where(condition, x1, x2) -> Traced:
    condition = _tensor(condition, "where")
    trace = condition.trace
    x1, x2 = _operand(trace, x1), _operand(trace, x2)
    if x1.is_scalar and x2.is_scalar:
        raise Unfusable("where of two scalars")
    if condition.dtype != bool_:
        condition = _binary(condition, 0, "not_equal", "compare")
    dtype = _check_dtype(result_type(x1.promotion_operand(), x2.promotion_operand()))
    step = ("where", dtype.name, condition.step, _read(x1, dtype), _read(x2, dtype))
    return trace.node(step, dtype)


def _clip(x, /, min=None, max=None) -> Traced:  # noqa: A002  (the array API's names)
    """As ``elementwise_math.clip``: maximum with ``min``, minimum with ``max``, x's dtype."""
    x = _tensor(x, "clip")
    out = x
    if min is not None:
        out = _binary(out, _bound(min, x.dtype), "maximum", "binary")
    if max is not None:
        out = _binary(out, _bound(max, x.dtype), "minimum", "binary")
    return out if out.dtype == x.dtype else _astype(out, x.dtype)


def _recorders() -> dict:
    """Op name -> the function recording it on traced values."""
    recorders = {"astype": _astype, "where": _where, "clip": _clip}
    recorders |= {"bitwise_invert": _bitwise_invert, "logical_not": _logical_not}
    recorders |= {"positive": _positive}
    # a fused function called inside another one: its steps join the outer trace
    recorders["fused"] = lambda fused, *args: fused.function(*args)
    recorders |= {"conj": lambda x: _tensor(x, "conj"), "real": lambda x: _tensor(x, "real")}
    not_float_only = ("negative", "abs", "sign", "square")
    for name in opcodes.UNARY_OPS:
        if name in ("floor", "ceil", "trunc", "round"):
            recorders[name] = lambda x, name=name: _rounding(x, name)
        else:
            float_only = name not in not_float_only
            recorders[name] = lambda x, name=name, f=float_only: _unary(x, name, f)
    families = (
        (opcodes.BINARY_OPS, "binary"),
        (opcodes.COMPARE_OPS, "compare"),
        (opcodes.BITWISE_OPS, "bitwise"),
    )
    for table, family in families:
        for name in table:
            recorders[name] = lambda x, y, name=name, family=family: _binary(x, y, name, family)
    for name in opcodes.PREDICATE_OPS:
        recorders[name] = lambda x, name=name: _predicate(x, name)
    return recorders


RECORDERS = _recorders()
_tracing = threading.Lock()


def _has_traced(args, kwargs) -> bool:
    values = [*args, *kwargs.values()]
    values += [v for a in args if isinstance(a, (list, tuple)) for v in a]
    return any(isinstance(v, Traced) for v in values)


def _intercepting(name: str, original):
    recorder = RECORDERS.get(name)

    def op(*args, **kwargs):
        if not _has_traced(args, kwargs):
            return original(*args, **kwargs)
        if recorder is None:
            raise TypeError(
                f"nt.fuse: {dispatch.PUBLIC_NAMES[name]} has no fused form (only element-wise "
                f"functions fuse); call it outside the fused function"
            )
        return recorder(*args, **kwargs)

    return op


class Plan(NamedTuple):
    """A traced expression ready to run: the steps (``ops_cpu.fusion``'s format), the
    argument index of each input tile, each scalar argument as ``(argument index or None,
    constant, dtype name)``, and the result's dtype."""

    expression: tuple
    inputs: tuple[int, ...]
    scalars: tuple[tuple, ...]
    dtype: np.dtype


def _finish(recording: Trace, result: Traced) -> Plan:
    """The steps ``result`` needs, renumbered; inputs and scalars in the order first read."""
    needed = {result.step}
    for index in range(result.step, -1, -1):
        if index in needed:
            needed.update(operands(recording.steps[index]))
    renumber, steps, inputs, scalars = {}, [], [], []
    for index in sorted(needed):
        step = recording.steps[index]
        kind = step[0]
        if kind == "input":
            step = (kind, step[1], len(inputs))
            inputs.append(recording.steps[index][2])
        elif kind == "scalar":
            step = (kind, step[1], len(scalars))
            scalars.append(recording.scalars[recording.steps[index][2]])
        else:
            first = len(step) - len(operands(step))
            step = step[:first] + tuple(renumber[a] for a in step[first:])
        renumber[index] = len(steps)
        steps.append(step)
    if not inputs:
        raise Unfusable("a result that reads no tensor")
    return Plan(tuple(steps), tuple(inputs), tuple(scalars), result.dtype)


def trace(function, signature: tuple) -> Plan:
    """Record ``function`` called on stand-ins of ``signature``: per argument, ``("tensor",
    dtype, ndim)`` or ``("scalar", value)`` (its type matters, not its value); raise
    ``Unfusable`` where the fused kernel would not compute what the unfused ops compute."""
    recording = Trace()
    arguments = []
    for index, entry in enumerate(signature):
        if entry[0] == "tensor":
            dtype = _check_dtype(entry[1])
            step = recording.add(("input", dtype.name, index), ndim=entry[2])
            arguments.append(Traced(recording, step, dtype))
        else:
            arguments.append(_scalar(recording, entry[1], index))
    with _tracing:
        saved = dict(dispatch.TABLE)
        try:
            for name, implementation in saved.items():
                dispatch.TABLE[name] = _intercepting(name, implementation)
            result = function(*arguments)
        finally:
            dispatch.TABLE.update(saved)
    if not isinstance(result, Traced) or result.is_scalar:
        raise TypeError(
            "nt.fuse: the function must return one tensor computed from its tensor "
            f"arguments, got {type(result).__name__}"
        )
    return _finish(recording, result)
