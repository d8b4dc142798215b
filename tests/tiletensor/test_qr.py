"""Tests for numtile/tiletensor/linalg/qr.py: the tiled Householder QR (flat TS tree) and TSQR
(binary TT tree), against NumPy (up to signs), and its gradient against torch."""

import numpy as np
import pytest
import torch

import numtile as nt
from numtile.tiletensor.linalg.qr import qr_factor

TOLERANCE = {np.float32: 5e-5, np.float64: 1e-12}
# (shape, tile shape): square, wide and tall, tiles that divide nothing, one tile column
# (TSQR, with a last tile shorter than the matrix is wide), retiled to square tiles
CASES = [
    ((11, 11), (4, 4)),
    ((7, 11), (3, 4)),
    ((11, 7), (3, 3)),
    ((40, 5), (7, 5)),
    ((40, 6), (6, 8)),
    ((23, 5), (3, 2)),
    ((30, 9), (4, 4)),
    ((5, 5), (8, 8)),
    ((1, 4), (1, 1)),
]


def check_qr(a, q, r, mode, dtype):
    expected_q, expected_r = np.linalg.qr(a.astype(np.float64), mode=mode)
    q, r = q.to_numpy(), r.to_numpy()
    assert q.dtype == r.dtype == dtype
    assert q.shape == expected_q.shape and r.shape == expected_r.shape
    scale = TOLERANCE[dtype] * max(a.shape)
    np.testing.assert_allclose(q @ r, a, rtol=scale, atol=scale)
    np.testing.assert_allclose(q.T @ q, np.eye(q.shape[1]), atol=scale)
    assert np.array_equal(np.tril(r, -1), np.zeros_like(r))
    np.testing.assert_allclose(np.abs(r), np.abs(expected_r), rtol=scale, atol=scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
@pytest.mark.parametrize("shape, tile_shape", CASES)
def test_qr_matches_numpy_up_to_signs(shape, tile_shape, mode, dtype, make_array):
    a = make_array(shape, dtype, seed=1)
    q, r = nt.linalg.qr(nt.from_numpy(a, tile_shape=tile_shape), mode=mode)
    check_qr(a, q, r, mode, dtype)


def test_tall_matrices_reduce_along_a_binary_tree():
    x = nt.from_numpy(np.ones((64, 4)), tile_shape=(8, 4))
    factor = qr_factor(x)
    assert factor.tree and factor.a.tile_shape == (8, 4)
    steps = factor.steps(0)
    assert len(steps) == 7 and steps[-1] == (0, 4)  # 3 levels: 4 + 2 + 1 pairs
    assert not qr_factor(nt.from_numpy(np.ones((8, 8)), tile_shape=(3, 3))).tree


def test_qr_under_each_scheduler(scheduler, make_array):
    a = make_array((17, 6), np.float64, seed=2)
    q, r = nt.linalg.qr(nt.from_numpy(a, tile_shape=(4, 6)))
    check_qr(a, q, r, "reduced", np.float64)


def test_qr_of_a_rank_deficient_and_an_ill_conditioned_matrix():
    a = np.random.default_rng(3).standard_normal((12, 4)) @ np.ones((4, 7))  # rank 4
    q, r = nt.linalg.qr(nt.from_numpy(a, tile_shape=(5, 5)))
    np.testing.assert_allclose(q.to_numpy() @ r.to_numpy(), a, atol=1e-12)
    hilbert = 1.0 / (np.arange(10)[:, None] + np.arange(10) + 1)  # cond ~ 1e13
    q, r = nt.linalg.qr(nt.from_numpy(hilbert, tile_shape=(3, 3)))
    residual = np.linalg.norm(q.to_numpy() @ r.to_numpy() - hilbert)
    assert residual < 100 * np.finfo(float).eps * np.linalg.norm(hilbert)  # backward stable


def test_qr_of_integers_is_float64_and_nans_propagate_as_in_numpy():
    q, r = nt.linalg.qr(nt.from_numpy(np.arange(12).reshape(4, 3), tile_shape=(2, 2)))
    assert q.dtype == np.float64
    a = np.ones((4, 3))
    a[1, 1] = np.nan
    q, r = nt.linalg.qr(nt.from_numpy(a, tile_shape=(2, 2)))
    assert np.isnan(r.to_numpy()).any() and np.isnan(np.linalg.qr(a)[1]).any()


def test_qr_bad_input_names_it():
    with pytest.raises(ValueError, match="mode"):
        nt.linalg.qr(nt.ones((3, 3)), mode="r")
    with pytest.raises(ValueError, match=r"2-d.*\(3,\)"):
        nt.linalg.qr(nt.ones((3,)))
    with pytest.raises(TypeError, match="boolean"):
        nt.linalg.qr(nt.ones((3, 3)) > 0)


def test_qr_runs_on_a_gpu_worker_like_on_cpu(make_array):
    a = make_array((7, 3), np.float64, seed=4)
    nt.init(ncpu=1, ncuda=1, restrict="cuda")
    try:
        for tiles in [(3, 3), (3, 2)]:  # TSQR, then square tiles
            q, r = nt.linalg.qr(nt.from_numpy(a, tile_shape=tiles), mode="complete")
            check_qr(a, q, r, "complete", np.float64)
        assert nt.get_runtime().busy[0] == 0  # the CPU worker ran nothing
    finally:
        nt.init()


@pytest.mark.parametrize("restrict", [None, "cuda"])
def test_tsqr_with_an_explicit_q_on_cpu_and_gpu_workers(restrict, make_array, monkeypatch):
    # 21 row tiles, the last one row (shorter than the matrix is wide): a 3-level tree of up
    # to 4 R's per node with a carried child; on a GPU worker the generic kernels
    from numtile.tiletensor.linalg import tsqr

    monkeypatch.setattr(tsqr, "LEAF_ROWS", 1)  # leaves of the input's row tiles
    shape = (61, 3) if restrict is None else (10, 3)
    a = make_array(shape, np.float64, seed=5)
    if restrict:
        nt.init(ncpu=1, ncuda=1, restrict=restrict)
    try:
        q, r = nt.linalg.qr(nt.from_numpy(a, tile_shape=(3, 3)))
        check_qr(a, q, r, "reduced", np.float64)
        if restrict:
            assert nt.get_runtime().busy[0] == 0  # the CPU worker ran nothing
        values = nt.linalg.svdvals(nt.from_numpy(a, tile_shape=(3, 3))).to_numpy()
        np.testing.assert_allclose(values, np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    finally:
        if restrict:
            nt.init()


def test_qr_out_of_core_under_a_host_limit_four_times_below_the_working_set(tmp_path):
    a = np.random.default_rng(5).standard_normal((160, 96))  # a, its factor, Q, R: ~4 x 120 KiB
    runtime = nt.init(ncpu=2, host_mem_limit=128 << 10, spill_dir=str(tmp_path))
    try:
        q, r = nt.linalg.qr(nt.from_numpy(a, tile_shape=(32, 32)))
        np.testing.assert_allclose(q.to_numpy() @ r.to_numpy(), a, atol=1e-12)
        counters = runtime.manager.counters()
        assert counters["nodes"]["host"]["peak"] <= 128 << 10
        assert counters["spill"]["writes"] > 0
    finally:
        nt.init()


@pytest.mark.parametrize(
    "shape, tile_shape", [((9, 5), (4, 2)), ((6, 6), (4, 4)), ((20, 3), (6, 3))]
)
def test_qr_gradient_matches_torch(shape, tile_shape):
    rng = np.random.default_rng(6)
    a, weight_q, weight_r = (rng.standard_normal(s) for s in (shape, shape, (shape[1],) * 2))
    x = nt.from_numpy(a, tile_shape=tile_shape).requires_grad_()
    q, r = nt.linalg.qr(x)
    loss = nt.sum(q * nt.from_numpy(weight_q)) + nt.sum(r * nt.from_numpy(weight_r))
    loss.backward()
    signs = np.sign(np.diag(r.detach().to_numpy()))  # torch's R has LAPACK's signs
    t = torch.tensor(a, requires_grad=True)
    tq, tr = torch.linalg.qr(t)
    signs = torch.tensor(signs) * torch.sign(torch.diagonal(tr.detach()))
    ((tq * signs) * torch.tensor(weight_q)).sum().add(
        ((signs[:, None] * tr) * torch.tensor(weight_r)).sum()
    ).backward()
    np.testing.assert_allclose(x.grad.to_numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_qr_gradient_refuses_wide_and_complete():
    x = nt.ones((2, 3)).requires_grad_()
    with pytest.raises(ValueError, match=r"mode='reduced'.*\(2, 3\)"):
        nt.linalg.qr(x)
    with pytest.raises(ValueError, match="complete"):
        nt.linalg.qr(nt.ones((3, 2)).requires_grad_(), mode="complete")


def test_qr_gradient_is_the_same_every_time():
    # Q's and R's gradients reach x in (2, 2) tiles, x has (4, 2) ones: the retiled first
    # gradient and the second's accumulate raced on x.grad (1 run in 10 was wrong)
    rng = np.random.default_rng(7)
    a, weight_q, weight_r = (rng.standard_normal(s) for s in ((9, 5), (9, 5), (5, 5)))
    results = []
    for _ in range(12):
        x = nt.from_numpy(a, tile_shape=(4, 2)).requires_grad_()
        q, r = nt.linalg.qr(x)
        (nt.sum(q * nt.from_numpy(weight_q)) + nt.sum(r * nt.from_numpy(weight_r))).backward()
        results.append(x.grad.to_numpy())
    for result in results[1:]:
        np.testing.assert_allclose(result, results[0], rtol=1e-12, atol=1e-12)
