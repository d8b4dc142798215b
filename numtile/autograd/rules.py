"""Which op gets which gradient treatment: the one place the dispatch table is overridden.

Every op registered in ``numtile.tiletensor.dispatch`` falls in exactly one class:

- a **gradient rule** (``@gradient_rule``): called instead of the plain op when an input
  requires a gradient and grad mode is on; it records a ``Function`` node;
- **composite**: its plain implementation only calls dispatched ops on its inputs, so the
  gradient flows through them (``mean`` is ``sum(x) * (1 / n)``);
- **constant**: its result holds no gradient (booleans, piecewise-constant values such as
  ``floor``, tensors made from an input's shape such as ``zeros_like``);
- everything else **refuses**: with an input that requires a gradient it raises
  ``NoGradientError`` naming the op, instead of cutting the graph silently.

>>> import numtile as nt
>>> x = nt.ones((2, 2)).requires_grad_()
>>> nt.linalg.solve_triangular(x, nt.ones((2,)))
Traceback (most recent call last):
...
numtile.autograd.rules.NoGradientError: numtile.linalg.solve_triangular has no gradient rule; ...
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from numtile.autograd.tape import needs_grad, no_grad
from numtile.tiletensor import dispatch

RULES: dict[str, Callable] = {}
COMPOSITE = frozenset(
    {"mean", "transpose", "matrix_transpose", "expand_dims", "squeeze"}
    # numtile.linalg products built from differentiable tiled ops (issue 14)
    | {"trace", "outer", "vecdot", "tensordot", "matrix_power", "matrix_norm"}
    | {"stack", "tile", "moveaxis", "broadcast_arrays", "meshgrid"}  # issue 13 (Q)
    # element-wise functions and statistics of issue 13 (wave 3)
    | {"clip", "positive", "var", "std"}
)
CONSTANT = frozenset(
    {
        "equal",
        "not_equal",
        "less",
        "less_equal",
        "greater",
        "greater_equal",
        "logical_and",
        "logical_or",
        "floor",
        "ceil",
        "sign",
        "floor_divide",
        "empty_like",
        "zeros_like",
        "ones_like",
        "full_like",
        "isnan",
        "isinf",
        "isfinite",
        "signbit",
        "all",
        "any",
        "logical_not",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "bitwise_invert",
        "bitwise_left_shift",
        "bitwise_right_shift",
        # indexing, searching, sorting: integer results
        "argmax",
        "argmin",
        "argsort",
        "nonzero",
        "searchsorted",
        # element-wise functions of issue 13 (wave 3)
        "trunc",
        "round",
        "logical_xor",
        "matrix_rank",  # an integer count (issue 14)
    }
)


# the rules that follow PyTorch's convention for complex inputs (conjugate Wirtinger
# derivatives, autograd/elementwise.py); every other rule refuses a complex operand
COMPLEX_RULES = frozenset(
    {"add", "subtract", "multiply", "divide", "negative", "power", "square", "reciprocal"}
    | {"exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "abs", "real", "imag", "conj"}
    | {"sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh"}
    | {"atanh", "astype", "sum", "cumulative_sum", "where"}
    # linear rearrangements: their gradients move values, whatever the dtype
    | {"broadcast_to", "concat", "diagonal", "flip", "getitem", "permute_dims", "redistribute"}
    | {"repeat", "reshape", "retile", "roll", "take", "tril", "triu", "unstack"}
    # complex linear algebra (issue 14): products conjugate the other operand, the solve,
    # inverse and determinant take conjugate transposes, the vector norm goes through abs
    # (autograd/linalg.py)
    | {"matmul", "solve", "inv", "det", "vector_norm"}
    # the factorisations' rules take conjugate transposes (autograd/factorizations.py,
    # spectral.py)
    | {"slogdet", "cholesky", "qr", "eigh", "eigvalsh", "svd", "svdvals", "pinv"}
)


class NoGradientError(TypeError, NotImplementedError):
    """An op without a gradient rule got an input that requires a gradient."""


def gradient_rule(*names: str):
    """Register the decorated function as the gradient-recording form of ops ``names``."""

    def register(function: Callable) -> Callable:
        for name in names:
            RULES[name] = function
        return function

    return register


def _wants_grad(args, kwargs) -> bool:
    if needs_grad(*args) or bool(kwargs) and needs_grad(*kwargs.values()):
        return True
    # ops on a sequence of tensors (concat, stack)
    return any(isinstance(a, list | tuple) and needs_grad(*a) for a in args)


def _has_complex(args, kwargs) -> bool:
    values = [*args, *kwargs.values()]
    values += [v for a in args if isinstance(a, list | tuple) for v in a]
    return any(getattr(getattr(v, "dtype", None), "kind", None) == "c" for v in values)


def _recording(name: str, plain: Callable, rule: Callable) -> Callable:
    @functools.wraps(plain)
    def op(*args, **kwargs):
        if _wants_grad(args, kwargs):
            if name not in COMPLEX_RULES and _has_complex(args, kwargs):
                raise NoGradientError(
                    f"{dispatch.PUBLIC_NAMES[name]} has no gradient rule for complex "
                    f"operands; its input requires grad (use .detach() or nt.no_grad())"
                )
            return rule(*args, **kwargs)
        return plain(*args, **kwargs)

    return op


def _constant(plain: Callable) -> Callable:
    @functools.wraps(plain)
    def op(*args, **kwargs):
        with no_grad():  # nothing to record, not even on the way (casts, retiles)
            return plain(*args, **kwargs)

    return op


def _refusing(name: str, plain: Callable) -> Callable:
    public = dispatch.PUBLIC_NAMES[name]

    @functools.wraps(plain)
    def op(*args, **kwargs):
        if _wants_grad(args, kwargs):
            raise NoGradientError(
                f"{public} has no gradient rule; its input requires grad "
                f"(use .detach() or nt.no_grad())"
            )
        return plain(*args, **kwargs)

    return op


def treatment(name: str) -> str:
    """How op ``name`` treats inputs that require a gradient: rule, composite, constant,
    refuses (or tape for ``backward``)."""
    if name == "backward":
        return "tape"
    if name in RULES:
        return "rule"
    if name in COMPOSITE:
        return "composite"
    if name in CONSTANT:
        return "constant"
    return "refuses"


def install(backward: Callable) -> None:
    """Override every op of the dispatch table by its gradient treatment."""
    unknown = (set(RULES) | COMPOSITE | CONSTANT) - set(dispatch.PLAIN)
    assert not unknown, f"gradient treatments for ops that do not exist: {sorted(unknown)}"
    for name, plain in dispatch.PLAIN.items():
        kind = treatment(name)
        if kind == "tape":
            implementation = backward
        elif kind == "rule":
            implementation = _recording(name, plain, RULES[name])
        elif kind == "composite":
            implementation = plain
        elif kind == "constant":
            implementation = _constant(plain)
        else:
            implementation = _refusing(name, plain)
        dispatch.override(name, implementation)


# nt.fuse (issue 13, wave 7): with an input that requires grad, the function runs unfused, so
# each op in it records its own node (complex ones included, by their own rules)
@gradient_rule("fused")
def _fused_unfused(fused, *args):
    return fused.function(*args)


COMPLEX_RULES = COMPLEX_RULES | {"fused"}
