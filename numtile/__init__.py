"""numtile: tiled tensors on an asynchronous task runtime, accelerated with Numba.

>>> import numtile as nt, numpy as np
>>> a = nt.from_numpy(np.eye(3), tile_shape=(2, 2))
>>> float(nt.sum(a @ a).item())
3.0
"""

from numtile import linalg, random
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
from numtile.tiletensor.creation import (
    arange,
    asarray,
    empty,
    empty_like,
    from_numpy,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from numtile.tiletensor.dtypes import bool_ as bool
from numtile.tiletensor.dtypes import float32, float64, int64
from numtile.tiletensor.elementwise import (
    abs,
    add,
    astype,
    ceil,
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
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_or,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    pow,
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
from numtile.tiletensor.layout import Layout
from numtile.tiletensor.linalg import matmul
from numtile.tiletensor.manipulation import (
    expand_dims,
    matrix_transpose,
    permute_dims,
    reshape,
    retile,
    squeeze,
)
from numtile.tiletensor.reduction import max, mean, min, prod, sum
from numtile.tiletensor.tensor import TileTensor

__version__ = "0.1.0"
__array_api_version__ = "2023.12"

__all__ = [
    "Access", "Codelet", "DataHandle", "InvalidatedError", "Layout", "RuntimeShutdownError",
    "TaskCancelled", "TaskError", "TileTensor", "__array_api_version__", "__version__", "abs",
    "add", "arange", "asarray", "astype", "bool", "ceil", "cos", "divide", "empty",
    "empty_like", "equal", "exp", "expand_dims", "expm1", "float32", "float64", "floor",
    "floor_divide", "from_numpy", "full", "full_like", "gelu_tanh", "get_runtime", "greater",
    "greater_equal", "init", "int64", "less", "less_equal", "linalg", "log", "log1p",
    "logical_and", "logical_or", "matmul", "matrix_transpose", "max", "maximum", "mean", "min",
    "minimum", "multiply", "negative", "not_equal", "ones", "ones_like", "permute_dims", "pow",
    "prod", "random", "reciprocal", "relu", "remainder", "reshape", "retile", "runtime_summary",
    "shutdown", "sigmoid", "sign", "silu", "sin", "sqrt", "square", "squeeze", "subtract",
    "sum", "tanh", "trace", "wait_all", "zeros", "zeros_like",
]
