"""The scan kernels of cumulative_sum (numtile.ops_cpu.scan, and the CUDA twins under the
simulator) against NumPy: every (pre, n, post) view of a tile, the carries between tiles and
the scan of a tile from its carry."""

import numpy as np
import pytest

from tests.kernels import Host

# (pre, n, post): the scanned axis innermost, in the middle, outermost, of length 1 and 0
PLANS = [(1, 37, 1), (3, 13, 1), (2, 5, 7), (1, 9, 19), (4, 1, 3), (3, 0, 2)]
DTYPES = [np.float64, np.float32, np.int64, np.uint64, np.complex128]


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 9, shape) if np.dtype(dtype).kind == "u" else rng.normal(size=shape)
    if np.dtype(dtype).kind == "i":
        data = rng.integers(-9, 10, shape)
    if np.dtype(dtype).kind == "c":
        data = data + 1j * rng.normal(size=shape)
    return data.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("plan", PLANS, ids=str)
def test_cumulative_sum_matches_numpy(backend, plan, dtype):
    x = _data(plan, dtype)
    out = np.full(plan, 7, dtype)
    backend.run("cumulative_sum", x.reshape(-1), out.reshape(-1), *(Host(v) for v in plan))
    np.testing.assert_allclose(out, np.cumsum(x, axis=1), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
@pytest.mark.parametrize("plan", [(3, 13, 1), (2, 5, 7), (4, 1, 3)], ids=str)
def test_carries_join_two_tiles_into_one_scan(backend, plan, dtype):
    pre, n, post = plan
    first, second = _data(plan, dtype, 1), _data(plan, dtype, 2)
    scanned = [np.cumsum(first, axis=1), np.cumsum(second, axis=1)]
    carry_in = _data((pre, 1, post), dtype, 3)
    carry = np.zeros((pre, 1, post), dtype)
    sizes = tuple(Host(v) for v in plan)
    backend.run(
        "scan_carry", scanned[0].reshape(-1), carry_in.reshape(-1), carry.reshape(-1), *sizes
    )
    np.testing.assert_allclose(carry, carry_in + scanned[0][:, -1:], rtol=1e-12)
    out = np.full(plan, 7, dtype)
    backend.run(
        "cumulative_sum_from", second.reshape(-1), carry.reshape(-1), out.reshape(-1), *sizes
    )
    expected = np.cumsum(np.concatenate([first, second], axis=1), axis=1)[:, n:] + carry_in
    np.testing.assert_allclose(out, expected, rtol=1e-12)
