"""NumPy reference implementations that the kernel tests of both backends compare against.

Written for clarity, not speed: each is the textbook formula in float64 (or the input's
precision where NumPy keeps it), with the same names as the op tables of ``numtile.opcodes``.
"""

from __future__ import annotations

import numpy as np


def gelu_tanh(x):
    """GELU with the tanh approximation (GPT-2's)."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


UNARY = {
    "negative": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0),
    "gelu_tanh": gelu_tanh,
    "silu": lambda x: x * sigmoid(x),
    "sin": np.sin,
    "cos": np.cos,
    "square": np.square,
    "reciprocal": np.reciprocal,
    "sigmoid": sigmoid,
    "expm1": np.expm1,
    "log1p": np.log1p,
    "floor": np.floor,
    "ceil": np.ceil,
    "sign": np.sign,
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": np.arcsinh,
    "atan": np.arctan,
    "atanh": np.arctanh,
    "cosh": np.cosh,
    "sinh": np.sinh,
    "tan": np.tan,
    "log2": np.log2,
    "log10": np.log10,
    "trunc": np.trunc,
    "round": np.round,
}

BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "floor_divide": np.floor_divide,
    "remainder": np.remainder,
    "atan2": np.arctan2,
    "copysign": np.copysign,
    "hypot": np.hypot,
    "logaddexp": np.logaddexp,
}

COMPARE = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}

# (reduce over axis 1, combine with the existing out) for each op of REDUCE_OPS
REDUCE = {
    "sum": (lambda x: np.sum(x, axis=1), np.add),
    "max": (lambda x: np.max(x, axis=1), np.maximum),
    "min": (lambda x: np.min(x, axis=1), np.minimum),
    "prod": (lambda x: np.prod(x, axis=1), np.multiply),
    "sumsq": (lambda x: np.sum(x * x, axis=1), np.add),
    "sumabs": (lambda x: np.sum(np.abs(x), axis=1), np.add),
    "maxabs": (lambda x: np.max(np.abs(x), axis=1), np.maximum),
}


def softmax(x, axis):
    """exp(x - max) / sum(exp(x - max)) along ``axis``."""
    exponential = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return exponential / np.sum(exponential, axis=axis, keepdims=True)


def softmax_backward(y, grad_out, axis):
    """The gradient of the softmax input, from its output ``y`` and the upstream gradient."""
    return y * (grad_out - np.sum(grad_out * y, axis=axis, keepdims=True))


def attention(q, k, v, n_heads, scale, causal):
    """Softmax attention of (T, n_heads * D) queries on (S, n_heads * D) keys and values, each
    head in its own D columns; causal: query i sees keys 0..i."""
    width = q.shape[1] // n_heads
    out = np.empty(q.shape)
    for h in range(n_heads):
        columns = slice(h * width, (h + 1) * width)
        scores = scale * q[:, columns] @ k[:, columns].T  # (T, S)
        if causal:
            scores[np.triu_indices(scores.shape[0], 1, scores.shape[1])] = -np.inf
        out[:, columns] = softmax(scores, axis=1) @ v[:, columns]
    return out
