"""The kernel of a value assigned through a boolean mask (``x[mask] = value``): ``where``
with its output as the kept operand, written in place."""

import numba

from numtile.ops_cpu.helpers import is_c_contiguous, unsigned
from numtile.ops_cpu.logic import _offset


@numba.njit(nogil=True, cache=True, error_model="numpy")
def assign_where(condition, c_strides, value, value_strides, out, shape):
    """out = value where condition, out elsewhere, ``condition`` and ``value`` broadcast over
    ``shape`` (element strides, 0 on broadcast axes; out is C-ordered)."""
    size = out.size
    if value.size == 1 and condition.size == size and is_c_contiguous(c_strides, shape):
        # one value through a whole mask: a select LLVM vectorises (one array read and
        # written, so no overlap check falls back to scalar code as where(c, v, out, out) does)
        chosen = value[0]
        for i in range(size):
            kept = out[i]
            out[i] = chosen if condition[i] else kept
        return
    for i in range(size):
        kept = out[i]
        chosen = value[unsigned(_offset(i, shape, value_strides))]
        out[i] = chosen if condition[unsigned(_offset(i, shape, c_strides))] else kept
