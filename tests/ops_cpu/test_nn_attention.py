"""The flash-attention kernels (numtile.ops_cpu.nn.attention, and their CUDA twins under the
simulator) against PyTorch's scaled_dot_product_attention, tile by tile as the runtime calls
them, on both backends, as in test_nn.py: query, key and head tiles that do not divide the
problem, key blocks in increasing or shuffled order, backward pairs in any order.
"""

import numpy as np
import pytest

from tests.kernels import (
    assert_matches_torch,
    block,
    leaf,
    random,
    run_nn,
    shuffled,
    spans,
)

torch = pytest.importorskip("torch")
functional = torch.nn.functional

FLOATS = [np.float32, np.float64]

# Attention: sequence T in query tiles of TQ and key tiles of TK, HEADS heads of width D in
# tiles of HEADS_PER_TILE heads (the last tile holds one).
T, TQ, TK, HEADS, HEADS_PER_TILE, D = 37, 16, 11, 5, 2, 8
SCALE = 0.4  # not 1/sqrt(D), so a kernel that ignores its scale argument fails


# --- attention -----------------------------------------------------------------------------------


def head_tiles():
    """(first head, last head + 1) of each head tile."""
    return spans(HEADS, HEADS_PER_TILE)


def columns(heads):
    """(first column, last column + 1) of the head tile ``heads``."""
    return heads[0] * D, heads[1] * D


def attention_inputs(dtype, magnitude=1.0):
    """q, k, v, dout of shape (T, HEADS * D)."""
    shape = (T, HEADS * D)
    q = random(shape, dtype, 1, std=magnitude)
    return q, random(shape, dtype, 2), random(shape, dtype, 3), random(shape, dtype, 4)


def torch_attention(q, k, v, causal):
    """Reference output (T, HEADS * D) and log-sum-exp (T, HEADS), leaves for autograd."""
    leaves = [leaf(x) for x in (q, k, v)]
    # (T, HEADS * D) -> (HEADS, T, D)
    heads = [x.reshape(T, HEADS, D).transpose(0, 1) for x in leaves]
    out = functional.scaled_dot_product_attention(*heads, is_causal=causal, scale=SCALE)
    scores = SCALE * heads[0] @ heads[1].transpose(1, 2)  # (HEADS, T, T)
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -torch.inf)
    lse = torch.logsumexp(scores, dim=-1).T  # (T, HEADS)
    return out.transpose(0, 1).reshape(T, HEADS * D), lse, leaves


def tiled_attention_forward(backend, q, k, v, causal, key_order):
    """out and lse assembled from forward_block calls on key tiles in ``key_order`` per
    (query tile, head tile), then finalize."""
    out = np.empty_like(q)
    lse = np.empty((T, HEADS))
    for rows in spans(T, TQ):
        for heads in head_tiles():
            n_heads, n_queries = heads[1] - heads[0], rows[1] - rows[0]
            q_tile = block(q, rows, columns(heads))
            m = np.full((n_queries, n_heads), -np.inf)
            l = np.zeros((n_queries, n_heads))
            acc = np.zeros((n_queries, n_heads * D), q.dtype)
            for keys in key_order(spans(T, TK)):
                k_tile, v_tile = block(k, keys, columns(heads)), block(v, keys, columns(heads))
                run_nn(
                    backend,
                    "attention_forward_block",
                    q_tile,
                    k_tile,
                    v_tile,
                    m,
                    l,
                    acc,
                    n_heads,
                    SCALE,
                    rows[0],
                    keys[0],
                    causal,
                )
            out_tile, lse_tile = np.empty_like(acc), np.empty_like(m)
            run_nn(backend, "attention_forward_finalize", acc, m, l, out_tile, lse_tile, n_heads)
            out[rows[0] : rows[1], slice(*columns(heads))] = out_tile
            lse[rows[0] : rows[1], slice(*heads)] = lse_tile
    return out, lse


KEY_ORDERS = {"increasing": list, "shuffled": shuffled}


@pytest.mark.parametrize("key_order", list(KEY_ORDERS))
@pytest.mark.parametrize("magnitude", [1.0, 30.0], ids=["moderate", "large-scores"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_attention_forward_matches_sdpa(backend, dtype, causal, magnitude, key_order):
    q, k, v, _ = attention_inputs(dtype, magnitude)
    out, lse = tiled_attention_forward(backend, q, k, v, causal, KEY_ORDERS[key_order])
    expected_out, expected_lse, _ = torch_attention(q, k, v, causal)
    assert out.dtype == dtype
    assert_matches_torch(out, expected_out.detach(), dtype)
    assert_matches_torch(lse, expected_lse.detach(), dtype)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_attention_backward_matches_autograd(backend, dtype, causal):
    q, k, v, dout = attention_inputs(dtype)
    out, lse = tiled_attention_forward(backend, q, k, v, causal, list)
    expected_out, _, leaves = torch_attention(q, k, v, causal)
    expected_out.backward(torch.tensor(dout, dtype=torch.float64))

    delta = np.empty((T, HEADS))
    for rows in spans(T, TQ):
        for heads in head_tiles():
            delta_tile = np.empty((rows[1] - rows[0], heads[1] - heads[0]))
            tiles = (block(x, rows, columns(heads)) for x in (dout, out))
            run_nn(backend, "attention_backward_delta", *tiles, delta_tile, heads[1] - heads[0])
            delta[rows[0] : rows[1], slice(*heads)] = delta_tile
    expected_delta = np.sum((dout.astype(np.float64) * out).reshape(T, HEADS, D), axis=2)
    np.testing.assert_allclose(delta, expected_delta, rtol=1e-12)

    def zero_tiles(span_size):
        """(span, heads) -> zero gradient tile, for every tile of an axis cut in span_size."""
        return {
            (span, heads): np.zeros((span[1] - span[0], D * (heads[1] - heads[0])), dtype)
            for span in spans(T, span_size)
            for heads in head_tiles()
        }

    dq, dk, dv = zero_tiles(TQ), zero_tiles(TK), zero_tiles(TK)
    pairs = [(r, c, h) for r in spans(T, TQ) for c in spans(T, TK) for h in head_tiles()]
    for rows, keys, heads in shuffled(pairs):
        cols = columns(heads)
        run_nn(
            backend,
            "attention_backward_block",
            block(q, rows, cols),
            block(k, keys, cols),
            block(v, keys, cols),
            block(dout, rows, cols),
            block(lse, rows, heads),
            block(delta, rows, heads),
            dq[rows, heads],
            dk[keys, heads],
            dv[keys, heads],
            heads[1] - heads[0],
            SCALE,
            rows[0],
            keys[0],
            causal,
        )
    for tiles, reference in zip((dq, dk, dv), leaves):
        gradient = np.empty_like(q)
        for (span, heads), tile in tiles.items():
            gradient[span[0] : span[1], slice(*columns(heads))] = tile
        assert_matches_torch(gradient, reference.grad, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_attention_forward_block_leaves_rows_that_see_nothing_unchanged(backend, dtype):
    q, k, v, _ = (x[:6, : 2 * D].copy() for x in attention_inputs(dtype))
    # Any running state: m well below the scores, so that every row that sees a key changes.
    m, l, acc = (
        random((6, 2), np.float64, 5) - 10,
        random((6, 2), np.float64, 6) ** 2,
        q[::-1].copy(),
    )
    m_before, l_before, acc_before = m.copy(), l.copy(), acc.copy()
    # Queries 10..15 and keys 20..25: the whole block lies in the future.
    run_nn(backend, "attention_forward_block", q, k, v, m, l, acc, 2, SCALE, 10, 20, True)
    for after, before in ((m, m_before), (l, l_before), (acc, acc_before)):
        np.testing.assert_array_equal(after, before)
    # Queries 10..15 and keys 13..18: rows 0-2 see nothing, rows 3-5 see keys 0..i-3.
    run_nn(backend, "attention_forward_block", q, k, v, m, l, acc, 2, SCALE, 10, 13, True)
    for after, before in ((m, m_before), (l, l_before), (acc, acc_before)):
        np.testing.assert_array_equal(after[:3], before[:3])
        assert np.all(after[3:] != before[3:])
