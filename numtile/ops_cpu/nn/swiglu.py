"""SwiGLU tile kernels: LLaMA's gated activation ``silu(gate) * up``, forward and backward in
one pass each, over flat tiles.

Operands are bfloat16 bits (uint16: widened in registers, results rounded once to nearest
even) or floats. On bfloat16 gates the sigmoid's exponential runs in float32 without a libm
call (``softmax_exp`` of ``-|gate|``, so whole vectors go through SIMD registers; its float32
error is far below the bfloat16 rounding that follows); on float gates it is the ``sigmoid``
of the element-wise kernels, so a float32 SwiGLU equals ``silu(gate) * up`` of the unfused
ops bit for bit.

>>> import numpy as np
>>> gate, up = np.array([0.0, 1.0], np.float32), np.array([2.0, 3.0], np.float32)
>>> out = np.empty(2, np.float32)
>>> swiglu_apply(gate, up, out)
>>> [round(float(v), 4) for v in out]
[0.0, 2.1932]
"""

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from numtile.ops_cpu.fastmath import select
from numtile.ops_cpu.helpers import as_type_of, wide_vectors
from numtile.ops_cpu.nn.loss import logit as element_value
from numtile.ops_cpu.nn.loss import stored
from numtile.ops_cpu.scalar_math import _sigmoid, softmax_exp


def gate_sigmoid(value, gate):
    """sigmoid(``value``), an element of the array ``gate`` widened (Numba-only)."""
    raise NotImplementedError("gate_sigmoid is only callable from numba-compiled code")


@overload(gate_sigmoid, inline="always")
def _gate_sigmoid(value, gate):
    if gate.dtype != types.uint16:
        return lambda value, gate: _sigmoid(value)

    def fast(value, gate):
        decay = softmax_exp(-abs(value))  # in (0, 1]: no overflow for any input
        one = np.float32(1)
        return select(value >= 0, one, decay) / (one + decay)

    return fast


@numba.njit(nogil=True, cache=True, error_model="numpy")
def swiglu_apply(gate, up, out):
    """out = silu(gate) * up, element by element."""
    wide_vectors()
    for i in range(out.shape[0]):
        g = element_value(gate[i])
        out[i] = stored(g * gate_sigmoid(g, gate) * element_value(up[i]), out)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def swiglu_backward(gate, up, grad, grad_gate, grad_up):
    """The gradients of ``silu(gate) * up``: grad_gate = grad * up * silu'(gate) and
    grad_up = grad * silu(gate)."""
    wide_vectors()
    for i in range(grad.shape[0]):
        g = element_value(gate[i])
        d = element_value(grad[i])
        s = gate_sigmoid(g, gate)
        one = as_type_of(1, g)
        grad_gate[i] = stored(d * element_value(up[i]) * s * (one + g * (one - s)), grad_gate)
        grad_up[i] = stored(d * (g * s), grad_up)
