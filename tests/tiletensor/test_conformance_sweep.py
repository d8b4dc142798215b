"""One conformance sweep over the whole 2023.12 array API (issue 13): every function of
``array_api_strict``'s 2023.12 namespace and of its ``linalg`` extension, for every dtype
category the standard allows it (bool, signed and unsigned integers, real floats, complex; one
dtype each, to compile few kernels), on the same small inputs in numtile and array_api_strict:
a shape the tile divides nowhere, a 0-d array and an empty one for the element-wise functions,
the keywords the standard lists. Values (special values included for real floats), dtypes and
shapes must agree; which dtypes a function allows is array_api_strict's (it raises TypeError
for the others). What does not conform is in ``KNOWN``, with the reason; an entry that starts
passing fails (strict xfail), so the list stays true.

``fft`` is an extension numtile does not have (``nt.fft`` does not exist), so it is not swept."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import numtile as nt

xs = pytest.importorskip("array_api_strict")
VERSION = "2023.12"
_FLAGS = ("set_array_api_strict_flags", "get_array_api_strict_flags")
_FLAGS += ("reset_array_api_strict_flags", "ArrayAPIStrictFlags")


def _in_version(function) -> bool:
    """Whether ``function`` belongs to 2023.12: the later ones raise "requires API version"
    before looking at their arguments."""
    try:
        function()
    except RuntimeError as error:
        return "requires API version" not in str(error)
    except Exception:  # noqa: BLE001  (missing arguments: the function exists)
        return True
    return True


def _names(namespace) -> list[str]:
    with xs.ArrayAPIStrictFlags(api_version=VERSION):
        names = [n for n in namespace.__all__ if n not in _FLAGS]
        functions = [n for n in names if callable(getattr(namespace, n))]
        functions = [n for n in functions if not isinstance(getattr(namespace, n), type)]
        return sorted(n for n in functions if _in_version(getattr(namespace, n)))


MAIN, LINALG = _names(xs), _names(xs.linalg)
ELEMENTWISE = {n for n in MAIN if getattr(xs, n).__module__.endswith("_elementwise_functions")}

CATEGORIES = {
    "bool": np.bool_,
    "signed": np.int64,
    "unsigned": np.uint8,
    "real": np.float64,
    "complex": np.complex128,
}
SHAPE = (5, 3)
_REAL = [-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, 3.5, np.inf, -np.inf, np.nan, 1e-310, -7.0, 0.25]
_REAL_B = [2.0, -0.5, 3.0, 0.0, -np.inf, 1.5, np.nan, -2.0, 0.75, 4.0, -0.0, 1.0, -3.0, 2.5]
_VALUES = {  # per category: the first operand and the second (the divisor, the exponent...)
    "bool": ([True, False, True, True, False, False, True, False], [False, True]),
    "signed": ([-4, -3, -1, 0, 1, 2, 3, 4, 5, -2, 7, 6, -5, 1, 0], [1, 2, 3]),
    "unsigned": ([0, 1, 2, 3, 4, 5, 6, 7, 250, 9, 10, 11, 12, 13, 14], [1, 2, 3]),
    "real": (_REAL + [10.0], _REAL_B + [0.5]),
    "complex": (
        [1 + 2j, -0.5 + 0j, 0j, 3 - 1j, -2 - 2j, 0.25j, 1 + 0j, -1j, 2.5 + 0.5j, -3 + 1j] * 2,
        [2 - 1j, 1 + 0j, -0.5 + 2j, 0.5j, 3 + 3j, -1 - 0.5j],
    ),
}


def data(category: str, shape=SHAPE, second=False) -> np.ndarray:
    """Deterministic values of ``category`` filling ``shape``."""
    values = np.array(_VALUES[category][1 if second else 0], CATEGORIES[category])
    size = int(np.prod(shape))
    return np.resize(values, size).reshape(shape) if size else values[:0].reshape(shape)


class Namespace:
    """numtile or array_api_strict as a recipe sees it: ``xp`` and ``array(numpy data)`` (cut
    into tiles of 2 along every axis on numtile's side: SHAPE's tiles divide nothing)."""

    def __init__(self, xp) -> None:
        self.xp = xp

    def array(self, values: np.ndarray):
        if self.xp is nt:
            return nt.from_numpy(values, tile_shape=tuple(min(2, max(s, 1)) for s in values.shape))
        return xs.asarray(values)


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("array_api_strict.")


def assert_conforms(ours, theirs, path="result", signed_zeros=True) -> None:
    """numtile's result has array_api_strict's structure, dtypes, shapes and values (floats
    within a few ulps, NaNs in the same places, infinities and, unless ``signed_zeros`` is
    False, zeros with the same signs)."""
    if isinstance(theirs, tuple | list):
        assert isinstance(ours, tuple | list) and len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_conforms(a, b, f"{path}[{i}]", signed_zeros)
        return
    if isinstance(theirs, xs._array_object.Array):
        assert isinstance(ours, nt.TileTensor), (path, type(ours))
        assert ours.dtype.name == _dtype_name(theirs.dtype), (path, ours.dtype, theirs.dtype)
        expected, actual = np.asarray(theirs), ours.to_numpy()
        assert actual.shape == expected.shape, (path, actual.shape, expected.shape)
        if expected.dtype.kind not in "fc":
            np.testing.assert_array_equal(actual, expected, err_msg=path)
            return
        np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-300, equal_nan=True)
        for part in ("real", "imag") if expected.dtype.kind == "c" else ("real",):
            a, b = getattr(actual, part), getattr(expected, part)
            signed = (b == 0) & signed_zeros | np.isinf(b)
            np.testing.assert_array_equal(np.signbit(a[signed]), np.signbit(b[signed]), path)
        return
    if hasattr(theirs, "bits"):  # finfo / iinfo
        for field in ("bits", "max", "min", "eps", "smallest_normal"):
            if hasattr(theirs, field):
                assert getattr(ours, field) == getattr(theirs, field), (path, field)
        assert _dtype_name(ours.dtype) == _dtype_name(theirs.dtype), path
        return
    if type(theirs).__name__ == "DType" or "array_api_strict." in str(theirs):
        assert _dtype_name(ours) == _dtype_name(theirs), (path, ours, theirs)
        return
    assert ours == theirs, (path, ours, theirs)


# --- recipes: how each function is called (beyond the element-wise ones, found by signature) -

_SQUARE = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]])


def _square(ns, category):
    """A symmetric (Hermitian for complex) positive definite 3 x 3 matrix."""
    values = _SQUARE.astype(CATEGORIES[category])
    if category == "complex":
        values = values + 0.1j * (np.triu(_SQUARE, 1) - np.tril(_SQUARE, -1))
    return ns.array(values)


def _x(ns, category, shape=SHAPE):
    return ns.array(data(category, shape))


def _y(ns, category, shape=SHAPE):
    return ns.array(data(category, shape, second=True))


def _dtype(ns, category):
    return getattr(ns.xp, np.dtype(CATEGORIES[category]).name)


RECIPES = {
    "__array_namespace_info__": lambda ns, c: sorted(ns.xp.__array_namespace_info__().dtypes()),
    "all": lambda ns, c: [ns.xp.all(_x(ns, c)), ns.xp.all(_x(ns, c), axis=0, keepdims=True)],
    "any": lambda ns, c: [ns.xp.any(_x(ns, c)), ns.xp.any(_x(ns, c), axis=1)],
    "arange": lambda ns, c: [ns.xp.arange(1, 9, 2, dtype=_dtype(ns, c)), ns.xp.arange(5)],
    "argmax": lambda ns, c: [ns.xp.argmax(_x(ns, c)), ns.xp.argmax(_x(ns, c), axis=0)],
    "argmin": lambda ns, c: [ns.xp.argmin(_x(ns, c), axis=1, keepdims=True)],
    "argsort": lambda ns, c: [
        ns.xp.argsort(_x(ns, c), axis=0),
        ns.xp.argsort(_x(ns, c), descending=True, stable=True),
    ],
    "asarray": lambda ns, c: ns.xp.asarray(data(c).tolist(), dtype=_dtype(ns, c)),
    "astype": lambda ns, c: [
        ns.xp.astype(_x(ns, c), ns.xp.complex128),
        ns.xp.astype(_x(ns, c), ns.xp.bool),
    ],
    "broadcast_arrays": lambda ns, c: ns.xp.broadcast_arrays(_x(ns, c), _y(ns, c, (1, 3))),
    "broadcast_to": lambda ns, c: ns.xp.broadcast_to(_y(ns, c, (3,)), (4, 3)),
    "can_cast": lambda ns, c: [
        ns.xp.can_cast(_dtype(ns, c), d) for d in (ns.xp.int64, ns.xp.float32, ns.xp.complex128)
    ],
    "concat": lambda ns, c: [
        ns.xp.concat([_x(ns, c), _y(ns, c, (2, 3))]),
        ns.xp.concat([_x(ns, c), _y(ns, c)], axis=None),
    ],
    "cumulative_sum": lambda ns, c: [
        ns.xp.cumulative_sum(_x(ns, c), axis=0),
        ns.xp.cumulative_sum(_x(ns, c), axis=1, include_initial=True),
    ],
    "empty": lambda ns, c: ns.xp.empty((2, 3), dtype=_dtype(ns, c)).shape,
    "empty_like": lambda ns, c: ns.xp.empty_like(_x(ns, c)).shape,
    "expand_dims": lambda ns, c: ns.xp.expand_dims(_x(ns, c), axis=-1),
    "eye": lambda ns, c: [ns.xp.eye(3, 4, k=1, dtype=_dtype(ns, c)), ns.xp.eye(2)],
    "finfo": lambda ns, c: ns.xp.finfo(_dtype(ns, c)),
    "flip": lambda ns, c: [ns.xp.flip(_x(ns, c)), ns.xp.flip(_x(ns, c), axis=1)],
    "from_dlpack": lambda ns, c: ns.xp.from_dlpack(_x(ns, c)),
    "full": lambda ns, c: ns.xp.full((2, 3), data(c).flat[1].item(), dtype=_dtype(ns, c)),
    "full_like": lambda ns, c: ns.xp.full_like(_x(ns, c), data(c).flat[2].item()),
    "iinfo": lambda ns, c: ns.xp.iinfo(_dtype(ns, c)),
    "isdtype": lambda ns, c: [
        ns.xp.isdtype(_dtype(ns, c), kind)
        for kind in ("bool", "signed integer", "unsigned integer", "integral", "real floating")
        + ("complex floating", "numeric", ("bool", "integral"))
    ],
    "linspace": lambda ns, c: [
        ns.xp.linspace(0, 3, 7, dtype=_dtype(ns, c)),
        ns.xp.linspace(0, 3, 6, endpoint=False, dtype=_dtype(ns, c)),
    ],
    "matmul": lambda ns, c: ns.xp.matmul(_x(ns, c), _y(ns, c, (3, 2))),
    "matrix_transpose": lambda ns, c: ns.xp.matrix_transpose(_x(ns, c)),
    "max": lambda ns, c: [ns.xp.max(_x(ns, c)), ns.xp.max(_x(ns, c), axis=0, keepdims=True)],
    "mean": lambda ns, c: [ns.xp.mean(_x(ns, c)), ns.xp.mean(_x(ns, c), axis=1)],
    "meshgrid": lambda ns, c: ns.xp.meshgrid(_x(ns, c, (3,)), _y(ns, c, (2,)), indexing="ij"),
    "min": lambda ns, c: [ns.xp.min(_x(ns, c), axis=1), ns.xp.min(_x(ns, c), axis=(0, 1))],
    "moveaxis": lambda ns, c: ns.xp.moveaxis(_x(ns, c, (2, 3, 1)), 0, -1),
    "nonzero": lambda ns, c: ns.xp.nonzero(_x(ns, c)),
    "ones": lambda ns, c: ns.xp.ones((2, 3), dtype=_dtype(ns, c)),
    "ones_like": lambda ns, c: ns.xp.ones_like(_x(ns, c)),
    "permute_dims": lambda ns, c: ns.xp.permute_dims(_x(ns, c, (2, 3, 1)), (2, 0, 1)),
    "prod": lambda ns, c: [ns.xp.prod(_x(ns, c, (2, 3)), axis=1), ns.xp.prod(_x(ns, c, (2, 3)))],
    "repeat": lambda ns, c: [
        ns.xp.repeat(_x(ns, c), 2, axis=0),
        ns.xp.repeat(_x(ns, c), ns.xp.asarray([1, 0, 2]), axis=1),
    ],
    "reshape": lambda ns, c: [ns.xp.reshape(_x(ns, c), (3, 5)), ns.xp.reshape(_x(ns, c), (-1,))],
    "result_type": lambda ns, c: [
        ns.xp.result_type(_dtype(ns, c), _x(ns, c)),
        ns.xp.result_type(_x(ns, c), _y(ns, c)),
    ],
    "roll": lambda ns, c: [
        ns.xp.roll(_x(ns, c), 2),
        ns.xp.roll(_x(ns, c), (1, -1), axis=(0, 1)),
    ],
    "searchsorted": lambda ns, c: [
        ns.xp.searchsorted(ns.array(np.sort(data(c, (7,)))), _y(ns, c, (4,))),
        ns.xp.searchsorted(ns.array(np.sort(data(c, (7,)))), _y(ns, c, (4,)), side="right"),
    ],
    "sort": lambda ns, c: [
        ns.xp.sort(_x(ns, c), axis=0),
        ns.xp.sort(_x(ns, c), descending=True),
    ],
    "squeeze": lambda ns, c: ns.xp.squeeze(_x(ns, c, (1, 3, 1)), axis=(0, 2)),
    "stack": lambda ns, c: ns.xp.stack([_x(ns, c), _y(ns, c)], axis=1),
    "std": lambda ns, c: [ns.xp.std(_x(ns, c)), ns.xp.std(_x(ns, c), axis=0, correction=1)],
    "sum": lambda ns, c: [
        ns.xp.sum(_x(ns, c)),
        ns.xp.sum(_x(ns, c), axis=0, keepdims=True),
        ns.xp.sum(_x(ns, c), axis=1, dtype=ns.xp.complex128),
    ],
    "take": lambda ns, c: ns.xp.take(_x(ns, c), ns.xp.asarray([4, 0, 2, 0]), axis=0),
    "tensordot": lambda ns, c: ns.xp.tensordot(_x(ns, c), _y(ns, c, (3, 2)), axes=1),
    "tile": lambda ns, c: ns.xp.tile(_x(ns, c, (2, 3)), (2, 1, 2)),
    "tril": lambda ns, c: [ns.xp.tril(_x(ns, c)), ns.xp.tril(_x(ns, c), k=-1)],
    "triu": lambda ns, c: ns.xp.triu(_x(ns, c), k=1),
    "unique_all": lambda ns, c: ns.xp.unique_all(_x(ns, c)),
    "unique_counts": lambda ns, c: ns.xp.unique_counts(_x(ns, c)),
    "unique_inverse": lambda ns, c: ns.xp.unique_inverse(_x(ns, c)),
    "unique_values": lambda ns, c: ns.xp.unique_values(_x(ns, c)),
    "unstack": lambda ns, c: ns.xp.unstack(_x(ns, c), axis=1),
    "var": lambda ns, c: [ns.xp.var(_x(ns, c), axis=1), ns.xp.var(_x(ns, c), correction=1)],
    "vecdot": lambda ns, c: ns.xp.vecdot(_x(ns, c), _y(ns, c, (3,))),
    "where": lambda ns, c: ns.xp.where(ns.array(data("bool")), _x(ns, c), _y(ns, c, (3,))),
    "zeros": lambda ns, c: ns.xp.zeros((2, 3), dtype=_dtype(ns, c)),
    "zeros_like": lambda ns, c: ns.xp.zeros_like(_x(ns, c)),
}


def _la(name, *arguments, **keywords):
    return lambda ns, c: getattr(ns.xp.linalg, name)(*(a(ns, c) for a in arguments), **keywords)


LINALG_RECIPES = {
    "cholesky": _la("cholesky", _square, upper=False),
    "cross": _la("cross", lambda ns, c: _x(ns, c, (4, 3)), lambda ns, c: _y(ns, c, (4, 3))),
    "det": _la("det", _square),
    "diagonal": _la("diagonal", _x, offset=1),
    "eigh": lambda ns, c: ns.xp.linalg.eigh(_square(ns, c)).eigenvalues,
    "eigvalsh": _la("eigvalsh", _square),
    "inv": _la("inv", _square),
    "matmul": _la("matmul", _x, lambda ns, c: _y(ns, c, (3, 2))),
    "matrix_norm": _la("matrix_norm", _square, ord="fro"),
    "matrix_power": _la("matrix_power", _square, n=3),
    "matrix_rank": _la("matrix_rank", _square),
    "matrix_transpose": _la("matrix_transpose", _x),
    "outer": _la("outer", lambda ns, c: _x(ns, c, (4,)), lambda ns, c: _y(ns, c, (3,))),
    "pinv": _la("pinv", _square),
    "qr": lambda ns, c: [ns.xp.abs(f) for f in ns.xp.linalg.qr(_square(ns, c))],
    "slogdet": _la("slogdet", _square),
    "solve": _la("solve", _square, lambda ns, c: _y(ns, c, (3, 2))),
    "svd": lambda ns, c: [ns.xp.abs(f) for f in ns.xp.linalg.svd(_square(ns, c))],
    "svdvals": _la("svdvals", _square),
    "tensordot": _la("tensordot", _x, lambda ns, c: _y(ns, c, (3, 2)), axes=1),
    "trace": _la("trace", _x, offset=-1),
    "vecdot": _la("vecdot", _x, lambda ns, c: _y(ns, c, (3,))),
    "vector_norm": lambda ns, c: [
        ns.xp.linalg.vector_norm(_x(ns, c)),
        ns.xp.linalg.vector_norm(_x(ns, c), axis=0, ord=1, keepdims=True),
    ],
}

# shapes the element-wise functions also run on: 0-d and empty, tiled as SHAPE is
EXTRA_SHAPES = [(), (0, 3)]


def _elementwise_recipe(name):
    function = getattr(xs, name)
    parameters = inspect.signature(function).parameters
    binary = "x2" in parameters

    def recipe(ns, c):
        results = []
        for shape in [SHAPE, *EXTRA_SHAPES]:
            x = _x(ns, c, shape)
            if name == "clip":
                low, high = data(c, second=True).flat[:2]
                results.append(ns.xp.clip(x, min=min(low, high).item(), max=max(low, high).item()))
            elif binary:
                # broadcast: the second operand is one row (of the empty shape: (3,))
                results.append(getattr(ns.xp, name)(x, _y(ns, c, shape[1:])))
            else:
                results.append(getattr(ns.xp, name)(x))
        return results

    return recipe


def _recipe(namespace: str, name: str):
    if namespace == "linalg":
        return LINALG_RECIPES[name]
    if name in ELEMENTWISE:
        return _elementwise_recipe(name)
    return RECIPES[name]


# --- what does not conform, and why -----------------------------------------------------------

KNOWN: dict[tuple[str, str], str] = {}
# where the standard leaves the sign of a zero open: a product's zero depends on the order of
# its factors (tiles multiply in any order), -0.0 and +0.0 are one unique value, and the
# linalg extension lists no special values (a zero's sign there is the algorithm's)
SIGN_OF_ZERO_OPEN = {"prod", "unique_all", "unique_counts", "unique_inverse", "unique_values"}
# dtypes array_api_strict takes (NumPy's behaviour) where the standard does not define the
# function: numtile raises TypeError there, which the test asserts
ARITHMETIC = "the standard asks for a numeric dtype (bool is not numeric)"
REAL = "the standard asks for a real-valued dtype"
INTEGER = "the standard asks for an integer dtype"
OUTSIDE: dict[tuple[str, str], str] = {
    **{(n, "bool"): ARITHMETIC for n in ("add", "floor_divide", "multiply", "pow", "remainder")},
    ("linalg.matrix_rank", "bool"): "the standard asks for a floating dtype",
    **{(n, "bool"): INTEGER for n in ("bitwise_left_shift", "bitwise_right_shift")},
    **{(n, "bool"): REAL for n in ("maximum", "minimum")},
    **{(n, "complex"): REAL for n in ("greater", "greater_equal", "less", "less_equal")},
    **{(n, "complex"): REAL for n in ("maximum", "minimum")},
    **{(n, "complex"): "the standard asks for bool" for n in ("logical_and", "logical_or")},
    ("logical_xor", "complex"): "the standard asks for bool",
    **{("linspace", c): "the standard asks for a floating dtype" for c in ("bool", "signed")},
    ("linspace", "unsigned"): "the standard asks for a floating dtype",
}


def _cases():
    for namespace, names in (("main", MAIN), ("linalg", LINALG)):
        for name in names:
            label = name if namespace == "main" else f"linalg.{name}"
            for category in CATEGORIES:
                marks = []
                if (label, category) in KNOWN:
                    marks = [pytest.mark.xfail(strict=True, reason=KNOWN[(label, category)])]
                yield pytest.param(namespace, name, category, marks=marks, id=f"{label}-{category}")


def test_every_2023_12_name_is_swept_and_exported():
    assert len(MAIN) > 120 and len(LINALG) == 23
    assert [n for n in MAIN if not hasattr(nt, n)] == []
    assert [n for n in LINALG if not hasattr(nt.linalg, n)] == []
    assert set(RECIPES) | ELEMENTWISE == set(MAIN)
    assert set(LINALG_RECIPES) == set(LINALG)
    assert not hasattr(nt, "fft")  # the extension numtile does not have (reported)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(("namespace", "name", "category"), list(_cases()))
def test_conforms(namespace, name, category):
    recipe = _recipe(namespace, name)
    with xs.ArrayAPIStrictFlags(api_version=VERSION), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            theirs = recipe(Namespace(xs), category)
        except (TypeError, ValueError):  # (finfo of an integer dtype is a ValueError)
            pytest.skip(f"{name} does not take {category} arrays in {VERSION}")
    if (f"{name}" if namespace == "main" else f"linalg.{name}", category) in OUTSIDE:
        with pytest.raises(TypeError):
            recipe(Namespace(nt), category)
        return
    ours = recipe(Namespace(nt), category)
    signed_zeros = namespace == "main" and name not in SIGN_OF_ZERO_OPEN
    assert_conforms(ours, theirs, signed_zeros=signed_zeros)


# --- the array object ---------------------------------------------------------------------------

_NOT_OBJECT_API = {"__new__", "__repr__", "__reduce__", "__buffer__", "__iter__", "__array__"}


def test_the_array_object_has_every_2023_12_attribute_and_method():
    strict_array = xs._array_object.Array
    names = {n for n in vars(strict_array) if not n.startswith("_") or n.endswith("__")}
    names -= _NOT_OBJECT_API | {n for n in names if n.startswith("__") and n in vars(object)}
    assert sorted(n for n in names if not hasattr(nt.TileTensor, n)) == []
    x = nt.from_numpy(np.arange(6.0).reshape(2, 3), tile_shape=(1, 2))
    assert x.__array_namespace__() is nt and x.__array_namespace__(api_version="2022.12") is nt
    with pytest.raises(ValueError, match="2024.12"):
        x.__array_namespace__(api_version="2024.12")
    assert x.to_device("cpu", stream=None) is x and x.device == "cpu"
    exported = np.from_dlpack(x)  # __dlpack__(max_version=, copy=, dl_device=) of 2023.12
    np.testing.assert_array_equal(exported, x.to_numpy())
    capsule = x.__dlpack__(max_version=(1, 0), copy=True, dl_device=(1, 0))
    assert type(capsule).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="host"):
        x.__dlpack__(dl_device=(2, 0))


def test_in_place_matmul_writes_its_own_tiles_and_keeps_shape_and_dtype():
    a = np.arange(9.0).reshape(3, 3)
    x = nt.from_numpy(a, tile_shape=(2, 2))
    alias = x
    x @= nt.from_numpy(a.T, tile_shape=(2, 1))
    assert x is alias
    np.testing.assert_allclose(x.to_numpy(), a @ a.T)
    with pytest.raises(ValueError, match=r"in-place matmul: the product's shape \(3, 2\)"):
        x @= nt.ones((3, 2))
    with pytest.raises(TypeError, match="in-place matmul would change the dtype"):
        y = nt.ones((3, 3), dtype=nt.float32)
        y @= x  # float64 product into float32
    with xs.ArrayAPIStrictFlags(api_version=VERSION):  # the reference refuses alike
        z = xs.ones((3, 3))
        with pytest.raises(ValueError):
            z @= xs.ones((3, 2))
