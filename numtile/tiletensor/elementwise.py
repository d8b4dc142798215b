"""Elementwise ops on TileTensors: unary math, binary arithmetic with broadcasting, comparisons."""

from __future__ import annotations

import functools
import numbers

import numpy as np

from numtile import opcodes
from numtile.runtime import Access, get_runtime
from numtile.tiletensor import codelets
from numtile.tiletensor.creation import fill_tiles
from numtile.tiletensor.dispatch import dispatched
from numtile.tiletensor.dtypes import bool_, check_dtype, float64, result_type
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.manipulation import reshape, retile
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


def check_device(device) -> None:
    """Accept ``device`` (None, ``"cpu"`` or a ``numtile.Device``): numtile's one device is
    the runtime, which places tiles on CPUs and GPUs itself."""
    if device is not None and str(device) != "cpu":
        raise ValueError(f"unknown device {device!r}; numtile has one device, 'cpu'")


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
            shape = _shape_array(src.shape)
            strides = _strides(src.shape, src.shape)
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


def _unary(x: TileTensor, name: str, float_only: bool = True) -> TileTensor:
    if not isinstance(x, TileTensor):
        raise TypeError(f"{name} expects a TileTensor, got {type(x).__name__}")
    if x.dtype.kind == "c":
        if name not in opcodes.COMPLEX_UNARY_OPS:
            refuse_complex(x, name)
        parts = ("abs", "real", "imag")
        out = TileTensor(x.layout, real_dtype(x.dtype) if name in parts else x.dtype)
        codelet = codelets.elementwise.complex_unary[name]
    else:
        if x.dtype == bool_ or (float_only and x.dtype.kind != "f"):
            x = astype(x, float64 if float_only else np.int64)
        out = TileTensor(x.layout, x.dtype)
        codelet = codelets.elementwise.unary[name]
    runtime = get_runtime()
    for src, dst in zip(x.handles, out.handles):
        runtime.submit(codelet, [(src, R), (dst, W)])
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
    return dispatched(function)


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


@dispatched
def conj(x: TileTensor, /) -> TileTensor:
    """The complex conjugate of each element (a copy of a real tensor).

    >>> import numtile as nt
    >>> nt.conj(nt.asarray([1 + 2j])).to_numpy().tolist()
    [(1-2j)]
    """
    return _unary(x, "conj") if x.dtype.kind == "c" else astype(x, x.dtype)


@dispatched
def real(x: TileTensor, /) -> TileTensor:
    """The real part of each element, in the real dtype of ``x``'s components.

    >>> import numtile as nt
    >>> nt.real(nt.asarray([1 + 2j])).to_numpy().tolist()
    [1.0]
    """
    return _unary(x, "real") if x.dtype.kind == "c" else astype(x, x.dtype)


@dispatched
def imag(x: TileTensor, /) -> TileTensor:
    """The imaginary part of each element (zeros for a real tensor).

    >>> import numtile as nt
    >>> nt.imag(nt.asarray([1 + 2j])).to_numpy().tolist()
    [2.0]
    """
    if x.dtype.kind == "c":
        return _unary(x, "imag")
    return fill_tiles(TileTensor(x.layout, x.dtype), 0)


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


def _check_operands(x, y, name: str) -> tuple[bool, bool]:
    """(x is a scalar, y is a scalar); raise ``TypeError`` unless one is a TileTensor and the
    other a TileTensor or a scalar."""
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
    return x_scalar, y_scalar


def _operation_dtype(x, y, name: str, family: str, y_scalar: bool) -> np.dtype:
    """The dtype both operands are cast to before op ``name`` of ``family`` runs."""
    dtype = result_type(x, y)
    if name == "divide" and dtype.kind not in "fc":
        dtype = float64
    if dtype.kind == "c" and name not in opcodes.COMPLEX_BINARY + opcodes.COMPLEX_COMPARE:
        raise TypeError(f"{name} does not support complex tensors (got {dtype.name})")
    if name in ("logical_and", "logical_or"):
        dtype = bool_
    if dtype == bool_ and family == "binary":
        raise TypeError(f"{name} of boolean tensors: use logical_and/logical_or, or astype")
    if family == "bitwise" and (dtype.kind not in "biu" or dtype == bool_ and "shift" in name):
        raise TypeError(
            f"{name} needs integer{'' if 'shift' in name else ' or boolean'} "
            f"tensors, got {dtype.name}"
        )
    if name == "power" and dtype.kind == "i" and y_scalar and y < 0:
        raise ValueError(f"integers to negative integer powers are not allowed (exponent {y})")
    return dtype


def _binary(x, y, name: str, family: str = "binary", out: TileTensor | None = None):
    """Op ``name`` of ``family`` (binary, compare, bitwise) on x and y broadcast together;
    with ``out`` (which is ``x``), the result overwrites x's tiles in place (RW tasks)."""
    x_scalar, y_scalar = _check_operands(x, y, name)
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
                    _strides(shape, shape),
                    _strides((1,) * len(shape), shape),
                    _shape_array(shape),
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
            copy_into(out, _binary(x, y, name, family))
            return out
        codelet = families["inplace"][name]
        for index, dst in zip(layout.indices(), out.handles):
            b = _source_tile(y, index)
            shape = dst.shape
            args = (_strides(shape, shape), _strides(b.shape, shape), _shape_array(shape))
            runtime.submit(codelet, [(dst, Access.RW), (b, R)], args)
        return out
    out = TileTensor(layout, out_dtype)
    codelet = families["tensor"][name]
    for index, dst in zip(layout.indices(), out.handles):
        a, b = _source_tile(x, index), _source_tile(y, index)
        shape = dst.shape
        args = (_strides(a.shape, shape), _strides(b.shape, shape), _shape_array(shape))
        runtime.submit(codelet, [(a, R), (b, R), (dst, W)], args)
    return out


def copy_into(target: TileTensor, source: TileTensor) -> None:
    """Overwrite ``target``'s tiles with ``source`` (same shape and dtype), retiled if needed."""
    assert source.shape == target.shape and source.dtype == target.dtype
    if source.tile_shape != target.tile_shape:
        source = retile(source, target.tile_shape)
    runtime = get_runtime()
    for src, dst in zip(source.handles, target.handles):
        shape = _shape_array(src.shape)
        strides = _strides(src.shape, src.shape)
        runtime.submit(
            codelets.copy.copy_strided, [(src, R), (dst, W)], (0, strides, 0, strides, shape)
        )


@dispatched(name="inplace", public="TileTensor's in-place operators (x += y ...)")
def inplace(x: TileTensor, name: str, other) -> TileTensor:
    """``x = name(x, other)`` written into x's own tiles (``x += y`` runs ``inplace(x, "add",
    y)``): tasks that read and write x's tiles, ordered after every earlier task on them.

    >>> import numtile as nt
    >>> x = nt.ones((3,)); x += 2; x.to_numpy().tolist()
    [3.0, 3.0, 3.0]
    """
    family = "bitwise" if name in opcodes.BITWISE_OPS else "binary"
    return _binary(x, other, name, family, out=x)


def _make_binary(name: str, family: str = "binary"):
    def function(x, y, /) -> TileTensor:
        return _binary(x, y, name, family)

    function.__name__ = name
    function.__qualname__ = name
    example = (
        "nt.ones((2, 3)), nt.ones((3,))" if family != "bitwise" else "nt.arange(6).reshape(2, 3), 3"
    )
    function.__doc__ = (
        f"Elementwise ``{name}`` with NumPy broadcasting; either side may be a Python scalar.\n\n"
        f"    >>> import numtile as nt\n"
        f"    >>> nt.{name}({example}).shape\n"
        f"    (2, 3)\n"
    )
    return dispatched(function)


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
equal = _make_binary("equal", "compare")
not_equal = _make_binary("not_equal", "compare")
less = _make_binary("less", "compare")
less_equal = _make_binary("less_equal", "compare")
greater = _make_binary("greater", "compare")
greater_equal = _make_binary("greater_equal", "compare")
logical_and = _make_binary("logical_and", "compare")
logical_or = _make_binary("logical_or", "compare")
bitwise_and = _make_binary("bitwise_and", "bitwise")
bitwise_or = _make_binary("bitwise_or", "bitwise")
bitwise_xor = _make_binary("bitwise_xor", "bitwise")
bitwise_left_shift = _make_binary("bitwise_left_shift", "bitwise")
bitwise_right_shift = _make_binary("bitwise_right_shift", "bitwise")


@dispatched
def bitwise_invert(x: TileTensor, /) -> TileTensor:
    """``~x``: every bit flipped (``logical_not`` for booleans).

    >>> import numtile as nt
    >>> nt.bitwise_invert(nt.arange(3)).to_numpy().tolist()
    [-1, -2, -3]
    """
    if not isinstance(x, TileTensor):
        raise TypeError(f"bitwise_invert expects a TileTensor, got {type(x).__name__}")
    all_ones = True if x.dtype == bool_ else (-1 if x.dtype.kind == "i" else np.iinfo(x.dtype).max)
    return _binary(x, x.dtype.type(all_ones), "bitwise_xor", "bitwise")


@dispatched
def logical_not(x: TileTensor, /) -> TileTensor:
    """``not x`` elementwise (any nonzero value is true).

    >>> import numtile as nt
    >>> nt.logical_not(nt.arange(3)).to_numpy().tolist()
    [True, False, False]
    """
    return _binary(x, 0, "equal", "compare") if x.dtype != bool_ else bitwise_invert(x)


# unary ops whose derivative has a fused kernel (``unary_backward``)
FUSED_BACKWARD = tuple(codelets.elementwise.unary_backward)


def unary_backward(x: TileTensor, grad: TileTensor, name: str) -> TileTensor:
    """``grad * f'(x)`` for unary op ``name``, through its fused backward kernel.

    >>> import numtile as nt
    >>> unary_backward(nt.zeros((3,)), nt.ones((3,)), "exp").to_numpy().tolist()
    [1.0, 1.0, 1.0]
    """
    if grad.tile_shape != x.tile_shape:
        grad = retile(grad, x.tile_shape)
    if grad.dtype != x.dtype:
        grad = astype(grad, x.dtype)
    out = TileTensor(x.layout, x.dtype)
    codelet = codelets.elementwise.unary_backward[name]
    runtime = get_runtime()
    for xs, gs, dst in zip(x.handles, grad.handles, out.handles):
        runtime.submit(codelet, [(xs, R), (gs, R), (dst, W)])
    return out


def accumulate(target: TileTensor, x: TileTensor) -> None:
    """``target += x`` in place, tile by tile, with commutative accumulate tasks.

    ``x`` must have the layout and dtype of ``target`` (gradient sums use this).

    >>> import numtile as nt
    >>> total = nt.ones((3,)); accumulate(total, nt.ones((3,))); total.to_numpy().tolist()
    [2.0, 2.0, 2.0]
    """
    assert x.layout == target.layout and x.dtype == target.dtype
    runtime = get_runtime()
    one = target.dtype.type(1)
    for src, dst in zip(x.handles, target.handles):
        runtime.submit(codelets.elementwise.axpy, [(src, R), (dst, Access.ACCUMULATE)], (one,))
