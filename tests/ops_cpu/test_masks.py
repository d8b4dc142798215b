"""The in-place kernel of ``x[mask] = value`` (numtile.ops_cpu.masks, and its CUDA twin under
the simulator) against NumPy's masked assignment: a whole mask with one value, and a mask and
values that broadcast."""

import numpy as np
import pytest

from numtile.tiletensor.elementwise_core import element_strides
from tests.kernels import Host

# (condition shape, value shape) over an output of shape (3, 4)
CASES = [((3, 4), ()), ((3, 1), (1, 4)), ((1, 4), (3, 4))]


@pytest.mark.parametrize(("condition_shape", "value_shape"), CASES, ids=str)
def test_assign_where_matches_numpy_masked_assignment(backend, condition_shape, value_shape):
    rng = np.random.default_rng(0)
    shape = (3, 4)
    condition = rng.random(condition_shape) > 0.5
    value = rng.standard_normal(value_shape).astype(np.float32)
    out = rng.standard_normal(shape).astype(np.float32)
    expected = out.copy()
    mask = np.broadcast_to(condition, shape)
    expected[mask] = np.broadcast_to(value, shape)[mask]
    strides = [Host(element_strides(s, shape)) for s in (condition.shape, value.shape)]
    backend.run(
        "assign_where",
        condition.reshape(-1),
        strides[0],
        value.reshape(-1),
        strides[1],
        out.reshape(-1),
        Host(np.array(shape, np.int64)),
    )
    np.testing.assert_array_equal(out, expected)
