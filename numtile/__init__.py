"""numtile: tiled tensors on an asynchronous task runtime, accelerated with Numba.

>>> import numtile as nt, numpy as np
>>> a = nt.from_numpy(np.eye(3), tile_shape=(2, 2))
>>> float(nt.sum(a @ a).item())
3.0
"""

import os

# Numba highlights compile errors through colorama, whose init() in a worker thread swaps
# sys.stdout for the whole process (a user's redirected stdout, or doctest's, loses output)
os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")


from numtile import (
    backends,  # noqa: F401  (registers the default table of worker kinds)
    distribution,
    linalg,
    random,
)
from numtile.autograd import NoGradientError, enable_grad, is_grad_enabled, no_grad
from numtile.runtime import (
    Access,
    Codelet,
    DataHandle,
    InvalidatedError,
    RuntimeShutdownError,
    TaskCancelled,
    TaskError,
    get_runtime,
    init,
    runtime_summary,
    shutdown,
    trace,
    wait_all,
)
from numtile.runtime.distributed import nranks, rank
from numtile.tiletensor.creation import (
    arange,
    asarray,
    empty,
    empty_like,
    from_dlpack,
    from_numpy,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from numtile.tiletensor.dtypes import bfloat16_dtype as _bfloat16_dtype
from numtile.tiletensor.dtypes import bool_ as bool
from numtile.tiletensor.dtypes import (
    can_cast,
    complex64,
    complex128,
    finfo,
    float16,
    float32,
    float64,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    isdtype,
    result_type,
    uint8,
    uint16,
    uint32,
    uint64,
)
from numtile.tiletensor.elementwise import (
    abs,
    add,
    astype,
    bitwise_and,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    conj,
    cos,
    divide,
    equal,
    exp,
    expm1,
    floor,
    floor_divide,
    gelu_tanh,
    greater,
    greater_equal,
    imag,
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    pow,
    power,
    real,
    reciprocal,
    relu,
    remainder,
    sigmoid,
    sign,
    silu,
    sin,
    sqrt,
    square,
    subtract,
    tanh,
)

# element-wise functions and statistics of the array API (wave 3, issue 13)
from numtile.tiletensor.elementwise_math import (
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    clip,
    copysign,
    cosh,
    e,
    hypot,
    inf,
    log2,
    log10,
    logaddexp,
    logical_xor,
    nan,
    pi,
    positive,
    round,
    sinh,
    tan,
    trunc,
)

# indexing, searching, sorting and set functions (array API 2023.12)
from numtile.tiletensor.indexing import take
from numtile.tiletensor.info import __array_namespace_info__
from numtile.tiletensor.joining import concat, repeat, stack, tile, unstack  # issue 13 (Q)
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.linalg import matmul, tensordot, vecdot
from numtile.tiletensor.logic import all, any, isfinite, isinf, isnan, signbit, where
from numtile.tiletensor.manipulation import (
    broadcast_to,
    expand_dims,
    matrix_transpose,
    permute_dims,
    reshape,
    retile,
    squeeze,
    transpose,
)
from numtile.tiletensor.rearranging import broadcast_arrays, flip, moveaxis, roll  # 13 (Q)
from numtile.tiletensor.redistribution import redistribute  # distributed tensors (issue 12)
from numtile.tiletensor.reduction import max, mean, min, prod, sum
from numtile.tiletensor.searching import argmax, argmin, nonzero, searchsorted
from numtile.tiletensor.sets import unique_all, unique_counts, unique_inverse, unique_values
from numtile.tiletensor.sorting import argsort, sort
from numtile.tiletensor.statistics import cumulative_sum, std, var
from numtile.tiletensor.structured import eye, linspace, meshgrid, tril, triu  # 13 (Q)
from numtile.tiletensor.tensor import Device, TileTensor

__version__ = "0.1.0"
__array_api_version__ = "2023.12"

__all__ = [
    "__array_api_version__",
    "__array_namespace_info__",
    "__version__",
    "abs",
    "Access",
    "add",
    "all",
    "any",
    "arange",
    "asarray",
    "astype",
    "bitwise_and",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "bool",
    "broadcast_to",
    "can_cast",
    "ceil",
    "Codelet",
    "complex128",
    "complex64",
    "conj",
    "cos",
    "DataHandle",
    "distribution",
    "Device",
    "divide",
    "empty",
    "empty_like",
    "enable_grad",
    "equal",
    "exp",
    "expand_dims",
    "expm1",
    "finfo",
    "float32",
    "float64",
    "floor",
    "floor_divide",
    "from_numpy",
    "full",
    "full_like",
    "gelu_tanh",
    "get_runtime",
    "greater",
    "greater_equal",
    "iinfo",
    "imag",
    "init",
    "int16",
    "int32",
    "int64",
    "int8",
    "InvalidatedError",
    "is_grad_enabled",
    "isdtype",
    "isfinite",
    "isinf",
    "isnan",
    "Layout",
    "less",
    "less_equal",
    "linalg",
    "log",
    "log1p",
    "logical_and",
    "logical_not",
    "logical_or",
    "matmul",
    "matrix_transpose",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "multiply",
    "negative",
    "no_grad",
    "NoGradientError",
    "not_equal",
    "nranks",
    "ones",
    "ones_like",
    "permute_dims",
    "pow",
    "power",
    "prod",
    "random",
    "rank",
    "real",
    "reciprocal",
    "relu",
    "remainder",
    "reshape",
    "result_type",
    "retile",
    "runtime_summary",
    "RuntimeShutdownError",
    "shutdown",
    "sigmoid",
    "sign",
    "signbit",
    "silu",
    "sin",
    "sqrt",
    "square",
    "squeeze",
    "subtract",
    "sum",
    "tanh",
    "TaskCancelled",
    "TaskError",
    "TileTensor",
    "trace",
    "transpose",
    "uint16",
    "uint32",
    "uint64",
    "uint8",
    "wait_all",
    "where",
    "zeros",
    "zeros_like",
    # linear algebra products in the main namespace, as the standard has them (issue 14)
    "tensordot",
    "vecdot",
    # array API creation, manipulation, DLPack and NumPy interop (issue 13, helper Q)
    "broadcast_arrays",
    "concat",
    "eye",
    "flip",
    "from_dlpack",
    "linspace",
    "meshgrid",
    "moveaxis",
    "repeat",
    "roll",
    "stack",
    "tile",
    "tril",
    "triu",
    "unstack",
    # indexing, searching, sorting and set functions
    "argmax",
    "argmin",
    "argsort",
    "nonzero",
    "searchsorted",
    "sort",
    "take",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
    # distributed tensors (issue 12)
    "redistribute",
]
# element-wise functions, statistics and constants of the array API (wave 3, issue 13)
__all__ += [
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "clip",
    "copysign",
    "cosh",
    "cumulative_sum",
    "e",
    "hypot",
    "inf",
    "log10",
    "log2",
    "logaddexp",
    "logical_xor",
    "nan",
    "pi",
    "positive",
    "round",
    "sinh",
    "std",
    "tan",
    "trunc",
    "var",
]
# the bfloat16 dtype (ml_dtypes.bfloat16; wave 4, issue 15), read when first asked for
__all__ += ["bfloat16"]
# the float16 dtype (IEEE half, held through float32 as bfloat16 is; wave 5, issue 15)
__all__ += ["float16"]
# element-wise fusion: nt.fuse(fn) runs an element-wise expression as one kernel (wave 7, issue 13)
from numtile.tiletensor.fusion import fuse  # noqa: E402

__all__ += ["fuse"]


def __getattr__(name: str):
    """``nt.bfloat16``, looked up when first read (PEP 562): its ml_dtypes costs about 1.2 s
    to import, which a program without bfloat16 does not pay.

    >>> import numtile as nt
    >>> nt.bfloat16.name
    'bfloat16'
    """
    if name == "bfloat16":
        return _bfloat16_dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "bfloat16"})
