"""The test suite's runner of simulated blocks (tests/cudasim.py, ``quick_blocks``): the threads
of a block wait for each other at ``syncthreads`` on a barrier, threads are reused from launch
to launch, and a failing thread raises with its indices as the simulator words it."""

import numpy as np
import pytest
from numba import config, cuda

pytestmark = pytest.mark.skipif(not config.ENABLE_CUDASIM, reason="the simulator's blocks")


def _identities(out):
    # each thread writes where it is; a shared sum over the block proves the barrier
    total = cuda.shared.array(1, np.int64)
    t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
    b = cuda.blockIdx.x + cuda.gridDim.x * cuda.blockIdx.y
    if t == 0:
        total[0] = 0
    cuda.syncthreads()
    cuda.atomic.add(total, 0, t + 1)
    cuda.syncthreads()
    out[b, t, 0] = t
    out[b, t, 1] = b
    out[b, t, 2] = total[0]
    out[b, t, 3] = cuda.syncthreads_count(t % 2)


def test_blocks_see_their_indices_and_wait_at_the_barrier():
    from numba.cuda.simulator import kernel

    from tests.cudasim import _POOL, _run_block

    assert kernel.BlockManager.run is _run_block  # conftest's quick_blocks()
    launch = cuda.jit(_identities)
    for grid, block in (((2, 3), (3, 2)), ((1, 1), (5, 1)), ((3, 1), (2, 2))):
        blocks, threads = grid[0] * grid[1], block[0] * block[1]
        out = np.full((blocks, threads, 4), -1, np.int64)
        launch[grid, block](out)
        assert (out[..., 0] == np.arange(threads)).all()
        assert (out[..., 1] == np.arange(blocks)[:, None]).all()
        assert (out[..., 2] == threads * (threads + 1) // 2).all()
        assert (out[..., 3] == threads // 2).all()
        idle = len(_POOL._idle)
        assert idle >= threads
        launch[grid, block](out)
        assert len(_POOL._idle) == idle  # the same threads ran it, and are idle again


def _early_exit(out):
    t = cuda.threadIdx.x
    if t >= 2:
        return  # the barrier then waits for the threads still running only
    for step in range(3):
        cuda.syncthreads()
        out[t] += step + 1


def test_a_thread_that_ends_leaves_the_barrier():
    out = np.zeros(6, np.int64)
    cuda.jit(_early_exit)[1, 6](out)
    assert out.tolist() == [6, 6, 0, 0, 0, 0]


def _failing(out):
    t = cuda.threadIdx.x
    if cuda.blockIdx.x == 1 and t == 3:
        raise ValueError("thread three")
    cuda.syncthreads()
    out[cuda.blockIdx.x, t] = 1


def test_a_failing_thread_raises_with_its_indices_and_aborts_its_block():
    out = cuda.to_device(np.zeros((2, 4), np.int64))  # (a host array is not copied back)
    with pytest.raises(ValueError, match=r"tid=\[3, 0, 0\] ctaid=\[1, 0, 0\]: thread three"):
        cuda.jit(_failing)[2, 4](out)
    # block 0 ran; block 1's threads were aborted at their syncthreads
    assert out.copy_to_host().tolist() == [[1] * 4, [0] * 4]
    again = np.zeros(5, np.int64)
    cuda.jit(_early_exit)[1, 5](again)  # the pooled threads run the next launch
    assert again.tolist() == [6, 6, 0, 0, 0]
