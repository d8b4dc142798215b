"""Interop: DLPack export and NumPy's protocols (``__array_ufunc__``, ``__array_function__``).

NumPy functions called on TileTensors run numtile's own tiled op of the same meaning, as
Dask and CuPy do: ``np.exp(t)``, ``np.sum(t, axis=0)``, ``np.concatenate([t, t])`` return
TileTensors. A NumPy function numtile has no op for raises ``TypeError`` naming it: a tensor
is never gathered behind the user's back (``np.asarray(t)`` and ``t.to_numpy()`` gather, as
asked). A NumPy array among the arguments is a ``TypeError``, as in ``t + array``: which
tiling it should take is the caller's choice (``nt.from_numpy(array, tile_shape=...)``).

Ops are found by name in the op table (``dispatch``), so an op added to numtile is reachable
from NumPy as soon as it is registered.
"""

from __future__ import annotations

import inspect

import numpy as np

from numtile.runtime import Access, get_runtime
from numtile.runtime.handle import materialise_readers
from numtile.tiletensor import dispatch
from numtile.tiletensor.dlpack_bf16 import export_bf16
from numtile.tiletensor.dtypes import is_bfloat16, result_type
from numtile.tiletensor.tensor import TileTensor

KDL_CPU = 1  # DLPack's device type of host memory (DLDeviceType.kDLCPU)

# NumPy names whose numtile (array API) op has another name
RENAMED = {
    "absolute": "abs",
    "amax": "max",
    "amin": "min",
    "arccos": "acos",
    "arccosh": "acosh",
    "arcsin": "asin",
    "arcsinh": "asinh",
    "arctan": "atan",
    "arctan2": "atan2",
    "arctanh": "atanh",
    "bitwise_not": "bitwise_invert",
    "concatenate": "concat",
    "conjugate": "conj",
    "cumsum": "cumulative_sum",
    "cumprod": "cumulative_prod",
    "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift",
    "true_divide": "divide",
}
# functions NumPy has in both ``numpy`` and ``numpy.linalg`` with one meaning
EITHER_NAMESPACE = frozenset({"matmul", "matrix_transpose", "vecdot", "tensordot"})
# what ``ufunc.reduce`` is in numtile
REDUCTIONS = {
    "add": "sum",
    "multiply": "prod",
    "maximum": "max",
    "minimum": "min",
    "logical_and": "all",
    "logical_or": "any",
}
# NumPy keyword names that numtile's ops spell the array API's way
KEYWORDS = {"newshape": "shape", "ddof": "correction", "a_min": "min", "a_max": "max"}


# --- DLPack ------------------------------------------------------------------------------------


def dlpack_device(x: TileTensor) -> tuple[int, int]:
    """``x.__dlpack_device__()``: host memory, device 0 (a TileTensor exports from the host)."""
    return (KDL_CPU, 0)


def dlpack(x: TileTensor, stream=None, max_version=None, dl_device=None, copy=None):
    """``x.__dlpack__(...)``: a DLPack capsule of ``x``'s values in host memory.

    The tiles are gathered into one new host buffer (waiting for the tasks that write them),
    which the capsule owns: a copy, unless ``x`` has one tile, whose own host buffer is
    exported when ``copy`` is False or None. ``copy=False`` on a tensor of several tiles
    raises ``BufferError`` (one buffer cannot hold them without a copy).
    """
    if stream is not None and stream != -1:
        raise ValueError(f"a TileTensor exports host memory: stream must be None, got {stream!r}")
    if dl_device is not None and tuple(dl_device) != (KDL_CPU, 0):
        raise BufferError(f"a TileTensor exports to the host (device (1, 0)), not {dl_device}")
    if len(x.handles) == 1 and copy is not True:
        get_runtime().wait_handles(x.handles)
        # the consumer may write the exported buffer: deferred readers submit their reads now
        materialise_readers([(x.handles[0], Access.W)])
        array = x.handles[0].host_array().reshape(x.shape)
    elif copy is False:
        raise BufferError(
            f"copy=False, but a tensor of {len(x.handles)} tiles {x.grid} has no single buffer: "
            f"gathering them is a copy"
        )
    else:
        array = x.to_numpy()
    if is_bfloat16(array.dtype):  # NumPy's DLPack has no bfloat16: its bits, retyped
        return export_bf16(array, max_version)
    if max_version is None:
        return array.__dlpack__()
    return array.__dlpack__(max_version=max_version, copy=False)


# --- NumPy's protocols ---------------------------------------------------------------------------


def _refuse_numpy_arrays(values, where: str) -> None:
    """TypeError for a NumPy array among the arguments, as TileTensor's operators raise: which
    tiling it should take is ambiguous (``nt.from_numpy(array, tile_shape=...)`` says)."""
    for value in values:
        inner = value if isinstance(value, list | tuple) else (value,)
        if any(isinstance(v, np.ndarray) for v in inner):
            raise TypeError(
                f"{where}: mixing a TileTensor with a NumPy array is ambiguous; convert it "
                f"with nt.from_numpy(array, tile_shape=...)"
            )


def _op(numpy_name: str, module: str = "numpy") -> str:
    """The op of the table that NumPy function ``module.numpy_name`` is, or TypeError."""
    name = RENAMED.get(numpy_name, numpy_name)
    namespace = "numtile" if module == "numpy" else module.replace("numpy", "numtile", 1)
    public = dispatch.PUBLIC_NAMES.get(name)
    if public == f"{namespace}.{name}" or name in EITHER_NAMESPACE and public is not None:
        return name
    raise TypeError(
        f"numtile has no implementation of {module}.{numpy_name} for TileTensors (it would "
        f"need a gather to NumPy: call np.asarray(x) or x.to_numpy() first to do that)"
    )


# NumPy options whose every value numtile's op already satisfies: its sorts are stable, and a
# stable sort is a valid result for each of NumPy's sort kinds
SATISFIED = {("sort", "kind"), ("argsort", "kind")}


def _call(name: str, function, args, kwargs):
    """Op ``name`` on NumPy's ``args``/``kwargs``: the first argument and the positional-only
    parameters of the op stay positional, the rest are passed by (array API) keyword; NumPy
    keywords numtile lacks are dropped when they hold NumPy's default, else TypeError."""
    plain = dispatch.PLAIN[name]
    try:
        numpy_params = inspect.signature(function).parameters
        bound = inspect.signature(function).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):  # a C function without a signature
        return dispatch.call(name, *args, **kwargs)
    ours = list(inspect.signature(plain).parameters.values())
    by_name = {p.name: p for p in ours}
    positional, keywords = [], {}
    for i, (key, value) in enumerate(bound.items()):
        parameter = numpy_params[key]
        if parameter.kind == inspect.Parameter.VAR_POSITIONAL:
            positional += list(value)
            continue
        if parameter.kind == inspect.Parameter.VAR_KEYWORD:
            keywords.update(value)
            continue
        target = KEYWORDS.get(key, key)
        here = ours[i] if i < len(ours) else None
        at_position = here is not None and here.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )
        if i == 0 or (
            at_position
            and i < len(args)
            and (here.kind == inspect.Parameter.POSITIONAL_ONLY or target not in by_name)
        ):
            positional.append(value)
        elif target in by_name:
            keywords[target] = value
        elif value is None or value is parameter.default or _equal(value, parameter.default):
            continue  # a NumPy option left at its default (out=None, order="K", ...)
        elif (name, key) in SATISFIED:
            continue
        else:
            raise TypeError(
                f"numtile's {dispatch.PUBLIC_NAMES[name]} has no {key}= (called as "
                f"numpy.{function.__name__} with {key}={value!r})"
            )
    return dispatch.call(name, *positional, **keywords)


def _equal(value, default) -> bool:
    try:
        return bool(value == default)
    except Exception:  # noqa: BLE001 - an array-valued comparison: not a default
        return False


def array_ufunc(x: TileTensor, ufunc, method: str, *inputs, **kwargs):
    """``x.__array_ufunc__``: ``np.exp(t)``, ``np.add(t, 1)``, ``np.add.reduce(t, axis=0)``."""
    if kwargs.pop("out", None) is not None:
        raise TypeError(
            f"numpy.{ufunc.__name__}(..., out=...) on a TileTensor: numtile ops "
            f"make new tensors, pass no out="
        )
    _refuse_numpy_arrays(inputs, f"numpy.{ufunc.__name__}")
    if method == "__call__":
        name = _op(ufunc.__name__)
        for key, value in kwargs.items():
            if key == "dtype" and value is not None:
                return dispatch.call("astype", dispatch.call(name, *inputs), value)
            if value is not None and key not in ("casting", "order", "subok"):
                raise TypeError(f"numpy.{ufunc.__name__}(..., {key}=...) on a TileTensor")
        return dispatch.call(name, *inputs)
    if method == "reduce" and ufunc.__name__ in REDUCTIONS:
        name = REDUCTIONS[ufunc.__name__]
        unknown = set(kwargs) - {"axis", "keepdims", "dtype"}
        if unknown:
            raise TypeError(
                f"numpy.{ufunc.__name__}.reduce(..., {sorted(unknown)[0]}=...) on a TileTensor: "
                f"numtile's {name} takes axis, keepdims and dtype"
            )
        keywords = {"axis": kwargs.get("axis", 0), "keepdims": kwargs.get("keepdims", False)}
        if kwargs.get("dtype") is not None:
            keywords["dtype"] = kwargs["dtype"]
        return dispatch.call(name, *inputs, **keywords)
    raise TypeError(f"numtile has no implementation of numpy.{ufunc.__name__}.{method}")


def _squeeze(x, axis=None):
    if axis is None:
        axis = tuple(a for a, n in enumerate(x.shape) if n == 1)
    return dispatch.call("squeeze", x, axis)


def _ravel(x, order="C"):
    if order != "C":
        raise TypeError(f"numpy.ravel(..., order={order!r}) on a TileTensor: only 'C'")
    return dispatch.call("reshape", x, (-1,))


def _where(condition, *values):
    if not values:
        return dispatch.call("nonzero", condition)
    return dispatch.call("where", condition, *values)


def _size(x, axis=None):
    return x.size if axis is None else x.shape[axis]


def _cumulative_sum(x, axis=None, dtype=None):
    if axis is None:
        x, axis = dispatch.call("reshape", x, (-1,)), 0
    return dispatch.call("cumulative_sum", x, axis=axis, dtype=dtype)


# NumPy functions whose numtile form differs more than by names; metadata needs no task
SPECIAL = {
    "squeeze": _squeeze,
    "ravel": _ravel,
    "where": _where,
    "cumsum": _cumulative_sum,
    "shape": lambda x: x.shape,
    "ndim": lambda x: x.ndim,
    "size": _size,
    "result_type": result_type,
}


def array_function(x: TileTensor, function, types, args, kwargs):
    """``x.__array_function__``: NumPy functions run numtile's op of the same meaning."""
    if not all(issubclass(t, TileTensor | np.ndarray) for t in types):
        return NotImplemented
    name, module = function.__name__, function.__module__ or "numpy"
    _refuse_numpy_arrays([*args, *kwargs.values()], f"{module}.{name}")
    if module == "numpy" and name in SPECIAL:
        if kwargs.pop("out", None) is not None:
            raise TypeError(f"numpy.{name}(..., out=...) on a TileTensor: pass no out=")
        return SPECIAL[name](*args, **kwargs)
    return _call(_op(name, module), function, args, kwargs)
