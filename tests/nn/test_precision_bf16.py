"""bf16-mixed stores activations in bfloat16: linear layers write bf16 tiles (float32 sums
rounded once), their backward reads bf16 and sums the weight gradients in float32, norms and
the loss read bf16 and compute in float32; the models' saved activations are bf16."""

import warnings

import ml_dtypes
import numpy as np
import pytest

import numtile as nt
from numtile.autograd.tape import Node
from numtile.nn import functional
from numtile.nn.loss import LinearCrossEntropy, cross_entropy
from numtile.tiletensor.precision import PrecisionFallbackWarning
from tests.nn import test_gpt2, test_llama

BF16 = ml_dtypes.bfloat16


def _bf(x):
    """x rounded to bfloat16 and back (float64)."""
    return np.asarray(x, np.float32).astype(BF16).astype(np.float64)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrecisionFallbackWarning)
        yield


@pytest.mark.parametrize("transposed", [False, True])
def test_linear_writes_bf16_rounded_once_and_sums_gradients_in_float32(transposed):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7)).astype(np.float32)
    w = rng.standard_normal((6, 7) if transposed else (7, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    g = rng.standard_normal((2, 3, 6)).astype(np.float32)
    # W's (in, out) tile (3, 4): three inner tiles (a float32 partial) and a ragged output one
    tx = nt.from_numpy(x, tile_shape=(1, 2, 3)).requires_grad_()
    tw = nt.from_numpy(w, tile_shape=(4, 3) if transposed else (3, 4)).requires_grad_()
    tb = nt.from_numpy(b, tile_shape=4).requires_grad_()
    with nt.nn.precision("bf16-mixed"):
        y = functional.linear(tx, tw, tb, transposed=transposed)
    assert y.dtype == nt.bfloat16
    w_in_out = _bf(w.T if transposed else w)
    exact = _bf(x) @ w_in_out + b  # float32 sums of exact products: one rounding
    got = y.to_numpy().astype(np.float64)
    np.testing.assert_allclose(got, exact.astype(np.float32).astype(BF16), rtol=2**-8)
    y.backward(nt.from_numpy(g.astype(BF16), tile_shape=(1, 2, 4)))
    assert tx.grad.dtype == tw.grad.dtype == tb.grad.dtype == np.float32
    gb = _bf(g)
    np.testing.assert_allclose(tx.grad.to_numpy(), gb @ w_in_out.T, rtol=1e-5, atol=1e-5)
    gw = np.einsum("bti,bto->io", _bf(x), gb)  # float32 sums, not rounded to bf16
    np.testing.assert_allclose(tw.grad.to_numpy(), gw.T if transposed else gw, rtol=1e-5)
    np.testing.assert_allclose(tb.grad.to_numpy(), gb.sum((0, 1)), rtol=1e-5)


def test_norms_and_loss_read_bf16_and_compute_in_float32():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5)).astype(BF16)
    gamma = rng.standard_normal(5).astype(np.float32)
    results = {}
    for dtype in (BF16, np.float32):
        tx = nt.from_numpy(x.astype(dtype), tile_shape=(1, 2, 2)).requires_grad_()
        tg = nt.from_numpy(gamma, tile_shape=2).requires_grad_()
        y = functional.rms_norm(tx, tg)
        z = functional.layer_norm(y, tg, nt.zeros((5,), tile_shape=2))
        loss = cross_entropy(z, np.array([[0, 4, 2], [1, 1, 3]]))
        loss.backward()
        results[np.dtype(dtype).name] = (y, z, loss, tx.grad, tg.grad)
    (y16, z16, l16, gx16, gg16), (y32, z32, l32, gx32, gg32) = results.values()
    assert y16.dtype == z16.dtype == gx16.dtype == nt.bfloat16
    assert l16.dtype == gg16.dtype == np.float32  # the loss and parameter gradients
    # the float32 result rounded once (z: from the bf16 y, so compare it through y16)
    np.testing.assert_allclose(
        y16.to_numpy().astype(np.float32), y32.to_numpy().astype(BF16).astype(np.float32), 0
    )
    assert abs(l16.item() - l32.item()) < 1e-2 * l32.item()
    assert np.linalg.norm(gx16.to_numpy().astype(np.float32) - gx32.to_numpy()) < 2e-2 * (
        np.linalg.norm(gx32.to_numpy())
    )


def _saved_activations(loss):
    """(bytes by dtype of the activations the graph of ``loss`` keeps for its backward, the
    dtypes of the linear layers' saved inputs)."""
    seen, stack, handles, by_dtype, linear_inputs = set(), [loss._node], set(), {}, set()
    while stack:
        node = stack.pop()  # the graph links nodes: a node's recorded inputs are their nodes
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.function in (functional.LinearFunction, LinearCrossEntropy):
            linear_inputs.add(node.ctx.saved[0].dtype.name)
        for value in node.ctx.saved:
            floating = value.dtype in (np.float32, nt.bfloat16) if hasattr(value, "dtype") else 0
            if isinstance(value, nt.TileTensor) and value.ndim >= 3 and floating:  # (B, T, ...)
                for handle in value.handles:
                    if handle.id not in handles:
                        handles.add(handle.id)
                        by_dtype[value.dtype.name] = (
                            by_dtype.get(value.dtype.name, 0) + handle.nbytes
                        )
        stack.extend(v for v in node.inputs if isinstance(v, Node))
    return by_dtype, linear_inputs


@pytest.mark.parametrize(
    "module, pair, limit",
    [
        (test_gpt2, lambda: test_gpt2._pair("float32", test_gpt2.TILINGS[1]), 0.6),
        (test_llama, lambda: test_llama._pair("float32", *test_llama.CASES["mqa-ragged"]), 0.65),
    ],
    ids=["gpt2", "llama"],
)
def test_models_keep_bf16_activations(module, pair, limit):
    idx, targets = module._batch()
    saved = {}
    for mode in ("fp32", "bf16-mixed"):
        model = pair()[0].set_precision(mode)
        logits, loss = model(idx, targets)
        saved[mode] = _saved_activations(loss)
        if mode == "bf16-mixed":
            assert logits.dtype == nt.bfloat16 and loss.dtype == np.float32
            loss.backward()
            grads = {p.grad.dtype for p in model.parameters()}
            assert grads == {np.dtype(np.float32)}  # master weights' gradients
    (fp32, inputs32), (mixed, inputs16) = saved["fp32"], saved["bf16-mixed"]
    assert inputs16 == {"bfloat16"} and inputs32 == {"float32"}
    # most saved bytes are bfloat16, the rest the float32 residual stream and norm inputs
    assert mixed["bfloat16"] > 1.5 * mixed["float32"]
    assert sum(mixed.values()) < limit * fp32["float32"], (mixed, fp32)
