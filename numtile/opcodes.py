"""Op codes: the integer codes that name the variants of one kernel, shared by every backend.

A kernel such as ``unary`` takes its op as an integer (one compiled kernel serves every op);
a tiled op looks the code up here by name, and traces name the task by it (``unary:exp``).
Both ``ops_cpu`` and ``ops_cuda`` import these tables, so neither backend loads the other.
"""

(
    NEGATIVE,
    ABS,
    EXP,
    LOG,
    SQRT,
    TANH,
    RELU,
    GELU_TANH,
    SILU,
    SIN,
    COS,
    SQUARE,
    RECIPROCAL,
    SIGMOID,
    EXPM1,
    LOG1P,
    FLOOR,
    CEIL,
    SIGN,
) = range(19)
UNARY_OPS = {
    "negative": NEGATIVE,
    "abs": ABS,
    "exp": EXP,
    "log": LOG,
    "sqrt": SQRT,
    "tanh": TANH,
    "relu": RELU,
    "gelu_tanh": GELU_TANH,
    "silu": SILU,
    "sin": SIN,
    "cos": COS,
    "square": SQUARE,
    "reciprocal": RECIPROCAL,
    "sigmoid": SIGMOID,
    "expm1": EXPM1,
    "log1p": LOG1P,
    "floor": FLOOR,
    "ceil": CEIL,
    "sign": SIGN,
}
# the rest of the array API's element-wise functions (appended: codes never change)
(
    ACOS,
    ACOSH,
    ASIN,
    ASINH,
    ATAN,
    ATANH,
    COSH,
    SINH,
    TAN,
    LOG2,
    LOG10,
    TRUNC,
    ROUND,
) = range(19, 32)
UNARY_OPS.update(
    acos=ACOS,
    acosh=ACOSH,
    asin=ASIN,
    asinh=ASINH,
    atan=ATAN,
    atanh=ATANH,
    cosh=COSH,
    sinh=SINH,
    tan=TAN,
    log2=LOG2,
    log10=LOG10,
    trunc=TRUNC,
    round=ROUND,
)

(
    RELU_BACKWARD,
    GELU_TANH_BACKWARD,
    SILU_BACKWARD,
    TANH_BACKWARD,
    SIGMOID_BACKWARD,
    EXP_BACKWARD,
    LOG_BACKWARD,
    SQRT_BACKWARD,
) = range(8)
UNARY_BACKWARD_OPS = {
    "relu": RELU_BACKWARD,
    "gelu_tanh": GELU_TANH_BACKWARD,
    "silu": SILU_BACKWARD,
    "tanh": TANH_BACKWARD,
    "sigmoid": SIGMOID_BACKWARD,
    "exp": EXP_BACKWARD,
    "log": LOG_BACKWARD,
    "sqrt": SQRT_BACKWARD,
}

ADD, SUBTRACT, MULTIPLY, DIVIDE, MAXIMUM, MINIMUM, POWER, FLOOR_DIVIDE, REMAINDER = range(9)
BINARY_OPS = {
    "add": ADD,
    "subtract": SUBTRACT,
    "multiply": MULTIPLY,
    "divide": DIVIDE,
    "maximum": MAXIMUM,
    "minimum": MINIMUM,
    "power": POWER,
    "floor_divide": FLOOR_DIVIDE,
    "remainder": REMAINDER,
}
ATAN2, COPYSIGN, HYPOT, LOGADDEXP = range(9, 13)
BINARY_OPS.update(atan2=ATAN2, copysign=COPYSIGN, hypot=HYPOT, logaddexp=LOGADDEXP)
# the codes of BINARY_OPS that the ``binary_math`` kernel runs (floats only), not ``binary``
BINARY_MATH = (ATAN2, COPYSIGN, HYPOT, LOGADDEXP)

EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, LOGICAL_AND, LOGICAL_OR = range(8)
COMPARE_OPS = {
    "equal": EQUAL,
    "not_equal": NOT_EQUAL,
    "less": LESS,
    "less_equal": LESS_EQUAL,
    "greater": GREATER,
    "greater_equal": GREATER_EQUAL,
    "logical_and": LOGICAL_AND,
    "logical_or": LOGICAL_OR,
}
LOGICAL_XOR = 8
COMPARE_OPS.update(logical_xor=LOGICAL_XOR)

SUM, MAX, MIN, PROD, SUMSQ, SUMABS, MAXABS = range(7)
REDUCE_OPS = {
    "sum": SUM,
    "max": MAX,
    "min": MIN,
    "prod": PROD,
    "sumsq": SUMSQ,
    "sumabs": SUMABS,
    "maxabs": MAXABS,
}
# the reductions of the moduli |z| of complex tiles into real partials (the vector norms)
MODULUS_REDUCE_OPS = {name: REDUCE_OPS[name] for name in ("sumsq", "sumabs", "maxabs")}

ISNAN, ISINF, ISFINITE, SIGNBIT = range(4)
PREDICATE_OPS = {"isnan": ISNAN, "isinf": ISINF, "isfinite": ISFINITE, "signbit": SIGNBIT}

BITWISE_AND, BITWISE_OR, BITWISE_XOR, BITWISE_LEFT_SHIFT, BITWISE_RIGHT_SHIFT = range(5)
BITWISE_OPS = {
    "bitwise_and": BITWISE_AND,
    "bitwise_or": BITWISE_OR,
    "bitwise_xor": BITWISE_XOR,
    "bitwise_left_shift": BITWISE_LEFT_SHIFT,
    "bitwise_right_shift": BITWISE_RIGHT_SHIFT,
}

# unary ops of complex tiles (``complex_unary``; ``complex_part`` for abs, real and imag,
# which write a real tile)
(
    COMPLEX_NEGATIVE,
    COMPLEX_ABS,
    COMPLEX_EXP,
    COMPLEX_LOG,
    COMPLEX_SQRT,
    COMPLEX_SQUARE,
    COMPLEX_RECIPROCAL,
    COMPLEX_CONJ,
    COMPLEX_REAL,
    COMPLEX_IMAG,
) = range(10)
COMPLEX_UNARY_OPS = {
    "negative": COMPLEX_NEGATIVE,
    "abs": COMPLEX_ABS,
    "exp": COMPLEX_EXP,
    "log": COMPLEX_LOG,
    "sqrt": COMPLEX_SQRT,
    "square": COMPLEX_SQUARE,
    "reciprocal": COMPLEX_RECIPROCAL,
    "conj": COMPLEX_CONJ,
    "real": COMPLEX_REAL,
    "imag": COMPLEX_IMAG,
}
# the functions of complex_math.py (``complex_math``, a kernel of their own: compiled only
# when one of them is first used)
(
    COMPLEX_EXPM1,
    COMPLEX_LOG1P,
    COMPLEX_LOG2,
    COMPLEX_LOG10,
    COMPLEX_SIN,
    COMPLEX_COS,
    COMPLEX_TAN,
    COMPLEX_SINH,
    COMPLEX_COSH,
    COMPLEX_TANH,
    COMPLEX_SIGN,
    COMPLEX_ROUND,
) = range(10, 22)
COMPLEX_MATH = {
    "expm1": COMPLEX_EXPM1,
    "log1p": COMPLEX_LOG1P,
    "log2": COMPLEX_LOG2,
    "log10": COMPLEX_LOG10,
    "sin": COMPLEX_SIN,
    "cos": COMPLEX_COS,
    "tan": COMPLEX_TAN,
    "sinh": COMPLEX_SINH,
    "cosh": COMPLEX_COSH,
    "tanh": COMPLEX_TANH,
    "sign": COMPLEX_SIGN,
    "round": COMPLEX_ROUND,
}
(
    COMPLEX_ASIN,
    COMPLEX_ACOS,
    COMPLEX_ATAN,
    COMPLEX_ASINH,
    COMPLEX_ACOSH,
    COMPLEX_ATANH,
) = range(22, 28)
COMPLEX_MATH.update(
    asin=COMPLEX_ASIN,
    acos=COMPLEX_ACOS,
    atan=COMPLEX_ATAN,
    asinh=COMPLEX_ASINH,
    acosh=COMPLEX_ACOSH,
    atanh=COMPLEX_ATANH,
)
# binary ops and comparisons of complex tiles (codes of BINARY_OPS and COMPARE_OPS)
COMPLEX_BINARY = ("add", "subtract", "multiply", "divide", "power")
COMPLEX_COMPARE = ("equal", "not_equal")

UNIFORM, NORMAL = range(2)
RANDOM_DISTRIBUTIONS = {"uniform": UNIFORM, "normal": NORMAL}

TABLES = {
    "unary": UNARY_OPS,
    "unary_backward": UNARY_BACKWARD_OPS,
    "binary": BINARY_OPS,
    "compare": COMPARE_OPS,
    "reduce": REDUCE_OPS,
    "random": RANDOM_DISTRIBUTIONS,
    "predicate": PREDICATE_OPS,
    "bitwise": BITWISE_OPS,
    "complex_unary": COMPLEX_UNARY_OPS,
    "complex_math": COMPLEX_MATH,
}


def op_name(table: dict[str, int], code: int) -> str:
    """The name of ``code`` in ``table`` (``op_name(UNARY_OPS, EXP) == "exp"``)."""
    for name, value in table.items():
        if value == code:
            return name
    raise KeyError(f"no op with code {code}")


# how sorting kernels read the bits of a tile (viewed as unsigned integers of its width):
# as unsigned integers (and booleans), two's-complement integers, IEEE floats (float16 among
# them), or bfloat16 (a float of 16 bits with float32's exponent)
SORT_UNSIGNED, SORT_SIGNED, SORT_FLOAT, SORT_BFLOAT16 = range(4)
SORT_KEYS = {
    "unsigned": SORT_UNSIGNED,
    "signed": SORT_SIGNED,
    "float": SORT_FLOAT,
    "bfloat16": SORT_BFLOAT16,
}
