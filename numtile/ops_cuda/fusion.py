"""CUDA twin of ``ops_cpu.fusion``: one ``@cuda.jit`` kernel generated per fused expression.

The expression format is ``ops_cpu.fusion``'s. Each step calls the device function the
unfused CUDA kernel of its op calls (``unary_function(dtype)``, ``binary_function(dtype)``,
``compare_function``...), writing into a one-element local array of the step's dtype, as
``bf16_kernels`` does, or, for + - * / and comparisons, the operator those functions apply;
a cast is a store into such an array, as the ``cast`` kernel's store.
So the fused kernel computes what the unfused CUDA ops compute, one grid-stride pass.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numba import cuda

from numtile import opcodes
from numtile.ops_cuda.elementwise import (
    binary_function,
    binary_math_function,
    compare_function,
    unary_function,
)
from numtile.ops_cuda.launch import coalesce, host_ints, launch
from numtile.ops_cuda.logic import _is_inf, _is_nan, _offset

_BITWISE = {
    "bitwise_and": "&",
    "bitwise_or": "|",
    "bitwise_xor": "^",
    "bitwise_left_shift": "<<",
    "bitwise_right_shift": ">>",
}
# ops whose unfused device function is this operator on real numbers: written inline (the
# same arithmetic, without compiling the op table's other branches)
_OPERATORS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/"}
_OPERATORS |= {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<="}
_OPERATORS |= {"greater": ">", "greater_equal": ">="}
_PREDICATES = {
    "isnan": "is_nan({0})",
    "isinf": "is_inf({0})",
    "isfinite": "not is_nan({0} - {0})",
    "signbit": "math.copysign(1.0, {0}) < 0",
}


def _apply(step, operand_dtype: np.dtype):
    """(device function, op code) of a unary, binary or compare step on ``operand_dtype``."""
    kind, name = step[0], step[2]
    if kind == "unary":
        return unary_function(operand_dtype), opcodes.UNARY_OPS[name]
    if kind == "compare":
        return compare_function, opcodes.COMPARE_OPS[name]
    code = opcodes.BINARY_OPS[name]
    if code in opcodes.BINARY_MATH:
        return binary_math_function(operand_dtype), code
    return binary_function(operand_dtype), code


@functools.lru_cache(maxsize=256)
def kernel(expression: tuple, inputs: int, scalars: int):
    """The ``@cuda.jit`` kernel ``fused(out, shape, in0, st0, ..., c0, ...)`` of
    ``expression`` (generated once per process)."""
    namespace = {"cuda": cuda, "math": math, "offset": _offset, "is_nan": _is_nan}
    namespace["is_inf"] = _is_inf
    cells, body = [], []
    for k, step in enumerate(expression):
        kind = step[0]
        if kind == "input":
            body.append(f"t{k} = in{step[2]}[offset(i, shape, st{step[2]})]")
        elif kind == "scalar":
            body.append(f"t{k} = c{step[2]}")
        elif kind == "cast":
            cells.append(k)
            body += [f"cell{k}[0] = t{step[2]}", f"t{k} = cell{k}[0]"]
        elif kind == "where":
            body.append(f"t{k} = t{step[3]} if t{step[2]} else t{step[4]}")
        elif kind == "bitwise":
            body.append(f"t{k} = t{step[3]} {_BITWISE[step[2]]} t{step[4]}")
        elif kind in ("binary", "compare") and step[2] in _OPERATORS:
            body.append(f"t{k} = t{step[3]} {_OPERATORS[step[2]]} t{step[4]}")
        elif kind == "predicate":
            body.append(f"t{k} = " + _PREDICATES[step[2]].format(f"t{step[3]}"))
        else:
            operand_dtype = np.dtype(expression[step[3]][1])
            namespace[f"apply{k}"], code = _apply(step, operand_dtype)
            cells.append(k)
            args = ", ".join(f"t{a}" for a in step[3:])
            body += [f"apply{k}({args}, {code}, cell{k}, 0)", f"t{k} = cell{k}[0]"]
    for k in cells:
        namespace[f"type{k}"] = numba.from_dtype(np.dtype(expression[k][1]))
    arguments = ["out", "shape", *(f"in{i}, st{i}" for i in range(inputs))]
    arguments += [f"c{i}" for i in range(scalars)]
    lines = [f"def fused({', '.join(arguments)}):"]
    lines += [f"    cell{k} = cuda.local.array(1, type{k})" for k in cells]
    lines += ["    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):"]
    lines += [f"        {line}" for line in body]
    lines.append(f"        out[i] = t{len(expression) - 1}")
    exec("\n".join(lines), namespace)  # noqa: S102  (source generated from the step table)
    return cuda.jit(namespace["fused"])


def fused(
    expression: tuple, out, shape, inputs: tuple, strides: tuple, scalars: tuple, *, stream=0
) -> None:
    """out = ``expression`` over flat input tiles read through element ``strides`` (0 on
    broadcast axes) over C-ordered ``shape``, with host ``scalars`` (``ops_cpu.fusion.fused``)."""
    if out.size == 0:
        return
    shape = host_ints(shape, "shape")
    shape, strides = coalesce(shape, *(host_ints(s, "strides") for s in strides))
    flat = [x if x.ndim == 1 else x.reshape(-1) for x in inputs]
    arguments = [value for pair in zip(flat, strides) for value in pair]
    compiled = kernel(expression, len(inputs), len(scalars))
    launch(compiled, out.size, stream, out, shape, *arguments, *scalars)


def fused_exact(name: str, dtype) -> bool:
    """``ops_cpu.fusion.fused_exact``'s twin: False, automatic fusion (``tiletensor.
    auto_fusion``) never defers ops on a runtime with GPU workers, whose unfused kernels it
    has not been checked against bit for bit."""
    return False
