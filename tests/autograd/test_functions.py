"""Gradients of the differentiable tiled ops against PyTorch autograd."""

import numpy as np
import pytest
import torch

import numtile as nt

RTOL = 1e-10


def _pair(shape, tile, seed, low=-1.0, high=1.0):
    data = np.random.default_rng(seed).uniform(low, high, shape)
    return (
        nt.from_numpy(data, tile_shape=tile).requires_grad_(),
        torch.tensor(data, requires_grad=True),
    )


def _check(ours, theirs):
    np.testing.assert_allclose(ours.grad.to_numpy(), theirs.grad.numpy(), rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize(
    "xs, xt, ys, yt",
    [
        ((5, 7), (2, 3), (5, 7), (2, 3)),
        ((5, 7), (2, 3), (7,), (4,)),  # broadcast over rows, different tiling
        ((4, 1, 6), (3, 1, 4), (5, 1), (2, 1)),  # both operands broadcast
        ((3, 3), (3, 3), (3, 3), (2, 2)),  # same shape, mismatched tiles
    ],
)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
def test_binary_gradients_with_broadcasting(op, xs, xt, ys, yt):
    x, tx = _pair(xs, xt, 0)
    y, ty = _pair(ys, yt, 1, low=0.5, high=2.0)
    out = getattr(nt, op)(x, y)
    ref = getattr(torch, op)(tx, ty)
    weights = np.random.default_rng(2).standard_normal(ref.shape)
    (out * nt.from_numpy(weights, tile_shape=out.tile_shape)).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    _check(x, tx)
    _check(y, ty)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "relu", "sigmoid", "silu"])
def test_unary_gradients(name):
    x, tx = _pair((6, 5), (4, 2), 3, low=0.1, high=2.0)
    getattr(nt, name)(x).sum().backward()
    fn = getattr(torch, name) if hasattr(torch, name) else getattr(torch.nn.functional, name)
    fn(tx).sum().backward()
    _check(x, tx)


def test_gelu_tanh_gradient():
    x, tx = _pair((9,), (4,), 4, low=-3, high=3)
    nt.gelu_tanh(x).sum().backward()
    torch.nn.functional.gelu(tx, approximate="tanh").sum().backward()
    _check(x, tx)


@pytest.mark.parametrize(
    "a_shape, a_tile, b_shape, b_tile",
    [
        ((5, 7), (2, 3), (7, 4), (3, 3)),
        ((5, 7), (2, 3), (7, 4), (2, 4)),  # inner tiles differ: retiled
        ((2, 3, 5, 4), (1, 2, 3, 3), (4, 6), (3, 4)),  # batched @ broadcast matrix
    ],
)
def test_matmul_gradients(a_shape, a_tile, b_shape, b_tile):
    a, ta = _pair(a_shape, a_tile, 5)
    b, tb = _pair(b_shape, b_tile, 6)
    out = a @ b
    ref = ta @ tb
    weights = np.random.default_rng(7).standard_normal(ref.shape)
    (out * nt.from_numpy(weights, tile_shape=out.tile_shape)).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    _check(a, ta)
    _check(b, tb)


@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, True), ((0, 2), False)])
def test_sum_and_mean_gradients(axis, keepdims):
    x, tx = _pair((4, 5, 3), (3, 2, 2), 8)
    weights_shape = np.sum(np.zeros((4, 5, 3)), axis=axis, keepdims=keepdims).shape
    weights = np.random.default_rng(9).standard_normal(weights_shape)
    w = nt.from_numpy(weights) if weights_shape else float(weights)
    tw = torch.tensor(weights)
    (nt.sum(x, axis=axis, keepdims=keepdims) * w).sum().backward()
    (torch.sum(tx, dim=axis, keepdim=keepdims) if axis is not None else tx.sum()).mul(
        tw
    ).sum().backward()
    _check(x, tx)
    x2, tx2 = _pair((4, 5, 3), (3, 2, 2), 8)
    nt.mean(x2, axis=axis, keepdims=keepdims).sum().backward()
    (
        torch.mean(tx2, dim=axis, keepdim=keepdims) if axis is not None else tx2.mean()
    ).sum().backward()
    _check(x2, tx2)


def test_reshape_permute_pow_and_negative_gradients():
    x, tx = _pair((4, 6), (2, 6), 10, low=0.5, high=1.5)
    y = nt.permute_dims(x.reshape((4, 2, 3)), (2, 0, 1))
    out = (-(y**3)).sum()
    out.backward()
    (-(tx.reshape(4, 2, 3).permute(2, 0, 1) ** 3)).sum().backward()
    _check(x, tx)


def test_gradients_accumulate_across_backward_calls_and_reuse():
    x, tx = _pair((5,), (2,), 11)
    (x * x).sum().backward()
    (x * 3.0 + x).sum().backward()  # x used twice in one graph
    (tx * tx).sum().backward()
    (tx * 3.0 + tx).sum().backward()
    _check(x, tx)


def test_no_grad_records_nothing_and_errors_are_clear():
    x = nt.ones((3,)).requires_grad_()
    with nt.no_grad():
        y = x * 2
    assert not y.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()
    with pytest.raises(ValueError, match="single-element"):
        (x * 2).backward()
    with pytest.raises(TypeError, match="floating"):
        nt.arange(3).requires_grad_()
    x[1:].sum().backward()  # indexing records a scatter-add backward (issue 13)
    np.testing.assert_array_equal(x.grad.to_numpy(), [0.0, 1.0, 1.0])
    assert x.detach()[1:].shape == (2,)


def test_intermediate_tiles_are_released_after_backward():
    import gc
    import weakref

    x = nt.random.uniform(size=(64, 64), seed=0, tile_shape=(32, 32)).requires_grad_()
    hidden = nt.tanh(x @ x)
    ref = weakref.ref(hidden)
    loss = nt.sum(hidden * hidden)
    del hidden
    loss.backward()
    gc.collect()
    assert ref() is None  # no node kept the saved activation alive
    assert x.grad is not None


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_with_transposed_operands(transpose_a, transpose_b):
    a_shape = (7, 5) if transpose_a else (5, 7)
    b_shape = (4, 7) if transpose_b else (7, 4)
    a, ta = _pair(a_shape, (3, 2), 12)
    b, tb = _pair(b_shape, (2, 3), 13)
    out = nt.linalg.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    ref = (ta.T if transpose_a else ta) @ (tb.T if transpose_b else tb)
    np.testing.assert_allclose(out.to_numpy(), ref.detach().numpy(), rtol=1e-12)
    weights = np.random.default_rng(14).standard_normal(ref.shape)
    (out * nt.from_numpy(weights, tile_shape=out.tile_shape)).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    _check(a, ta)
    _check(b, tb)


def test_two_paths_into_one_retiled_leaf_give_the_same_gradient_every_run():
    # x's gradient arrives through a retile (pieces copied into a tile) and a transpose; the
    # sum must wait for the copies (a guard: the deterministic check of that ordering is
    # tests/runtime/test_engine.py::test_accumulations_of_another_codelet_wait_for_the_open_group)
    rng = np.random.default_rng(3)
    a, w1, w2 = (
        rng.standard_normal((4, 4)),
        rng.standard_normal((4, 4)),
        rng.standard_normal((4, 4)),
    )
    eye = nt.from_numpy(np.eye(4), tile_shape=(2, 2))
    expected = w1 + w2.T  # d/dx of sum(x * w1) + sum(x^T * w2), since eye @ x = x
    for _ in range(20):
        x = nt.from_numpy(a, tile_shape=(4, 2)).requires_grad_()
        y = eye @ x
        loss = nt.sum(y * nt.from_numpy(w1)) + nt.sum(y.T * nt.from_numpy(w2))
        loss.backward()
        np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=1e-12)
