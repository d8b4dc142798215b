"""Tests for numtile/tiletensor/linalg/spectral.py: eigh, eigvalsh, svd, svdvals, pinv,
matrix_rank and matrix_norm ord 2/-2/'nuc' against NumPy (singular vectors up to sign), the
TSQR path for tall matrices, bad input, and the gradients of eigh/eigvalsh/svdvals/svd/pinv
vs torch."""

import numpy as np
import pytest
import torch

import numtile as nt

TOLERANCE = {np.float32: 2e-4, np.float64: 1e-11}
# square (one dense task), tall (TSQR, then the n x n R), wide (transposed), tiles dividing nothing
SHAPES = [
    ((11, 11), (4, 4)),
    ((40, 5), (7, 5)),
    ((23, 5), (3, 2)),
    ((5, 30), (4, 4)),
    ((7, 9), (2, 3)),
]


def _symmetric(n, dtype=np.float64, seed=0):
    a = np.random.default_rng(seed).standard_normal((n, n))
    return (a + a.T).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("shape, tile_shape", SHAPES)
def test_svd_matches_numpy(shape, tile_shape, full_matrices, dtype, make_array):
    a = make_array(shape, dtype, seed=1)
    u, s, vh = nt.linalg.svd(nt.from_numpy(a, tile_shape=tile_shape), full_matrices=full_matrices)
    eu, es, evh = np.linalg.svd(a.astype(np.float64), full_matrices=full_matrices)
    u, s, vh = u.to_numpy(), s.to_numpy(), vh.to_numpy()
    assert (u.shape, s.shape, vh.shape) == (eu.shape, es.shape, evh.shape)
    assert u.dtype == s.dtype == vh.dtype == dtype
    scale = TOLERANCE[dtype] * np.abs(a).max() * max(shape)
    np.testing.assert_allclose(s, es, rtol=scale, atol=scale)
    k = len(es)
    np.testing.assert_allclose((u[:, :k] * s) @ vh[:k], a, rtol=scale, atol=scale)
    tolerance = TOLERANCE[dtype] * max(shape)
    np.testing.assert_allclose(u.T @ u, np.eye(u.shape[1]), atol=tolerance)
    np.testing.assert_allclose(vh @ vh.T, np.eye(vh.shape[0]), atol=tolerance)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, tile_shape", SHAPES)
def test_svdvals_pinv_rank_and_norms_match_numpy(shape, tile_shape, dtype, make_array):
    a = make_array(shape, dtype, seed=2)
    x = nt.from_numpy(a, tile_shape=tile_shape)
    scale = TOLERANCE[dtype] * np.abs(a).max() * max(shape)
    expected = np.linalg.svd(a, compute_uv=False)
    np.testing.assert_allclose(nt.linalg.svdvals(x).to_numpy(), expected, rtol=scale, atol=scale)
    np.testing.assert_allclose(
        nt.linalg.pinv(x).to_numpy(), np.linalg.pinv(a), rtol=10 * scale, atol=10 * scale
    )
    assert nt.linalg.matrix_rank(x).item() == np.linalg.matrix_rank(a)
    for order in (2, -2, "nuc"):
        value = nt.linalg.matrix_norm(x, ord=order)
        assert value.shape == () and value.dtype == dtype
        np.testing.assert_allclose(value.item(), np.linalg.norm(a, ord=order), rtol=scale)
    assert nt.linalg.matrix_norm(x, ord=2, keepdims=True).shape == (1, 1)


def test_rank_deficient_matrices_rank_and_pseudo_inverse():
    a = np.random.default_rng(3).standard_normal((30, 3)) @ np.random.default_rng(4).random((3, 6))
    x = nt.from_numpy(a, tile_shape=(7, 6))  # tall: through TSQR
    assert nt.linalg.matrix_rank(x).item() == 3 == np.linalg.matrix_rank(a)
    assert nt.linalg.matrix_rank(x, rtol=0.9).item() == np.linalg.matrix_rank(a, rtol=0.9)
    np.testing.assert_allclose(nt.linalg.pinv(x).to_numpy(), np.linalg.pinv(a), atol=1e-10)
    assert nt.linalg.matrix_rank(nt.zeros((3, 4))).item() == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, tiles", [(9, (4, 4)), (6, (2, 3)), (1, (1, 1))])
def test_eigh_and_eigvalsh_match_numpy(n, tiles, dtype):
    a = _symmetric(n, dtype, seed=5)
    w, v = nt.linalg.eigh(nt.from_numpy(a, tile_shape=tiles))
    w, v = w.to_numpy(), v.to_numpy()
    assert w.dtype == v.dtype == dtype
    tolerance = TOLERANCE[dtype] * 10
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose((v * w) @ v.T, a, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(v.T @ v, np.eye(n), atol=tolerance)
    values = nt.linalg.eigvalsh(nt.from_numpy(a, tile_shape=tiles)).to_numpy()
    np.testing.assert_allclose(values, np.linalg.eigvalsh(a), rtol=tolerance, atol=tolerance)
    lower = np.tril(a) + np.triu(np.full_like(a, 7.0), 1)  # only the lower triangle is read
    np.testing.assert_allclose(nt.linalg.eigvalsh(nt.from_numpy(lower)).to_numpy(), values)


@pytest.mark.parametrize("name", ["eigh", "eigvalsh"])
def test_non_square_input_raises_like_numpy(name):
    with pytest.raises(np.linalg.LinAlgError):
        getattr(np.linalg, name)(np.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match=r"square.*\(2, 3\)"):
        getattr(nt.linalg, name)(nt.ones((2, 3)))


@pytest.mark.parametrize("name", ["svd", "svdvals", "pinv", "matrix_rank", "eigh"])
def test_bad_input_names_the_shape(name):
    with pytest.raises(ValueError, match=r"2-d.*\(3,\)"):
        getattr(nt.linalg, name)(nt.ones((3,)))


@pytest.mark.parametrize(
    "name, shape",
    [("svdvals", (4, 4)), ("svdvals", (12, 3)), ("eigvalsh", (4, 4)), ("svd", (12, 3))],
)
def test_non_finite_input_raises_when_read_as_numpy_does(name, shape):
    a = np.eye(*shape)
    a[1, 1] = np.nan  # (NumPy returns NaNs for some infs; numtile raises for any non-finite)
    with pytest.raises(np.linalg.LinAlgError):
        getattr(np.linalg, name)(a)
    result = getattr(nt.linalg, name)(nt.from_numpy(a, tile_shape=(4, 3)))
    first = result[0] if isinstance(result, tuple) else result
    with pytest.raises(np.linalg.LinAlgError, match="infs or NaNs"):
        first.to_numpy()


def test_eigh_gradient_matches_torch():
    rng = np.random.default_rng(6)
    a, weight_w, weight_v = (
        _symmetric(6, seed=7),
        rng.standard_normal(6),
        rng.standard_normal((6, 6)),
    )
    x = nt.from_numpy(a, tile_shape=(4, 4)).requires_grad_()
    w, v = nt.linalg.eigh(x)
    t = torch.tensor(a, requires_grad=True)
    tw, tv = torch.linalg.eigh(t)
    signs = np.sign((v.detach().to_numpy() * tv.detach().numpy()).sum(axis=0))  # align vectors
    loss = nt.sum(w * nt.from_numpy(weight_w)) + nt.sum(v * nt.from_numpy(weight_v * signs))
    loss.backward()
    ((tw * torch.tensor(weight_w)).sum() + (tv * torch.tensor(weight_v)).sum()).backward()
    np.testing.assert_allclose(x.grad.to_numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "name, shape", [("eigvalsh", (6, 6)), ("svdvals", (9, 4)), ("svdvals", (4, 7))]
)
def test_value_gradients_match_torch(name, shape):
    rng = np.random.default_rng(8)
    a = _symmetric(6, seed=9) if name == "eigvalsh" else rng.standard_normal(shape)
    weight = rng.standard_normal(min(shape))
    x = nt.from_numpy(a, tile_shape=(4, 3) if name == "svdvals" else (4, 4)).requires_grad_()
    nt.sum(getattr(nt.linalg, name)(x) * nt.from_numpy(weight)).backward()
    t = torch.tensor(a, requires_grad=True)
    (getattr(torch.linalg, name)(t) * torch.tensor(weight)).sum().backward()
    np.testing.assert_allclose(x.grad.to_numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)


def _aligned_weights(u, tu, shape, axis):
    """Random weights for torch's U (axis -1: its columns) or Vh (axis -2: its rows), and
    those times the signs that align numtile's singular vectors with torch's."""
    k = tu.shape[-1] if axis == -1 else tu.shape[-2]
    signs = np.ones(shape[:-2] + (shape[axis],))
    ours, theirs = (
        (u[..., :, :k], tu[..., :, :k]) if axis == -1 else (u[..., :k, :], tu[..., :k, :])
    )
    signs[..., :k] = np.sign((ours * theirs).sum(axis=-2 if axis == -1 else -1))
    weights = np.random.default_rng(12).standard_normal(shape)
    return weights, weights * (signs[..., None, :] if axis == -1 else signs[..., :, None])


@pytest.mark.parametrize(
    "shape, tiles, full_matrices",
    [
        ((6, 6), (4, 4), False),
        ((9, 4), (4, 3), True),
        ((4, 7), (3, 3), False),
        ((2, 5, 3), (1, 5, 3), True),
    ],
)
def test_svd_gradient_matches_torch(shape, tiles, full_matrices):
    a = np.random.default_rng(13).standard_normal(shape)
    x = nt.from_numpy(a, tile_shape=tiles).requires_grad_()
    u, s, vh = nt.linalg.svd(x, full_matrices=full_matrices)
    t = torch.tensor(a, requires_grad=True)
    tu, ts, tvh = torch.linalg.svd(t, full_matrices=full_matrices)
    tu_weight, wu = _aligned_weights(u.detach().to_numpy(), tu.detach().numpy(), u.shape, -1)
    tv_weight, wv = _aligned_weights(vh.detach().to_numpy(), tvh.detach().numpy(), vh.shape, -2)
    ws = np.random.default_rng(14).standard_normal(s.shape)
    loss = nt.sum(u * nt.from_numpy(wu)) + nt.sum(s * nt.from_numpy(ws))
    (loss + nt.sum(vh * nt.from_numpy(wv))).backward()
    weights = [torch.tensor(w) for w in (tu_weight, ws, tv_weight)]
    sum((o * w).sum() for o, w in zip((tu, ts, tvh), weights)).backward()
    np.testing.assert_allclose(x.grad.to_numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    "shape, tiles", [((5, 3), (2, 2)), ((3, 6), (3, 6)), ((2, 4, 4), (1, 4, 4))]
)
def test_pinv_gradient_matches_torch(shape, tiles):
    rng = np.random.default_rng(15)
    a, weight = rng.standard_normal(shape), rng.standard_normal(shape[:-2] + shape[-2:][::-1])
    x = nt.from_numpy(a, tile_shape=tiles).requires_grad_()
    nt.sum(nt.linalg.pinv(x) * nt.from_numpy(weight)).backward()
    t = torch.tensor(a, requires_grad=True)
    (torch.linalg.pinv(t) * torch.tensor(weight)).sum().backward()
    np.testing.assert_allclose(x.grad.to_numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_svd_gradient_of_repeated_singular_values_is_not_finite_as_in_torch():
    x = nt.from_numpy(np.eye(3) * 2.0).requires_grad_()
    nt.sum(nt.linalg.svd(x).U * nt.from_numpy(np.arange(9.0).reshape(3, 3))).backward()
    t = torch.tensor(np.eye(3) * 2.0, requires_grad=True)
    (torch.linalg.svd(t).U * torch.arange(9.0, dtype=torch.float64).reshape(3, 3)).sum().backward()
    assert not np.isfinite(x.grad.to_numpy()).all() and not torch.isfinite(t.grad).all()


def test_spectral_functions_run_beside_a_gpu_worker(make_array):
    a = make_array((12, 3), np.float64, seed=10)  # TSQR on the GPU, the small SVD on the CPU
    nt.init(ncpu=1, ncuda=1)
    try:
        s = nt.linalg.svdvals(nt.from_numpy(a, tile_shape=(4, 3)))
        np.testing.assert_allclose(s.to_numpy(), np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    finally:
        nt.init()


def test_large_gathered_matrices_go_to_numpy_threaded_lapack(monkeypatch):
    from numtile.tiletensor.codelets import qr as codelets

    monkeypatch.setattr(codelets, "THREADED_ABOVE", 0)  # every matrix counts as large
    a = _symmetric(7, seed=11)
    x = nt.from_numpy(a, tile_shape=(3, 3))
    np.testing.assert_allclose(nt.linalg.eigvalsh(x).to_numpy(), np.linalg.eigvalsh(a))
    w, v = nt.linalg.eigh(x)
    np.testing.assert_allclose((v.to_numpy() * w.to_numpy()) @ v.to_numpy().T, a, atol=1e-12)
    expected = np.linalg.svd(a, compute_uv=False)
    np.testing.assert_allclose(nt.linalg.svdvals(x).to_numpy(), expected, rtol=1e-12)
    u, s, vh = nt.linalg.svd(x)
    np.testing.assert_allclose((u.to_numpy() * s.to_numpy()) @ vh.to_numpy(), a, atol=1e-12)
