"""numtile.ops_cuda.nn against its ops_cpu twins, under the CUDA simulator.

Each case runs the CPU kernel on host copies and the CUDA launcher on device copies of the same
arrays, then compares every array argument (outputs, accumulators, and inputs left untouched).
Sizes are not multiples of the test block (8) and exceed the simulator's 16 threads, so the
grid-stride loops wrap. The last test compiles every kernel to PTX for a real GPU (sm_90) in a
process without the simulator, which is more permissive than numba.cuda's compiler.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from numtile import ops_cpu, ops_cuda
from tests import reference

FLOATS = [np.float32, np.float64]
TOLERANCE = {
    np.dtype(np.float32): {"rtol": 2e-5, "atol": 2e-5},
    np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-12},
}
EPS = 1e-5


def random(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


class Twins:
    """The same arguments on the host (for the CPU kernel) and on the device (for the CUDA one)."""

    def __init__(self, *args):
        self.host = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
        self.device = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]

    def run(self, name):
        """Run kernel ``name`` on both sides (each side's arrays are updated in place)."""
        getattr(ops_cpu.nn, name)(*self.host)
        getattr(ops_cuda.nn, name)(*self.device, stream=0)
        cuda.synchronize()

    def check(self, tolerance_dtype, **override):
        """Every array argument agrees across the two sides (floats within the tolerance of
        ``tolerance_dtype``, other dtypes exactly)."""
        for position, (expected, device) in enumerate(zip(self.host, self.device)):
            if not isinstance(expected, np.ndarray):
                continue
            actual = device.copy_to_host()
            assert actual.dtype == expected.dtype
            message = f"argument {position}"
            if expected.dtype.kind == "f":
                tolerance = {**TOLERANCE[np.dtype(tolerance_dtype)], **override}
                np.testing.assert_allclose(actual, expected, err_msg=message, **tolerance)
            else:
                np.testing.assert_array_equal(actual, expected, err_msg=message)


# --- flash attention ---------------------------------------------------------------------------

HEADS, WIDTH, SCALE = 2, 4, 0.4  # SCALE is not 1/sqrt(WIDTH)
Q_START, N_QUERIES, N_KEYS = 3, 9, 14  # queries 3..11
# in this order: some rows first see nothing; causal, keys 12..13 are seen by no query
KEY_BLOCKS = [(4, 9), (0, 4), (12, 14), (9, 12)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", FLOATS)
def test_attention_forward_and_backward(dtype, causal):
    columns = HEADS * WIDTH
    q = random((N_QUERIES, columns), dtype, 0)
    keys = random((N_KEYS, columns), dtype, 1)
    values = random((N_KEYS, columns), dtype, 2)
    m = np.full((N_QUERIES, HEADS), -np.inf)
    l = np.zeros((N_QUERIES, HEADS))
    acc = np.zeros((N_QUERIES, columns), dtype)
    state = Twins(q, m, l, acc)
    host_q, host_m, host_l, host_acc = state.host
    dev_q, dev_m, dev_l, dev_acc = state.device
    for start, stop in KEY_BLOCKS:
        block = Twins(keys[start:stop].copy(), values[start:stop].copy())
        args = (HEADS, SCALE, Q_START, start, causal)
        ops_cpu.nn.attention_forward_block(host_q, *block.host, host_m, host_l, host_acc, *args)
        ops_cuda.nn.attention_forward_block(dev_q, *block.device, dev_m, dev_l, dev_acc, *args)
        cuda.synchronize()
        state.check(dtype)
    if causal:  # every row saw a key
        assert np.isfinite(host_m).all()

    finalize = Twins(
        host_acc, host_m, host_l, random(acc.shape, dtype, 3), random(m.shape, np.float64, 4)
    )
    ops_cpu.nn.attention_forward_finalize(*finalize.host, HEADS)
    ops_cuda.nn.attention_forward_finalize(*finalize.device, HEADS)
    cuda.synchronize()
    finalize.check(dtype)
    out, lse = finalize.host[3], finalize.host[4]

    dout = random(out.shape, dtype, 5)
    delta = Twins(dout, out, random(m.shape, np.float64, 6), HEADS)
    delta.run("attention_backward_delta")
    delta.check(dtype)

    # accumulators start non-zero: the kernel adds to them
    dq = random(q.shape, dtype, 7)
    for start, stop in KEY_BLOCKS:
        backward = Twins(
            q,
            keys[start:stop].copy(),
            values[start:stop].copy(),
            dout,
            lse,
            delta.host[2],
            dq,
            random((stop - start, columns), dtype, 8),
            random((stop - start, columns), dtype, 9),
            HEADS,
            SCALE,
            Q_START,
            start,
            causal,
        )
        backward.run("attention_backward_block")
        backward.check(dtype)
        dq = backward.host[6]


def test_attention_forward_matches_softmax():
    """Guards against the two kernels agreeing on a wrong result: one block, causal."""
    q, k, v = (random((5, HEADS * WIDTH), np.float64, seed) for seed in (10, 11, 12))
    twins = Twins(q, k, v, np.full((5, HEADS), -np.inf), np.zeros((5, HEADS)), np.zeros(q.shape))
    ops_cuda.nn.attention_forward_block(*twins.device, HEADS, SCALE, 0, 0, True)
    out, lse = cuda.device_array(q.shape), cuda.device_array((5, HEADS))
    _, _, _, m, l, acc = twins.device
    ops_cuda.nn.attention_forward_finalize(acc, m, l, out, lse, HEADS)
    expected = reference.attention(q, k, v, HEADS, SCALE, causal=True)
    np.testing.assert_allclose(out.copy_to_host(), expected, rtol=1e-12, atol=1e-12)


# --- layer norm and RMS norm -------------------------------------------------------------------

ROWS, FEATURES, TILE = 19, 41, 20  # features in column tiles of 20, 20 and 1


def _column_tiles(x):
    return [x[:, start : start + TILE].copy() for start in range(0, x.shape[1], TILE)]


@pytest.mark.parametrize("centered", [True, False], ids=["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_norms(dtype, centered):
    x = random((ROWS, FEATURES), dtype, 0) + np.asarray(1.5, dtype)  # non-zero row means
    dy = random((ROWS, FEATURES), dtype, 1)
    gamma, beta = random(FEATURES, dtype, 2), random(FEATURES, dtype, 3)
    name = "layer_norm" if centered else "rms_norm"

    moments = Twins(np.zeros(ROWS), np.zeros(ROWS))
    for tile in _column_tiles(x):
        step = Twins(tile, *moments.host)
        step.run("row_moments_accumulate")
        step.check(dtype)
        moments = Twins(*step.host[1:])
    s1, s2 = moments.host
    stats = (s1, s2) if centered else (s2,)

    sums = (random(ROWS, np.float64, 4), random(ROWS, np.float64, 5))
    sums = sums if centered else sums[1:]
    for start in range(0, FEATURES, TILE):
        columns = slice(start, start + TILE)
        tile_x, tile_dy = x[:, columns].copy(), dy[:, columns].copy()
        tile_gamma, tile_beta = gamma[columns].copy(), beta[columns].copy()
        params = (tile_gamma, tile_beta) if centered else (tile_gamma,)
        out = random(tile_x.shape, dtype, 6)

        apply = Twins(tile_x, *params, *stats, out, FEATURES, EPS)
        apply.run(f"{name}_apply")
        apply.check(dtype)

        accumulate = Twins(tile_x, tile_dy, tile_gamma, *stats, *sums, FEATURES, EPS)
        accumulate.run(f"{name}_backward_accumulate")
        accumulate.check(dtype)
        sums = tuple(accumulate.host[3 + len(stats) : 3 + len(stats) + len(sums)])

        grads = (random(tile_gamma.shape, dtype, 7), random(tile_gamma.shape, dtype, 8))
        grads = grads if centered else grads[:1]
        param_grad = Twins(tile_x, tile_dy, *stats, *grads, FEATURES, EPS)
        param_grad.run(f"{name}_param_grad")
        param_grad.check(dtype)

    for start in range(0, FEATURES, TILE):
        columns = slice(start, start + TILE)
        tile_x, tile_dy = x[:, columns].copy(), dy[:, columns].copy()
        dx = random(tile_x.shape, dtype, 9)
        apply = Twins(tile_x, tile_dy, gamma[columns].copy(), *stats, *sums, dx, FEATURES, EPS)
        apply.run(f"{name}_backward_apply")
        apply.check(dtype)


# --- cross-entropy -----------------------------------------------------------------------------

N_ROWS, VOCAB, VOCAB_TILE = 18, 20, 6  # vocabulary tiles of 6, 6, 6 and 2


@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy(dtype):
    logits = random((N_ROWS, VOCAB), dtype, 0) * np.asarray(3, dtype)
    # a tile of -inf adds nothing to its row, even as the row's first tile (no exp(-inf + inf))
    logits[2, 6:12] = -np.inf
    logits[3, 0:6] = -np.inf
    targets = np.array([3, -1, 19, 7, -1, 12, 0, 5, 6, 11, 17, 18, -1, 2, 13, 8, 9, 1], np.int64)
    picked_before = random(N_ROWS, np.float64, 1)
    stats = Twins(np.full(N_ROWS, -np.inf), np.zeros(N_ROWS), picked_before)
    for v_start in (6, 0, 18, 12):  # tiles in any order
        tile = logits[:, v_start : v_start + VOCAB_TILE].copy()
        lse = Twins(tile, *stats.host[:2])
        lse.run("logsumexp_accumulate")
        lse.check(dtype)
        pick = Twins(tile, targets, v_start, stats.host[2])
        pick.run("cross_entropy_pick")
        pick.check(dtype)
        stats = Twins(*lse.host[1:], pick.host[3])
    m, s, picked = stats.host
    np.testing.assert_allclose(m + np.log(s), np.log(np.exp(logits.astype(float)).sum(axis=1)))
    kept = targets >= 0
    target_logits = logits[np.arange(N_ROWS), targets].astype(np.float64)
    np.testing.assert_allclose(picked - picked_before, np.where(kept, target_logits, 0.0))

    for v_start in (0, 6, 12, 18):
        tile = logits[:, v_start : v_start + VOCAB_TILE].copy()
        dlogits = random(tile.shape, dtype, 2)
        backward = Twins(tile, targets, m, s, v_start, 0.37, dlogits)
        backward.run("cross_entropy_backward")
        backward.check(dtype)
        assert not backward.host[6][targets < 0].any()


def test_cross_entropy_on_bfloat16_bits():
    """bfloat16 logits and gradients as uint16 bits: the statistics agree with the CPU twin's
    (both widen each element exactly) and with float64 maths on the widened logits; the
    gradients within bfloat16's rounding."""
    import ml_dtypes

    logits = (random((N_ROWS, VOCAB), np.float32, 0) * 3).astype(ml_dtypes.bfloat16)
    wide = logits.astype(np.float64)
    targets = np.array([3, -1, 19, 7, -1, 12, 0, 5, 6, 11, 17, 18, -1, 2, 13, 8, 9, 1], np.int64)
    stats = Twins(np.full(N_ROWS, -np.inf), np.zeros(N_ROWS), np.zeros(N_ROWS))
    for v_start in (6, 0, 18, 12):
        tile = logits[:, v_start : v_start + VOCAB_TILE].view(np.uint16).copy()
        lse = Twins(tile, *stats.host[:2])
        lse.run("logsumexp_accumulate")
        lse.check(np.float32)
        pick = Twins(tile, targets, v_start, stats.host[2])
        pick.run("cross_entropy_pick")
        pick.check(np.float64)
        stats = Twins(*lse.host[1:], pick.host[3])
    m, s, picked = stats.host
    np.testing.assert_allclose(m + np.log(s), np.log(np.exp(wide).sum(axis=1)), rtol=1e-6)
    kept = targets >= 0
    np.testing.assert_array_equal(picked, np.where(kept, wide[np.arange(N_ROWS), targets], 0))
    softmax = np.exp(wide - (m + np.log(s))[:, None])
    for v_start in (0, 6, 12, 18):
        tile = logits[:, v_start : v_start + VOCAB_TILE].view(np.uint16).copy()
        dlogits = np.zeros(tile.shape, np.uint16)
        backward = Twins(tile, targets, m, s, v_start, 0.37, dlogits)
        backward.run("cross_entropy_backward")
        cpu, gpu = (
            np.asarray(a).view(ml_dtypes.bfloat16).astype(np.float64)
            for a in (backward.host[6], backward.device[6].copy_to_host())
        )
        expected = softmax[:, v_start : v_start + VOCAB_TILE].copy()
        rows = np.flatnonzero(kept & (targets >= v_start) & (targets < v_start + VOCAB_TILE))
        expected[rows, targets[rows] - v_start] -= 1.0
        expected = np.where(kept[:, None], expected * 0.37, 0.0)
        for got in (cpu, gpu):
            np.testing.assert_allclose(got, expected, rtol=2**-8, atol=1e-6)
        assert not cpu[~kept].any() and not gpu[~kept].any()


# --- SwiGLU ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_swiglu(dtype):
    size = 41
    gate = random(size, dtype, 0) * np.asarray(5, dtype)
    up, grad = random(size, dtype, 1), random(size, dtype, 2)
    forward = Twins(gate, up, np.zeros(size, dtype))
    forward.run("swiglu_apply")
    forward.check(dtype)
    backward = Twins(gate, up, grad, np.zeros(size, dtype), np.zeros(size, dtype))
    backward.run("swiglu_backward")
    backward.check(dtype)


def test_swiglu_on_bfloat16_bits():
    """bfloat16 operands as uint16 bits: both twins round their float32 result once, so they
    agree to one bfloat16 ulp (the CPU's exponential is its own vectorised one)."""
    import ml_dtypes

    size = 41
    gate, up, grad = (
        (random(size, np.float32, seed) * 4).astype(ml_dtypes.bfloat16).view(np.uint16)
        for seed in range(3)
    )
    forward = Twins(gate, up, np.zeros(size, np.uint16))
    forward.run("swiglu_apply")
    backward = Twins(gate, up, grad, np.zeros(size, np.uint16), np.zeros(size, np.uint16))
    backward.run("swiglu_backward")
    for twins, outputs in ((forward, (2,)), (backward, (3, 4))):
        for position in outputs:
            cpu, gpu = (
                np.asarray(a).view(ml_dtypes.bfloat16).astype(np.float64)
                for a in (twins.host[position], twins.device[position].copy_to_host())
            )
            assert cpu.any()
            np.testing.assert_allclose(gpu, cpu, rtol=2**-7, atol=0)


# --- AdamW -------------------------------------------------------------------------------------


@pytest.mark.parametrize("step", [1, 7])
@pytest.mark.parametrize("dtype", FLOATS)
def test_adamw_step(dtype, step):
    size = 21
    twins = Twins(
        random(size, dtype, 0),
        random(size, dtype, 1),
        random(size, dtype, 2) * np.asarray(0.1, dtype),
        np.abs(random(size, dtype, 3)) * np.asarray(0.01, dtype),
        3e-3,
        0.9,
        0.95,
        1e-8,
        0.1,
        step,
    )
    for _ in range(2):
        twins.run("adamw_step")
        twins.check(dtype)


# --- embedding ---------------------------------------------------------------------------------

IDS = np.array([5, 0, 9, 7, 5, 12, 10, 5, 3, 9, 11], np.int64)  # repeats, some outside the tile
V_START, TABLE_ROWS, TABLE_COLUMNS = 5, 6, 3  # the tile holds ids 5..10


@pytest.mark.parametrize("dtype", FLOATS + [np.int64])
def test_embedding_gather(dtype):
    table = random((TABLE_ROWS, TABLE_COLUMNS), np.float64, 0) * 10
    out = random((IDS.size, TABLE_COLUMNS), np.float64, 1) * 10
    twins = Twins(IDS, table.astype(dtype), V_START, out.astype(dtype))
    twins.run("embedding_gather")
    twins.check(dtype, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOATS + [np.int64])
def test_embedding_scatter_add(dtype):
    grad_out = random((IDS.size, TABLE_COLUMNS), np.float64, 0) * 10
    grad_table = random((TABLE_ROWS, TABLE_COLUMNS), np.float64, 1) * 10
    twins = Twins(IDS, grad_out.astype(dtype), V_START, grad_table.astype(dtype))
    twins.run("embedding_scatter_add")
    twins.check(dtype)


# --- real-GPU compilation ----------------------------------------------------------------------

_COMPILE_ALL = """
    from numtile.ops_cuda import launch
    from numtile.ops_cuda.nn import attention, embedding, loss, norm, optim, rope, swiglu

    assert not launch.SIMULATOR
    i64, f64, flag = types.int64, types.float64, types.boolean
    s1, s2, ids = types.float64[:], types.float64[:, :], types.int64[:]
    for dtype in (types.float32, types.float64):
        a1, a2 = dtype[:], dtype[:, :]
        kernels = [
            (
                attention._attention_forward,
                (a2, a2, a2, s2, s2, a2, i64, i64, f64, i64, i64, flag, i64),
            ),
            (attention._attention_finalize, (a2, s2, s2, a2, s2, i64, i64)),
            (attention._attention_delta, (a2, a2, s2, i64, i64)),
            (
                attention._attention_backward,
                (a2, a2, a2, a2, s2, s2, a2, a2, a2, i64, i64, f64, i64, i64, flag, i64),
            ),
            (norm._row_moments, (a2, s1, s1)),
            (norm._normalize, (a2, a2, a1, a1, s1, s1, s1, s1, a2, i64, f64, flag, flag)),
            (norm._normalize_backward_sums, (a2, a2, a1, s1, s1, s1, s1, i64, f64, flag)),
            (norm._normalize_param_grad, (a2, a2, s1, s1, a1, a1, i64, f64, flag)),
            (loss._logsumexp(loss._as_is), (a2, s1, s1)),
            (loss._pick(loss._as_is), (a2, ids, i64, s1)),
            (
                loss._cross_entropy_backward(loss._as_is, loss._as_is),
                (a2, ids, s1, s1, i64, f64, a2),
            ),
            (optim._adamw, (a1, a1, a1, a1) + (dtype,) * 7),
            (embedding._embedding_gather, (ids, a2, i64, a2)),
            (embedding._embedding_scatter_add, (ids, a2, i64, a2)),
            (rope._rope, (a2, a2, a2, a2, i64, i64, f64)),
            (swiglu._apply(loss._as_is, loss._as_is), (a1, a1, a1)),
            (swiglu._backward(loss._as_is, loss._as_is), (a1,) * 5),
        ]
        for kernel, signature in kernels:
            cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    # the loss kernels on bfloat16 logits and gradients (uint16 bits)
    bits2 = types.uint16[:, :]
    bf16_loss = [
        (loss._logsumexp(loss._widened), (bits2, s1, s1)),
        (loss._pick(loss._widened), (bits2, ids, i64, s1)),
        (
            loss._cross_entropy_backward(loss._widened, loss._rounded_bits),
            (bits2, ids, s1, s1, i64, f64, bits2),
        ),
        (swiglu._apply(loss._widened, loss._rounded_bits), (types.uint16[:],) * 3),
        (swiglu._backward(loss._widened, loss._rounded_bits), (types.uint16[:],) * 5),
    ]
    for kernel, signature in bf16_loss:
        cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
"""


def test_kernels_compile_for_a_real_gpu(compile_for_a_real_gpu):
    compile_for_a_real_gpu(_COMPILE_ALL)
