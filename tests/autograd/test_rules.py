"""Every public op records a gradient, is constant, or refuses an input that requires one.

The test enumerates the public API (``numtile``, ``numtile.linalg``, ``numtile.random``,
``numtile.nn.functional``, the TileTensor operators and methods) and fails when a new op
is added without saying how it treats gradients: no op can cut the graph silently.
"""

import inspect

import numpy as np
import pytest

import numtile as nt
from numtile.autograd import rules
from numtile.nn import functional as F
from numtile.nn.attention import causal_self_attention, grouped_query_attention
from numtile.nn.loss import cross_entropy
from numtile.tiletensor import dispatch


def _x():
    data = np.random.default_rng(0).uniform(0.5, 1.5, (3, 4))
    return nt.from_numpy(data, tile_shape=(2, 3)).requires_grad_()


def _spd():
    return nt.from_numpy(np.eye(3) * 2.0, tile_shape=(2, 2)).requires_grad_()


def _square(x, y):
    """A well-conditioned 3 x 3 matrix that depends on x and y."""
    return nt.linalg.matmul(x, y, transpose_b=True) + nt.from_numpy(
        3 * np.eye(3), tile_shape=(2, 2)
    )


# one call per public function, given x (3, 4) and y (3, 4) that require grad
FUNCTIONS = {
    "abs": lambda x, y: nt.abs(x),
    "add": lambda x, y: nt.add(x, y),
    "all": lambda x, y: nt.all(x > 1, axis=0),
    "any": lambda x, y: nt.any(x),
    "bitwise_and": lambda x, y: nt.bitwise_and(x > 1, y > 1),
    "bitwise_invert": lambda x, y: nt.bitwise_invert(x > 1),
    "bitwise_left_shift": lambda x, y: nt.bitwise_left_shift(nt.astype(x, "int64"), 1),
    "bitwise_or": lambda x, y: nt.bitwise_or(x > 1, y > 1),
    "bitwise_right_shift": lambda x, y: nt.bitwise_right_shift(nt.astype(x, "int64"), 1),
    "bitwise_xor": lambda x, y: nt.bitwise_xor(x > 1, y > 1),
    "conj": lambda x, y: nt.conj(x),
    "imag": lambda x, y: nt.imag(x),
    "isfinite": lambda x, y: nt.isfinite(x),
    "isinf": lambda x, y: nt.isinf(x),
    "isnan": lambda x, y: nt.isnan(x),
    "logical_not": lambda x, y: nt.logical_not(x > 1),
    "real": lambda x, y: nt.real(x),
    "signbit": lambda x, y: nt.signbit(x),
    "where": lambda x, y: nt.where(x > 1, x, y),
    # nt.fuse's calls dispatch on "fused": unfused when an input requires grad (issue 13)
    "fuse": lambda x, y: nt.fuse(lambda a, b: a * b + a)(x, y),
    "astype": lambda x, y: nt.astype(x, "float32"),
    "broadcast_to": lambda x, y: nt.broadcast_to(x, (2, 3, 4)),
    "ceil": lambda x, y: nt.ceil(x),
    "cos": lambda x, y: nt.cos(x),
    "divide": lambda x, y: nt.divide(x, y),
    "empty_like": lambda x, y: nt.empty_like(x),
    "equal": lambda x, y: nt.equal(x, y),
    "exp": lambda x, y: nt.exp(x),
    "expand_dims": lambda x, y: nt.expand_dims(x, 0),
    "expm1": lambda x, y: nt.expm1(x),
    "floor": lambda x, y: nt.floor(x),
    "floor_divide": lambda x, y: nt.floor_divide(x, y),
    "from_numpy": lambda x, y: nt.from_numpy(x, tile_shape=(3, 3)),
    "asarray": lambda x, y: nt.asarray(x, tile_shape=(1, 4)),
    "full_like": lambda x, y: nt.full_like(x, 2.0),
    "gelu_tanh": lambda x, y: nt.gelu_tanh(x),
    "greater": lambda x, y: nt.greater(x, y),
    "greater_equal": lambda x, y: nt.greater_equal(x, y),
    "less": lambda x, y: nt.less(x, y),
    "less_equal": lambda x, y: nt.less_equal(x, y),
    "log": lambda x, y: nt.log(x),
    "log1p": lambda x, y: nt.log1p(x),
    "logical_and": lambda x, y: nt.logical_and(x, y),
    "logical_or": lambda x, y: nt.logical_or(x, y),
    "matmul": lambda x, y: nt.matmul(x, y.mT),
    "matrix_transpose": lambda x, y: nt.matrix_transpose(x),
    "max": lambda x, y: nt.max(x, axis=1),
    "maximum": lambda x, y: nt.maximum(x, y),
    "mean": lambda x, y: nt.mean(x, axis=0),
    "min": lambda x, y: nt.min(x),
    "minimum": lambda x, y: nt.minimum(x, y),
    "multiply": lambda x, y: nt.multiply(x, y),
    "negative": lambda x, y: nt.negative(x),
    "not_equal": lambda x, y: nt.not_equal(x, y),
    "ones_like": lambda x, y: nt.ones_like(x),
    "permute_dims": lambda x, y: nt.permute_dims(x, (1, 0)),
    "pow": lambda x, y: nt.pow(x, y),
    "power": lambda x, y: nt.power(x, 2.0),
    "prod": lambda x, y: nt.prod(x),
    "reciprocal": lambda x, y: nt.reciprocal(x),
    "relu": lambda x, y: nt.relu(x),
    "remainder": lambda x, y: nt.remainder(x, y),
    "reshape": lambda x, y: nt.reshape(x, (1, 3, 4)),
    "retile": lambda x, y: nt.retile(x, (3, 1)),
    "redistribute": lambda x, y: nt.redistribute(x, nt.distribution.replicated, (3, 1)),
    "sigmoid": lambda x, y: nt.sigmoid(x),
    "sign": lambda x, y: nt.sign(x),
    "silu": lambda x, y: nt.silu(x),
    "sin": lambda x, y: nt.sin(x),
    "sqrt": lambda x, y: nt.sqrt(x),
    "square": lambda x, y: nt.square(x),
    "squeeze": lambda x, y: nt.squeeze(nt.reshape(x, (3, 1, 4)), 1),
    "subtract": lambda x, y: nt.subtract(x, y),
    "sum": lambda x, y: nt.sum(x, axis=(0, 1)),
    "tanh": lambda x, y: nt.tanh(x),
    "transpose": lambda x, y: nt.transpose(x),
    "zeros_like": lambda x, y: nt.zeros_like(x),
    # array API creation and manipulation (issue 13)
    "broadcast_arrays": lambda x, y: nt.broadcast_arrays(x, nt.ones((2, 1, 1)))[0],
    "concat": lambda x, y: nt.concat([x, y], axis=1),
    "flip": lambda x, y: nt.flip(x, axis=0),
    "meshgrid": lambda x, y: nt.meshgrid(nt.reshape(x, (-1,)), nt.ones(2))[0],
    "moveaxis": lambda x, y: nt.moveaxis(x, 0, 1),
    "repeat": lambda x, y: nt.repeat(x, 2, axis=1),
    "roll": lambda x, y: nt.roll(x, 1, axis=1),
    "stack": lambda x, y: nt.stack([x, y]),
    "tile": lambda x, y: nt.tile(x, (2, 1)),
    "tril": lambda x, y: nt.tril(x, k=1),
    "triu": lambda x, y: nt.triu(x),
    "unstack": lambda x, y: nt.unstack(x, axis=1)[2],
    "from_dlpack": lambda x, y: nt.from_dlpack(x, copy=True),
    "tensordot": lambda x, y: nt.tensordot(x, y, axes=2),
    "vecdot": lambda x, y: nt.vecdot(x, y, axis=-2),
    "linalg.cholesky": lambda x, y: nt.linalg.cholesky(_square(x, y)),
    "linalg.matmul": lambda x, y: nt.linalg.matmul(x, y, transpose_b=True),
    "linalg.matrix_norm": lambda x, y: nt.linalg.matrix_norm(x),
    "linalg.matrix_transpose": lambda x, y: nt.linalg.matrix_transpose(x),
    "linalg.det": lambda x, y: nt.linalg.det(_square(x, y)),
    "linalg.inv": lambda x, y: nt.linalg.inv(_square(x, y)),
    "linalg.slogdet": lambda x, y: nt.linalg.slogdet(_square(x, y)).logabsdet,
    "linalg.solve": lambda x, y: nt.linalg.solve(_square(x, y), nt.ones((3,), tile_shape=2)),
    "linalg.solve_triangular": lambda x, y: nt.linalg.solve_triangular(_spd(), nt.ones((3,))),
    "linalg.vector_norm": lambda x, y: nt.linalg.vector_norm(x),
    # products and diagonals (issue 14)
    "linalg.cross": lambda x, y: nt.linalg.cross(x, y, axis=-2),
    "linalg.diagonal": lambda x, y: nt.linalg.diagonal(x, offset=1),
    "linalg.matrix_power": lambda x, y: nt.linalg.matrix_power(_square(x, y), -2),
    "linalg.outer": lambda x, y: nt.linalg.outer(nt.sum(x, axis=0), nt.sum(y, axis=1)),
    "linalg.tensordot": lambda x, y: nt.linalg.tensordot(x, y, axes=([0], [0])),
    "linalg.trace": lambda x, y: nt.linalg.trace(x, offset=-1),
    "linalg.vecdot": lambda x, y: nt.linalg.vecdot(x, y),
    # QR and the spectral functions (issue 14)
    "linalg.qr": lambda x, y: nt.linalg.qr(x.mT).R,
    "linalg.eigh": lambda x, y: nt.linalg.eigh(_square(x, y)).eigenvalues,
    "linalg.eigvalsh": lambda x, y: nt.linalg.eigvalsh(_square(x, y)),
    "linalg.svd": lambda x, y: nt.linalg.svd(x).S,
    "linalg.svdvals": lambda x, y: nt.linalg.svdvals(x),
    "linalg.pinv": lambda x, y: nt.linalg.pinv(x),
    "linalg.matrix_rank": lambda x, y: nt.linalg.matrix_rank(x),
    "nn.linear": lambda x, y: F.linear(x, y.mT),
    "nn.embedding": lambda x, y: F.embedding(nt.from_numpy(np.array([2, 0])), x),
    "nn.layer_norm": lambda x, y: F.layer_norm(x, nt.ones((4,)).requires_grad_(), nt.zeros((4,))),
    "nn.softmax": lambda x, y: F.softmax(x),
    "nn.log_softmax": lambda x, y: F.log_softmax(x, axis=0),
    "nn.cross_entropy": lambda x, y: cross_entropy(x, np.array([0, 3, 1])),
    "nn.causal_self_attention": lambda x, y: causal_self_attention(
        nt.reshape(x.retile((3, 4)), (1, 1, 12)), 1
    ),
    "nn.rms_norm": lambda x, y: F.rms_norm(x, nt.ones((4,)).requires_grad_()),
    "nn.swiglu": lambda x, y: F.swiglu(x, y),
    "nn.rotary_embedding": lambda x, y: F.rotary_embedding(
        nt.reshape(x.retile((3, 4)), (1, 3, 4)), nt.ones((3, 2)), nt.zeros((3, 2)), 4
    ),
    "nn.grouped_query_attention": lambda x, y: grouped_query_attention(
        *(nt.reshape(t.retile((3, 4)), (1, 3, 4)) for t in (x, y, y)), 2, 2
    ),
    # indexing, searching, sorting and set functions
    "argmax": lambda x, y: nt.argmax(x, axis=1),
    "argmin": lambda x, y: nt.argmin(x),
    "argsort": lambda x, y: nt.argsort(x, axis=0),
    "nonzero": lambda x, y: nt.nonzero(x > 1)[1],
    "searchsorted": lambda x, y: nt.searchsorted(nt.sort(x.detach()[0]), y),
    "sort": lambda x, y: nt.sort(x),
    "take": lambda x, y: nt.take(x, nt.asarray([2, 0, 2]), axis=1),
    "unique_all": lambda x, y: nt.unique_all(x).values,
    "unique_counts": lambda x, y: nt.unique_counts(x).counts,
    "unique_inverse": lambda x, y: nt.unique_inverse(x).inverse_indices,
    "unique_values": lambda x, y: nt.unique_values(x),
    # element-wise functions and statistics of issue 13 (wave 3)
    "acos": lambda x, y: nt.acos(x * 0.5),
    "acosh": lambda x, y: nt.acosh(x + 1.0),
    "asin": lambda x, y: nt.asin(x * 0.5),
    "asinh": lambda x, y: nt.asinh(x),
    "atan": lambda x, y: nt.atan(x),
    "atanh": lambda x, y: nt.atanh(x * 0.5),
    "cosh": lambda x, y: nt.cosh(x),
    "sinh": lambda x, y: nt.sinh(x),
    "tan": lambda x, y: nt.tan(x),
    "log2": lambda x, y: nt.log2(x),
    "log10": lambda x, y: nt.log10(x),
    "trunc": lambda x, y: nt.trunc(x),
    "round": lambda x, y: nt.round(x),
    "positive": lambda x, y: nt.positive(x),
    "atan2": lambda x, y: nt.atan2(x, y),
    "copysign": lambda x, y: nt.copysign(x, y - 1.0),
    "hypot": lambda x, y: nt.hypot(x, y),
    "logaddexp": lambda x, y: nt.logaddexp(x, y),
    "logical_xor": lambda x, y: nt.logical_xor(x > 1, y > 1),
    "clip": lambda x, y: nt.clip(x, min=0.8, max=y),
    "var": lambda x, y: nt.var(x, axis=0, correction=1),
    "std": lambda x, y: nt.std(x),
    "cumulative_sum": lambda x, y: nt.cumulative_sum(x, axis=1, include_initial=True),
}

# TileTensor operators and methods that compute a tensor from the tensor
METHODS = {
    "__abs__": lambda x, y: abs(x),
    "__add__": lambda x, y: x + y,
    "__radd__": lambda x, y: 1.0 + x,
    "__sub__": lambda x, y: x - y,
    "__rsub__": lambda x, y: 1.0 - x,
    "__mul__": lambda x, y: x * y,
    "__rmul__": lambda x, y: 2.0 * x,
    "__truediv__": lambda x, y: x / y,
    "__rtruediv__": lambda x, y: 1.0 / x,
    "__pow__": lambda x, y: x**y,
    "__rpow__": lambda x, y: 2.0**x,
    "__matmul__": lambda x, y: x @ y.mT,
    "__rmatmul__": lambda x, y: y.mT.__rmatmul__(x),
    "__neg__": lambda x, y: -x,
    "__pos__": lambda x, y: +x,
    "__floordiv__": lambda x, y: x // y,
    "__rfloordiv__": lambda x, y: 3.0 // x,
    "__mod__": lambda x, y: x % y,
    "__rmod__": lambda x, y: 3.0 % x,
    "__eq__": lambda x, y: x == y,
    "__ne__": lambda x, y: x != y,
    "__lt__": lambda x, y: x < y,
    "__le__": lambda x, y: x <= y,
    "__gt__": lambda x, y: x > y,
    "__ge__": lambda x, y: x >= y,
    "__and__": lambda x, y: (x > 1) & (y > 1),
    "__rand__": lambda x, y: True & (y > 1),
    "__or__": lambda x, y: (x > 1) | (y > 1),
    "__ror__": lambda x, y: True | (y > 1),
    "__xor__": lambda x, y: (x > 1) ^ (y > 1),
    "__rxor__": lambda x, y: True ^ (y > 1),
    "__invert__": lambda x, y: ~(x > 1),
    "__lshift__": lambda x, y: x.astype("int64") << 1,
    "__rlshift__": lambda x, y: 1 << x.astype("int64"),
    "__rshift__": lambda x, y: x.astype("int64") >> 1,
    "__rrshift__": lambda x, y: 1 >> x.astype("int64"),
    "to_device": lambda x, y: x.to_device("cpu"),
    "__iadd__": lambda x, y: x.__iadd__(y),
    "__isub__": lambda x, y: x.__isub__(y),
    "__imul__": lambda x, y: x.__imul__(y),
    "__itruediv__": lambda x, y: x.__itruediv__(y),
    "__ifloordiv__": lambda x, y: x.__ifloordiv__(y),
    "__imod__": lambda x, y: x.__imod__(y),
    "__ipow__": lambda x, y: x.__ipow__(y),
    "__iand__": lambda x, y: x.__iand__(y),
    "__ior__": lambda x, y: x.__ior__(y),
    "__ixor__": lambda x, y: x.__ixor__(y),
    "__ilshift__": lambda x, y: x.__ilshift__(1),
    "__irshift__": lambda x, y: x.__irshift__(1),
    "__imatmul__": lambda x, y: x.__imatmul__(y.mT @ y),
    "__getitem__": lambda x, y: x[1:],
    "__setitem__": lambda x, y: (x.__setitem__((0, 1), 1.0), x)[1],
    "astype": lambda x, y: x.astype("float32"),
    "retile": lambda x, y: x.retile((1, 1)),
    "reshape": lambda x, y: x.retile((1, 4)).reshape(12),
    "transpose": lambda x, y: x.transpose(),
    "permute_dims": lambda x, y: x.permute_dims((1, 0)),
    "T": lambda x, y: x.T,
    "mT": lambda x, y: x.mT,
    "sum": lambda x, y: x.sum(axis=0),
    "mean": lambda x, y: x.mean(),
    "max": lambda x, y: x.max(axis=0, keepdims=True),
    "min": lambda x, y: x.min(),
    "prod": lambda x, y: x.prod(axis=1),
}

# public names that are no op on tensors, or take no tensor (nothing to differentiate)
NOT_OPS = {
    "Access",
    "bfloat16",
    "float16",
    "Codelet",
    "DataHandle",
    "InvalidatedError",
    "NoGradientError",
    "RuntimeShutdownError",
    "TaskCancelled",
    "TaskError",
    "TileTensor",
    "Layout",
    "enable_grad",
    "get_runtime",
    "init",
    "is_grad_enabled",
    "no_grad",
    "nranks",
    "rank",
    "runtime_summary",
    "shutdown",
    "trace",
    "wait_all",
    "arange",
    "empty",
    "full",
    "ones",
    "zeros",
    "eye",
    "linspace",
    "bool",
    "complex64",
    "complex128",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "can_cast",
    "Device",
    "finfo",
    "iinfo",
    "isdtype",
    "result_type",
    "e",
    "inf",
    "nan",
    "pi",
}
TENSOR_METHODS_THAT_ARE_NO_OPS = {
    "backward",
    "detach",
    "invalidate",
    "item",
    "requires_grad_",
    "tile",
    "to_numpy",
    "wait",
    "wont_use",
}

# what an op without a dispatch entry does: nn's functions are Functions; from_numpy of a
# tensor goes through astype/retile
UNDISPATCHED = {
    "from_numpy": "rule",
    "asarray": "rule",
    "from_dlpack": "rule",
    "__pos__": "identity",
    "to_device": "identity",
}


def _public_functions():
    names = set()
    for name in nt.__all__:
        value = getattr(nt, name)
        if name in NOT_OPS or inspect.ismodule(value) or name.startswith("__"):
            continue
        names.add(name)
    names |= {f"linalg.{name}" for name in nt.linalg.__all__}
    names |= {
        f"nn.{name}"
        for name, value in vars(F).items()
        if inspect.isfunction(value)
        and not name.startswith("_")
        and value.__module__ == F.__name__
        # context managers (shared_bf16_casts) compute nothing
        and not inspect.isgeneratorfunction(getattr(value, "__wrapped__", None))
    }
    return names


def test_every_public_function_is_classified():
    names = _public_functions() | {"nn.cross_entropy", "nn.causal_self_attention"}
    names |= {"nn.grouped_query_attention"}
    assert names == set(FUNCTIONS)
    for name in nt.random.__all__:  # generators take no tensor: nothing to differentiate
        assert dispatch.dispatch_name(getattr(nt.random, name)) is None


def test_every_tensor_operator_and_method_is_classified():
    defined = {
        name
        for name, value in vars(nt.TileTensor).items()
        if callable(value) or isinstance(value, property)
    }
    data_model = {
        "__init__",
        "__array__",
        "__array_namespace__",
        "__array_function__",
        "__array_ufunc__",
        "__dlpack__",
        "__dlpack_device__",
        "__bool__",
        "__complex__",
        "__index__",
        "__float__",
        "__int__",
        "__len__",
        "__iter__",  # x[0], x[1], ...: each element through getitem
        "__repr__",
        "shape",
        "tile_shape",
        "grid",
        "ndim",
        "size",
        "nbytes",
        "device",
        "handles",  # the tiles (a deferred tensor's tasks submitted on first access)
        "materialise",  # submits a deferred tensor's tasks now (auto fusion): no op
    }
    assert defined - data_model - TENSOR_METHODS_THAT_ARE_NO_OPS == set(METHODS)


def test_every_registered_op_is_reachable_from_the_public_api():
    reached = {dispatch.dispatch_name(getattr(nt, n)) for n in nt.__all__} | {
        dispatch.dispatch_name(getattr(nt.linalg, n)) for n in nt.linalg.__all__
    }
    # method-only ops: the tape's backward, x[key], x[key] = value and the in-place
    # operators (x += y)
    assert set(dispatch.PLAIN) - reached == {"backward", "getitem", "setitem", "inplace"}


def _treatment(name: str, function) -> str:
    if name in UNDISPATCHED:
        return UNDISPATCHED[name]
    if name.startswith("nn."):
        return "rule"
    op = dispatch.dispatch_name(function)
    assert op is not None, f"{name} is not dispatched"
    return rules.treatment(op)


# in-place bitwise operators: a tensor that requires grad is floating, on which they never run
REFUSED_FOR_EVERY_FLOAT = {"__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"}


def _check(name, call, expected):
    x, y = _x(), _x()
    if expected == "refuses":
        with pytest.raises(rules.NoGradientError, match="has no gradient rule") as info:
            call(x, y)
        assert "detach" in str(info.value)
        if name in REFUSED_FOR_EVERY_FLOAT:
            return
        with nt.no_grad():  # the same call without recording works
            call(x, y).wait()
        return
    out = call(x, y)
    if expected == "constant":
        assert not out.requires_grad and out._node is None
        return
    if expected == "identity":
        assert out is x
        return
    assert out.requires_grad and out._node is not None, f"{name} recorded no node"
    nt.sum(out.astype("float64")).backward()
    grads = [t.grad for t in (x, y) if t.grad is not None]
    assert grads and all(g.shape == (3, 4) for g in grads)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_records_a_node_is_constant_or_refuses(name):
    path = name.split(".")
    owner = {"linalg": nt.linalg, "nn": F}.get(path[0], nt) if len(path) == 2 else nt
    function = getattr(owner, path[-1], None)
    _check(name, FUNCTIONS[name], _treatment(name, function))


METHOD_OPS = {
    "__abs__": "abs",
    "__neg__": "negative",
    "__getitem__": "getitem",
    "__setitem__": "setitem",
    "__and__": "bitwise_and",
    "__rand__": "bitwise_and",
    "__or__": "bitwise_or",
    "__ror__": "bitwise_or",
    "__xor__": "bitwise_xor",
    "__rxor__": "bitwise_xor",
    "__invert__": "bitwise_invert",
    "__lshift__": "bitwise_left_shift",
    "__rlshift__": "bitwise_left_shift",
    "__rshift__": "bitwise_right_shift",
    "__rrshift__": "bitwise_right_shift",
    "__iadd__": "inplace",
    "__isub__": "inplace",
    "__imul__": "inplace",
    "__itruediv__": "inplace",
    "__ifloordiv__": "inplace",
    "__imod__": "inplace",
    "__ipow__": "inplace",
    "__iand__": "inplace",
    "__ior__": "inplace",
    "__ixor__": "inplace",
    "__ilshift__": "inplace",
    "__irshift__": "inplace",
    "__imatmul__": "inplace",
    "__eq__": "equal",
    "__ne__": "not_equal",
    "__lt__": "less",
    "__le__": "less_equal",
    "__gt__": "greater",
    "__ge__": "greater_equal",
    "__floordiv__": "floor_divide",
    "__rfloordiv__": "floor_divide",
    "__mod__": "remainder",
    "__rmod__": "remainder",
    "__truediv__": "divide",
    "__rtruediv__": "divide",
    "__sub__": "subtract",
    "__rsub__": "subtract",
    "__mul__": "multiply",
    "__rmul__": "multiply",
    "__pow__": "power",
    "__rpow__": "power",
    "T": "transpose",
    "mT": "matrix_transpose",
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_records_a_node_is_constant_or_refuses(name):
    if name in UNDISPATCHED:
        expected = UNDISPATCHED[name]
    else:
        dunder = name.startswith("__")
        op = METHOD_OPS.get(name, name.strip("_").removeprefix("r") if dunder else name)
        expected = rules.treatment(op)
    _check(name, METHODS[name], expected)


def test_the_error_names_the_op_and_the_way_out():
    x = _x()
    with pytest.raises(TypeError) as info:
        nt.linalg.solve_triangular(_spd(), nt.ones((3,)))
    assert str(info.value) == (
        "numtile.linalg.solve_triangular has no gradient rule; its input requires grad "
        "(use .detach() or nt.no_grad())"
    )
    with pytest.raises(NotImplementedError, match="TileTensor.__setitem__"):
        x[0] = 1.0
    assert nt.prod(x.detach()).shape == ()  # a detached input is fine


def test_grad_mode_off_never_refuses_and_never_records():
    x = _x()
    with nt.no_grad():
        for call in FUNCTIONS.values():
            out = call(x, x)
            assert not out.requires_grad
