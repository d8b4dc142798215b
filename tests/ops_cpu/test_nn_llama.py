"""LLaMA's tile kernels on both backends (CUDA under the simulator, checked against its CPU
twin too): grouped-query flash attention against PyTorch's scaled_dot_product_attention with
repeated key/value heads, and the rotary embedding against Hugging Face's formula.

Query tiles hold ``head_tile`` heads: a divisor of the group (several query tiles read one
key/value head) or a multiple of it (one query tile reads several key/value heads).
"""

import numpy as np
import pytest

from tests.kernels import assert_matches_torch, block, leaf, random, run_nn, shuffled, spans

torch = pytest.importorskip("torch")
functional = torch.nn.functional

FLOATS = [np.float32, np.float64]
T, TQ, TK, HEADS, KV_HEADS, D = 23, 8, 7, 6, 2, 4
GROUP = HEADS // KV_HEADS
SCALE = 0.4


def kv_span(heads):
    """(first, last + 1) key/value heads the query heads ``heads`` read."""
    return heads[0] // GROUP, (heads[1] - 1) // GROUP + 1


def cols(heads):
    return heads[0] * D, heads[1] * D


def torch_gqa(q, k, v, causal):
    """Reference output (T, HEADS * D) with k, v repeated per group, and the leaves."""
    leaves = [leaf(x) for x in (q, k, v)]
    qh = leaves[0].reshape(T, HEADS, D).transpose(0, 1)  # (HEADS, T, D)
    kh, vh = (x.reshape(T, KV_HEADS, D).transpose(0, 1) for x in leaves[1:])  # (KV, T, D)
    kh, vh = (x.repeat_interleave(GROUP, dim=0) for x in (kh, vh))  # (HEADS, T, D)
    out = functional.scaled_dot_product_attention(qh, kh, vh, is_causal=causal, scale=SCALE)
    return out.transpose(0, 1).reshape(T, HEADS * D), leaves


@pytest.mark.parametrize("head_tile", [3, 6])  # one key/value head per tile, or two
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_grouped_attention_matches_sdpa(backend, dtype, causal, head_tile):
    q = random((T, HEADS * D), dtype, 1)
    k, v = random((T, KV_HEADS * D), dtype, 2), random((T, KV_HEADS * D), dtype, 3)
    dout = random((T, HEADS * D), dtype, 4)
    head_tiles = spans(HEADS, head_tile)
    out, lse = np.empty_like(q), np.empty((T, HEADS))
    for rows in spans(T, TQ):
        for heads in head_tiles:
            n_heads, kv = heads[1] - heads[0], cols(kv_span(heads))
            m = np.full((rows[1] - rows[0], n_heads), -np.inf)
            l, acc = np.zeros_like(m), np.zeros((rows[1] - rows[0], n_heads * D), dtype)
            for keys in shuffled(spans(T, TK)):
                k_tile, v_tile = block(k, keys, kv), block(v, keys, kv)
                args = (n_heads, SCALE, rows[0], keys[0], causal, GROUP)
                run_nn(
                    backend,
                    "attention_forward_block",
                    block(q, rows, cols(heads)),
                    k_tile,
                    v_tile,
                    m,
                    l,
                    acc,
                    *args,
                )
            out_tile, lse_tile = np.empty_like(acc), np.empty_like(m)
            run_nn(backend, "attention_forward_finalize", acc, m, l, out_tile, lse_tile, n_heads)
            out[rows[0] : rows[1], slice(*cols(heads))] = out_tile
            lse[rows[0] : rows[1], slice(*heads)] = lse_tile
    expected, leaves = torch_gqa(q, k, v, causal)
    assert_matches_torch(out, expected.detach(), dtype)

    expected.backward(torch.tensor(dout, dtype=torch.float64))
    delta = np.sum((dout.astype(np.float64) * out).reshape(T, HEADS, D), axis=2)
    dq = np.zeros_like(q)
    dk, dv = np.zeros_like(k), np.zeros_like(k)
    pairs = [(r, c, h) for r in spans(T, TQ) for c in spans(T, TK) for h in head_tiles]
    for rows, keys, heads in shuffled(pairs):
        kv = cols(kv_span(heads))
        grads = [block(dq, rows, cols(heads)), block(dk, keys, kv), block(dv, keys, kv)]
        run_nn(
            backend,
            "attention_backward_block",
            block(q, rows, cols(heads)),
            block(k, keys, kv),
            block(v, keys, kv),
            block(dout, rows, cols(heads)),
            block(lse, rows, heads),
            block(delta, rows, heads),
            *grads,
            heads[1] - heads[0],
            SCALE,
            rows[0],
            keys[0],
            causal,
            GROUP,
        )
        for target, (r, c), tile in zip(
            (dq, dk, dv), ((rows, cols(heads)), (keys, kv), (keys, kv)), grads
        ):
            target[r[0] : r[1], c[0] : c[1]] = tile
    for gradient, reference in zip((dq, dk, dv), leaves):
        assert_matches_torch(gradient, reference.grad, dtype)


@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_rope_matches_rotate_half(backend, dtype, inverse):
    rows, heads, width = 19, 3, 6  # half-width 3; 19 * 3 * 3 pairs exceed the simulator's threads
    x = random((rows, heads * width), dtype, 0)
    angles = np.arange(rows)[:, None] * (0.3 ** np.arange(width // 2))  # (rows, width / 2)
    cos, sin = np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)
    out = random(x.shape, dtype, 1)
    run_nn(backend, "rope_apply", x, cos, sin, out, heads, inverse)
    c = torch.tensor(np.concatenate([cos, cos], axis=1), dtype=torch.float64)[:, None, :]
    s = torch.tensor(np.concatenate([sin, sin], axis=1), dtype=torch.float64)[:, None, :]

    def rotary(y):  # Hugging Face's apply_rotary_pos_emb on (rows, heads, width)
        half = torch.cat((-y[..., width // 2 :], y[..., : width // 2]), dim=-1)
        return y * c + half * s

    xt = leaf(x).reshape(rows, heads, width)
    if inverse:  # the backward: the rotation's transpose applied to x as the output gradient
        probe = leaf(np.zeros_like(x)).reshape(rows, heads, width)
        (expected,) = torch.autograd.grad(rotary(probe), probe, xt.detach())
    else:
        expected = rotary(xt)
    expected = expected.reshape(rows, heads * width)
    assert_matches_torch(out, expected.detach(), dtype)
