"""The engine of the elementwise ops: casts, the tile tasks of a unary op, and two operands
(tensors or scalars) promoted, broadcast and aligned tile by tile for a binary op.

``elementwise`` and ``elementwise_math`` define the public ops on top of it.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np

from numtile import opcodes
from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import check_device
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import (
    bool_,
    check_dtype,
    float32,
    float64,
    is_floating,
    is_inexact,
    is_narrow_floating,
    result_type,
)
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.manipulation import reshape, retile
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W


@functools.lru_cache(maxsize=4096)
def element_strides(tile_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> np.ndarray:
    """Element strides of a C-ordered tile read as ``out_shape``: 0 on broadcast axes."""
    strides = np.zeros(len(out_shape), np.int64)
    step = 1
    for axis in range(len(tile_shape) - 1, -1, -1):
        if tile_shape[axis] != 1 or out_shape[axis] == 1:
            strides[axis] = step
        step *= tile_shape[axis]
    strides.flags.writeable = False
    return strides


@functools.lru_cache(maxsize=4096)
def shape_array(shape: tuple[int, ...]) -> np.ndarray:
    array = np.array(shape, np.int64)
    array.flags.writeable = False
    return array


def is_scalar(value) -> bool:
    return isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, TileTensor)


@dispatched
def astype(x: TileTensor, dtype, /, *, copy: bool = True, device=None) -> TileTensor:
    """``x`` converted to ``dtype`` (NumPy's ``astype`` rules); with ``copy=False``, ``x``
    itself when it already has ``dtype``. Complex to real raises ``TypeError`` (take
    ``real`` or ``abs`` first), as the array API says.

    >>> import numtile as nt
    >>> nt.arange(3).astype("float32").dtype
    dtype('float32')
    """
    if not isinstance(x, TileTensor):
        raise TypeError(f"astype expects a TileTensor, got {type(x).__name__}")
    dtype = check_dtype(dtype)
    check_device(device)
    if x.dtype.kind == "c" and dtype.kind != "c":
        raise TypeError(
            f"astype from {x.dtype.name} to {dtype.name} would drop the imaginary part; "
            f"use nt.real or nt.abs first"
        )
    if dtype == x.dtype and not copy:
        return x
    out = TileTensor(x.layout, dtype)
    runtime = get_runtime()
    for src, dst in zip(x.handles, out.handles):
        if dtype != x.dtype:
            runtime.submit(codelets.copy.cast, [(src, R), (dst, W)])
        else:
            shape = shape_array(src.shape)
            strides = element_strides(src.shape, src.shape)
            args = (0, strides, 0, strides, shape)
            runtime.submit(codelets.copy.copy_strided, [(src, R), (dst, W)], args)
    return out


def real_dtype(dtype: np.dtype) -> np.dtype:
    """The real dtype of a complex one's components (a real dtype itself otherwise)."""
    return (
        np.dtype(np.float32 if dtype == np.complex64 else np.float64)
        if dtype.kind == "c"
        else dtype
    )


def refuse_complex(x: TileTensor, name: str) -> None:
    """Raise ``TypeError`` naming op ``name`` when ``x`` is complex (op without complex
    kernels yet, or without complex meaning)."""
    if x.dtype.kind == "c":
        raise TypeError(f"{name} does not support complex tensors (got {x.dtype.name})")


# unary arithmetic the standard defines for numeric dtypes only (NumPy refuses negative and
# sign of booleans too; abs of a boolean would otherwise come back as int64)
NUMERIC_UNARY = ("negative", "positive", "abs", "sign")


def refuse_bool(x: TileTensor, name: str) -> None:
    """Raise ``TypeError`` naming op ``name`` when ``x`` is boolean (arithmetic on booleans)."""
    if x.dtype == bool_:
        raise TypeError(
            f"{name} needs a numeric tensor, got bool (use logical_not, or astype first)"
        )


def unary_op(x: TileTensor, name: str, float_only: bool = True) -> TileTensor:
    if not isinstance(x, TileTensor):
        raise TypeError(f"{name} expects a TileTensor, got {type(x).__name__}")
    if name in NUMERIC_UNARY:
        refuse_bool(x, name)
    if x.dtype.kind == "c":
        if name in opcodes.COMPLEX_MATH:
            codelet = codelets.elementwise.complex_math[name]
        elif name in opcodes.COMPLEX_UNARY_OPS:
            codelet = codelets.elementwise.complex_unary[name]
        else:
            refuse_complex(x, name)
        parts = ("abs", "real", "imag")
        out = TileTensor(x.layout, real_dtype(x.dtype) if name in parts else x.dtype)
    else:
        if x.dtype == bool_ or (float_only and not is_floating(x.dtype)):
            x = astype(x, float64 if float_only else np.int64)
        out = TileTensor(x.layout, x.dtype)
        codelet = codelets.elementwise.unary[name]
    runtime = get_runtime()
    for src, dst in zip(x.handles, out.handles):
        runtime.submit(codelet, [(src, R), (dst, W)])
    return out


def _align(x: TileTensor, y: TileTensor) -> tuple[TileTensor, TileTensor, Layout]:
    """Broadcast ``x`` and ``y`` to one shape; retile ``y`` where tilings of an axis differ."""
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise ValueError(f"shapes {x.shape} and {y.shape} cannot be broadcast together") from None
    ndim = len(shape)
    if x.ndim < ndim:
        x = reshape(x, (1,) * (ndim - x.ndim) + x.shape)
    if y.ndim < ndim:
        y = reshape(y, (1,) * (ndim - y.ndim) + y.shape)
    tile_shape = result_tile_shape(x, y, shape)
    y_tiles = tuple(  # y spans an axis x spans too: x's tiling there
        tile if x.shape[axis] == size != 1 and y.shape[axis] == size else ty
        for axis, (tile, ty, size) in enumerate(zip(tile_shape, y.tile_shape, shape))
    )
    if y_tiles != y.tile_shape:
        y = retile(y, y_tiles)
    return x, y, Layout(shape, tile_shape)


def result_tile_shape(x: TileTensor, y: TileTensor, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The tile shape of a binary op's result of ``shape`` (``x`` and ``y`` of its ndim):
    x's tiling on the axes x spans (of extent above 1), y's elsewhere."""
    return tuple(
        tx if extent == size != 1 else ty
        for tx, ty, extent, size in zip(x.tile_shape, y.tile_shape, x.shape, shape)
    )


def source_tile(operand: TileTensor, out_index: tuple[int, ...]):
    index = tuple(0 if g == 1 else i for g, i in zip(operand.grid, out_index))
    return operand.tile(index)


def check_operands(x, y, name: str) -> tuple[bool, bool]:
    """(x is a scalar, y is a scalar); raise ``TypeError`` unless one is a TileTensor and the
    other a TileTensor or a scalar."""
    x_scalar, y_scalar = is_scalar(x), is_scalar(y)
    if x_scalar and y_scalar:
        raise TypeError(f"{name} needs at least one TileTensor")
    for operand in (x, y):
        if not (is_scalar(operand) or isinstance(operand, TileTensor)):
            if isinstance(operand, np.ndarray):
                raise TypeError(
                    f"{name}: mixing a TileTensor with a NumPy array is ambiguous; "
                    f"convert it with nt.from_numpy(array, tile_shape=...)"
                )
            raise TypeError(f"{name}: unsupported operand type {type(operand).__name__}")
    return x_scalar, y_scalar


# binary ops of floats: integer operands are promoted to float64, as for divide
_FLOAT_FUNCTIONS = tuple(opcodes.op_name(opcodes.BINARY_OPS, c) for c in opcodes.BINARY_MATH)


def _operation_dtype(x, y, name: str, family: str, y_scalar: bool) -> np.dtype:
    """The dtype both operands are cast to before op ``name`` of ``family`` runs."""
    dtype = result_type(x, y)
    if (name == "divide" or name in _FLOAT_FUNCTIONS) and not is_inexact(dtype):
        dtype = float64
    if dtype.kind == "c" and name not in opcodes.COMPLEX_BINARY + opcodes.COMPLEX_COMPARE:
        raise TypeError(f"{name} does not support complex tensors (got {dtype.name})")
    if name in ("logical_and", "logical_or", "logical_xor"):
        dtype = bool_
    if dtype == bool_ and family == "binary":
        raise TypeError(f"{name} of boolean tensors: use logical_and/logical_or, or astype")
    if family == "bitwise" and (dtype.kind not in "biu" or dtype == bool_ and "shift" in name):
        given = " and ".join(
            np.dtype(v.dtype).name if hasattr(v, "dtype") else type(v).__name__ for v in (x, y)
        )  # the operands' own dtypes: int64 with uint64 promotes to float64
        raise TypeError(
            f"{name} needs integer{'' if 'shift' in name else ' or boolean'} tensors, got {given}"
        )
    if name == "power" and dtype.kind == "i" and y_scalar and y < 0:
        raise ValueError(f"integers to negative integer powers are not allowed (exponent {y})")
    return dtype


def binary_op(x, y, name: str, family: str = "binary", out: TileTensor | None = None):
    """Op ``name`` of ``family`` (binary, compare, bitwise) on x and y broadcast together;
    with ``out`` (which is ``x``), the result overwrites x's tiles in place (RW tasks)."""
    x_scalar, y_scalar = check_operands(x, y, name)
    dtype = _operation_dtype(x, y, name, family, y_scalar)
    out_dtype = bool_ if family == "compare" else dtype
    if out is not None and out_dtype != out.dtype:
        raise TypeError(
            f"in-place {name} would change the dtype of a {out.dtype.name} tensor to "
            f"{out_dtype.name} (the array API forbids it; use the out-of-place form)"
        )
    runtime = get_runtime()
    families = codelets.elementwise.FAMILIES[family]
    if x_scalar or y_scalar:
        tensor, scalar = (y, x) if x_scalar else (x, y)
        if tensor.dtype != dtype:
            tensor = astype(tensor, dtype)
        scalar_array = np.full(1, scalar, dtype)
        if is_narrow_floating(dtype):  # rounded to bfloat16 (the array API), then held exactly
            scalar_array = scalar_array.astype(float32)  # as the float32 kernel reads it
        if out is None:
            out = TileTensor(tensor.layout, out_dtype)
            codelet, access = families["scalar"][name], None
        else:
            codelet, access = families["scalar_inplace"][name], Access.RW
        args_by_shape = {}  # tiles of one shape share their kernel arguments
        for src, dst in zip(tensor.handles, out.handles):
            shape = src.shape
            args = args_by_shape.get(shape)
            if args is None:
                args = args_by_shape[shape] = (
                    scalar_array,
                    element_strides(shape, shape),
                    element_strides((1,) * len(shape), shape),
                    shape_array(shape),
                    x_scalar,
                )
            handles = [(src, R), (dst, W)] if access is None else [(dst, access)]
            runtime.submit(codelet, handles, args)
        return out
    if x.dtype != dtype:
        x = astype(x, dtype)
    if y.dtype != dtype:
        y = astype(y, dtype)
    x, y, layout = _align(x, y)
    if out is not None:
        if layout.shape != out.shape:
            raise ValueError(
                f"in-place {name}: the result's shape {layout.shape} is not the tensor's "
                f"{out.shape}"
            )
        if layout.tile_shape != out.tile_shape or set(y.handles) & set(out.handles):
            # y reads out's own tiles (x += x) or tiles differently: compute, then copy
            copy_into(out, binary_op(x, y, name, family))
            return out
        codelet = families["inplace"][name]
        for index, dst in zip(layout.indices(), out.handles):
            b = source_tile(y, index)
            shape = dst.shape
            args = (
                element_strides(shape, shape),
                element_strides(b.shape, shape),
                shape_array(shape),
            )
            runtime.submit(codelet, [(dst, Access.RW), (b, R)], args)
        return out
    out = TileTensor(layout, out_dtype)
    codelet = families["tensor"][name]
    for index, dst in zip(layout.indices(), out.handles):
        a, b = source_tile(x, index), source_tile(y, index)
        shape = dst.shape
        args = (
            element_strides(a.shape, shape),
            element_strides(b.shape, shape),
            shape_array(shape),
        )
        runtime.submit(codelet, [(a, R), (b, R), (dst, W)], args)
    return out


def copy_into(target: TileTensor, source: TileTensor) -> None:
    """Overwrite ``target``'s tiles with ``source`` (same shape and dtype), retiled if needed."""
    assert source.shape == target.shape and source.dtype == target.dtype
    if source.tile_shape != target.tile_shape:
        source = retile(source, target.tile_shape)
    runtime = get_runtime()
    for src, dst in zip(source.handles, target.handles):
        shape = shape_array(src.shape)
        strides = element_strides(src.shape, src.shape)
        runtime.submit(
            codelets.copy.copy_strided, [(src, R), (dst, W)], (0, strides, 0, strides, shape)
        )
