"""Elementwise ops on TileTensors: unary math, binary arithmetic with broadcasting, comparisons."""

from __future__ import annotations

import functools
import numbers

import numpy as np

from numtile import opcodes
from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.dtypes import bool_, check_dtype, float64, result_type
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.tensor import TileTensor

R, W = Access.R, Access.W


@functools.lru_cache(maxsize=4096)
def _strides(tile_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> np.ndarray:
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
def _shape_array(shape: tuple[int, ...]) -> np.ndarray:
    array = np.array(shape, np.int64)
    array.flags.writeable = False
    return array


def _is_scalar(value) -> bool:
    return isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, TileTensor)


def astype(x: TileTensor, dtype, copy: bool = True) -> TileTensor:
    """A copy of ``x`` converted to ``dtype`` (NumPy's ``astype`` rules).

    >>> import numtile as nt
    >>> nt.arange(3).astype("float32").dtype
    dtype('float32')
    """
    dtype = check_dtype(dtype)
    if dtype == x.dtype and not copy:
        return x
    out = TileTensor(x.layout, dtype)
    runtime = get_runtime()
    op = codelets.copy_strided if dtype == x.dtype else codelets.cast
    for src, dst in zip(x.handles, out.handles):
        if op is codelets.cast:
            runtime.submit(op, [(src, R), (dst, W)])
        else:
            shape = _shape_array(src.shape)
            strides = _strides(src.shape, src.shape)
            runtime.submit(op, [(src, R), (dst, W)], (0, strides, 0, strides, shape))
    return out


def _unary(x: TileTensor, name: str, float_only: bool = True) -> TileTensor:
    if not isinstance(x, TileTensor):
        raise TypeError(f"{name} expects a TileTensor, got {type(x).__name__}")
    if x.dtype == bool_ or (float_only and x.dtype.kind != "f"):
        x = astype(x, float64 if float_only else np.int64)
    out = TileTensor(x.layout, x.dtype)
    op = opcodes.UNARY_OPS[name]
    runtime = get_runtime()
    for src, dst in zip(x.handles, out.handles):
        runtime.submit(codelets.unary, [(src, R), (dst, W)], (op,))
    return out


def _make_unary(name: str, float_only: bool = True):
    def function(x: TileTensor) -> TileTensor:
        return _unary(x, name, float_only)

    function.__name__ = name
    function.__qualname__ = name
    function.__doc__ = (
        f"Elementwise ``{name}`` of a tensor, tile by tile.\n\n"
        f"    >>> import numtile as nt\n"
        f"    >>> nt.{name}(nt.ones((2, 2))).shape\n"
        f"    (2, 2)\n"
    )
    return function


negative = _make_unary("negative", float_only=False)
abs = _make_unary("abs", float_only=False)  # noqa: A001  (array API name)
exp = _make_unary("exp")
log = _make_unary("log")
sqrt = _make_unary("sqrt")
tanh = _make_unary("tanh")
sin = _make_unary("sin")
cos = _make_unary("cos")
expm1 = _make_unary("expm1")
log1p = _make_unary("log1p")
floor = _make_unary("floor")
ceil = _make_unary("ceil")
sign = _make_unary("sign", float_only=False)
square = _make_unary("square", float_only=False)
reciprocal = _make_unary("reciprocal")
relu = _make_unary("relu")
gelu_tanh = _make_unary("gelu_tanh")
silu = _make_unary("silu")
sigmoid = _make_unary("sigmoid")


def _align(x: TileTensor, y: TileTensor) -> tuple[TileTensor, TileTensor, Layout]:
    """Broadcast ``x`` and ``y`` to one shape; retile ``y`` where tilings of an axis differ."""
    from numtile.tiletensor.manipulation import reshape, retile

    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise ValueError(f"shapes {x.shape} and {y.shape} cannot be broadcast together") from None
    ndim = len(shape)
    if x.ndim < ndim:
        x = reshape(x, (1,) * (ndim - x.ndim) + x.shape)
    if y.ndim < ndim:
        y = reshape(y, (1,) * (ndim - y.ndim) + y.shape)
    tile_shape = []
    y_tiles = list(y.tile_shape)
    for axis in range(ndim):
        tx, ty = x.tile_shape[axis], y.tile_shape[axis]
        if x.shape[axis] == shape[axis] and shape[axis] != 1:
            tile_shape.append(tx)
            if y.shape[axis] == shape[axis] and ty != tx:
                y_tiles[axis] = tx
        else:
            tile_shape.append(ty)
    if tuple(y_tiles) != y.tile_shape:
        y = retile(y, tuple(y_tiles))
    return x, y, Layout(shape, tuple(tile_shape))


def _source_tile(operand: TileTensor, out_index: tuple[int, ...]):
    index = tuple(0 if g == 1 else i for g, i in zip(operand.grid, out_index))
    return operand.tile(index)


def _binary(x, y, name: str, compare: bool = False) -> TileTensor:
    ops = opcodes.COMPARE_OPS if compare else opcodes.BINARY_OPS
    op = ops[name]
    x_scalar, y_scalar = _is_scalar(x), _is_scalar(y)
    if x_scalar and y_scalar:
        raise TypeError(f"{name} needs at least one TileTensor")
    for operand in (x, y):
        if not (_is_scalar(operand) or isinstance(operand, TileTensor)):
            if isinstance(operand, np.ndarray):
                raise TypeError(
                    f"{name}: mixing a TileTensor with a NumPy array is ambiguous; "
                    f"convert it with nt.from_numpy(array, tile_shape=...)"
                )
            raise TypeError(f"{name}: unsupported operand type {type(operand).__name__}")
    dtype = result_type(x.dtype if not x_scalar else x, y.dtype if not y_scalar else y)
    if name == "divide" and dtype.kind != "f":
        dtype = float64
    if compare and name in ("logical_and", "logical_or"):
        dtype = bool_
    if dtype == bool_ and not compare:
        raise TypeError(f"{name} of boolean tensors: use logical_and/logical_or, or astype")
    if name == "power" and dtype.kind == "i" and y_scalar and y < 0:
        raise ValueError(f"integers to negative integer powers are not allowed (exponent {y})")
    out_dtype = bool_ if compare else dtype
    runtime = get_runtime()
    if x_scalar or y_scalar:
        tensor, scalar = (y, x) if x_scalar else (x, y)
        if tensor.dtype != dtype:
            tensor = astype(tensor, dtype)
        scalar_array = np.full(1, scalar, dtype)
        out = TileTensor(tensor.layout, out_dtype)
        codelet = codelets.compare_scalar if compare else codelets.binary_scalar
        args_by_shape = {}  # tiles of one shape share their kernel arguments
        for src, dst in zip(tensor.handles, out.handles):
            shape = src.shape
            args = args_by_shape.get(shape)
            if args is None:
                args = args_by_shape[shape] = (
                    scalar_array,
                    op,
                    _strides(shape, shape),
                    _strides((1,) * len(shape), shape),
                    _shape_array(shape),
                    x_scalar,
                )
            runtime.submit(codelet, [(src, R), (dst, W)], args)
        return out
    if x.dtype != dtype:
        x = astype(x, dtype)
    if y.dtype != dtype:
        y = astype(y, dtype)
    x, y, layout = _align(x, y)
    out = TileTensor(layout, out_dtype)
    codelet = codelets.compare if compare else codelets.binary
    for index, dst in zip(layout.indices(), out.handles):
        a, b = _source_tile(x, index), _source_tile(y, index)
        shape = dst.shape
        args = (op, _strides(a.shape, shape), _strides(b.shape, shape), _shape_array(shape))
        runtime.submit(codelet, [(a, R), (b, R), (dst, W)], args)
    return out


def _make_binary(name: str, compare: bool = False):
    def function(x, y) -> TileTensor:
        return _binary(x, y, name, compare)

    function.__name__ = name
    function.__qualname__ = name
    function.__doc__ = (
        f"Elementwise ``{name}`` with NumPy broadcasting; either side may be a Python scalar.\n\n"
        f"    >>> import numtile as nt\n"
        f"    >>> nt.{name}(nt.ones((2, 3)), nt.ones((3,))).shape\n"
        f"    (2, 3)\n"
    )
    return function


add = _make_binary("add")
subtract = _make_binary("subtract")
multiply = _make_binary("multiply")
divide = _make_binary("divide")
maximum = _make_binary("maximum")
minimum = _make_binary("minimum")
power = _make_binary("power")
pow = power  # noqa: A001  (the array API name)
floor_divide = _make_binary("floor_divide")
remainder = _make_binary("remainder")
equal = _make_binary("equal", compare=True)
not_equal = _make_binary("not_equal", compare=True)
less = _make_binary("less", compare=True)
less_equal = _make_binary("less_equal", compare=True)
greater = _make_binary("greater", compare=True)
greater_equal = _make_binary("greater_equal", compare=True)
logical_and = _make_binary("logical_and", compare=True)
logical_or = _make_binary("logical_or", compare=True)
