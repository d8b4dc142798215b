"""``ops_cpu.empty``: scratch buffers reused per thread, never while an array still uses them."""

import threading

import numpy as np
import pytest

from numtile.ops_cpu import scratch


@pytest.fixture(autouse=True)
def fresh_cache():
    scratch._cache.buffers = []
    yield
    scratch._cache.buffers = []


def test_a_freed_scratch_buffer_is_handed_out_again_whatever_its_shape_and_dtype():
    a = scratch.empty((512, 256), np.float32)
    address = a.ctypes.data
    del a
    b = scratch.empty(300_000, np.uint8)  # smaller: carved from the same buffer
    assert b.ctypes.data == address and b.shape == (300_000,) and b.dtype == np.uint8
    b[:] = 7
    assert (b == 7).all()


def test_a_buffer_in_use_is_never_handed_out_twice():
    shape = (256, 256)
    first = scratch.empty(shape, np.float64)
    view = first[10:20]  # a view keeps the buffer in use after the array itself is gone
    del first
    second = scratch.empty(shape, np.float64)
    assert not np.shares_memory(view, second)
    view[:] = 1.0
    second[:] = 2.0
    assert (view == 1.0).all() and (second == 2.0).all()


def test_the_smallest_free_buffer_that_fits_is_chosen():
    big = scratch.empty(4 << 20, np.uint8)
    small = scratch.empty(1 << 20, np.uint8)
    big_address, small_address = big.ctypes.data, small.ctypes.data
    del big, small
    assert scratch.empty(1 << 19, np.uint8).ctypes.data == small_address
    assert scratch.empty(2 << 20, np.uint8).ctypes.data == big_address


def test_small_scratch_is_plain_numpy_and_not_kept():
    a = scratch.empty(100, np.float32)
    assert a.base is None and a.shape == (100,)
    assert scratch._cache.buffers == []


def test_free_buffers_beyond_the_cap_are_let_go(monkeypatch):
    monkeypatch.setattr(scratch, "CACHE_BYTES", 3 << 20)
    held = [scratch.empty(1 << 20, np.uint8) for _ in range(5)]  # all in use: all kept
    assert sum(b.nbytes for b in scratch._cache.buffers) == 5 << 20
    del held
    scratch.empty(1 << 20, np.uint8)
    assert sum(b.nbytes for b in scratch._cache.buffers) <= 3 << 20


def test_each_thread_keeps_its_own_buffers():
    mine = scratch.empty(1 << 20, np.uint8)
    address = mine.ctypes.data
    del mine
    seen = []
    thread = threading.Thread(target=lambda: seen.append(scratch.empty(1 << 20, np.uint8)))
    thread.start()
    thread.join()
    assert seen[0].ctypes.data != address
    assert scratch.empty(1 << 20, np.uint8).ctypes.data == address


def test_the_bf16_gemm_fallback_widens_into_this_threads_scratch():
    import ml_dtypes

    from numtile.ops_cpu.low_precision import gemm_bf16

    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 384)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((384, 200)).astype(ml_dtypes.bfloat16)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    for _ in range(2):
        c = np.zeros((256, 200), np.float32)
        gemm_bf16(a.view(np.uint16), b.view(np.uint16), c, False, False, 1.0, 0.0)
        np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)
        if _ == 0:
            kept = [buffer.ctypes.data for buffer in scratch._cache.buffers]
    # both float32 copies came from this thread's buffers, and the second call reused them
    assert sorted(buffer.nbytes for buffer in scratch._cache.buffers) == [200 * 384 * 4, a.size * 4]
    assert [buffer.ctypes.data for buffer in scratch._cache.buffers] == kept


def test_empty_many_carves_aligned_arrays_that_do_not_overlap():
    arrays = scratch.empty_many(((100, 3), np.float32), (7, np.float64), ((256, 256), np.uint16))
    assert [a.shape for a in arrays] == [(100, 3), (7,), (256, 256)]
    assert [a.dtype for a in arrays] == [np.float32, np.float64, np.uint16]
    assert all(a.ctypes.data % scratch.ALIGN == 0 and a.flags.c_contiguous for a in arrays)
    for value, a in enumerate(arrays):
        a[...] = value
    assert all((a == value).all() for value, a in enumerate(arrays))
    assert len(scratch._cache.buffers) == 1  # one buffer for all three


def _attention_scratch(kernel, dtype, count):
    """The thread's scratch buffers after each of ``count`` calls of an attention ``kernel``
    (forward or backward, on float32/64 tiles or bfloat16 bits: "bf16") on the same 256 x 256
    block, in a fresh thread (its own, empty cache), and the outputs of each call."""
    from numtile.ops_cpu import nn

    rng = np.random.default_rng(0)
    values = np.float32 if dtype == "bf16" else dtype
    q, dout = (rng.standard_normal((256, 128)).astype(values) for _ in range(2))
    k, v = (rng.standard_normal((256, 64)).astype(values) for _ in range(2))
    suffix = ""
    if dtype == "bf16":
        suffix = "_bf16"
        q, dout, k, v = ((x.view(np.uint32) >> 16).astype(np.uint16) for x in (q, dout, k, v))
    lse, delta = rng.standard_normal((256, 2)) + 5, rng.standard_normal((256, 2))
    seen, outputs = [], []

    def calls():
        for _ in range(count):
            if kernel == "forward":
                m, l = np.full((256, 2), -np.inf), np.zeros((256, 2))
                out = (m, l, np.zeros(q.shape, values))
                getattr(nn, "attention_forward_block" + suffix)(
                    q, k, v, *out, 2, 0.125, 0, 0, True, 2
                )
            else:
                out = (
                    np.zeros(q.shape, values),
                    np.zeros(k.shape, values),
                    np.zeros(k.shape, values),
                )
                args = (q, k, v, dout, lse, delta, *out, 2, 0.125, 0, 0, True, 2)
                getattr(nn, "attention_backward_block" + suffix)(*args)
            outputs.append(out)
            seen.append([(b.ctypes.data, b.nbytes) for b in scratch._cache.buffers])

    thread = threading.Thread(target=calls)
    thread.start()
    thread.join()
    return seen, outputs


@pytest.mark.parametrize("kernel", ["forward", "backward"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, "bf16"])
def test_the_attention_kernels_work_in_this_threads_scratch(kernel, dtype):
    # their 256 x 256 scores (256 KiB in float32) would be fresh pages at every call where
    # malloc maps them (under a host memory limit)
    from numtile.ops_cpu import nn

    if dtype == "bf16" and not nn.bf16_attention_ready():
        pytest.skip("needs oneMKL's bf16 GEMM")
    # compiled first, in another thread: a compilation may leave a reference cycle holding
    # the call's buffer until the collector runs (seen once in CI)
    _attention_scratch(kernel, dtype, 1)
    seen, outputs = _attention_scratch(kernel, dtype, 3)
    scores = 256 * 256 * 4
    assert sum(nbytes for _, nbytes in seen[0]) >= scores  # the first call took a buffer
    assert seen[1] == seen[0] and seen[2] == seen[0]  # the next ones reused it
    for later in outputs[1:]:  # the same inputs each time: the same bits
        assert all(np.array_equal(a, b) for a, b in zip(outputs[0], later))
