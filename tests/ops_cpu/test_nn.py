"""numtile.ops_cpu.nn against PyTorch, calling the kernels tile by tile as the runtime does.

Every problem is cut into tiles that do not divide it; kernels that accumulate commutatively
are called in a shuffled tile order.
"""

import numpy as np
import pytest

from numtile.ops_cpu import nn

torch = pytest.importorskip("torch")
functional = torch.nn.functional

FLOATS = [np.float32, np.float64]
TOLERANCE = {
    np.float32: {"rtol": 2e-4, "atol": 2e-5},
    np.float64: {"rtol": 1e-10, "atol": 1e-12},
}

# Attention: sequence T in query tiles of TQ and key tiles of TK, HEADS heads of width D in
# tiles of HEADS_PER_TILE heads (the last tile holds one).
T, TQ, TK, HEADS, HEADS_PER_TILE, D = 37, 16, 11, 5, 2, 8
SCALE = 0.4  # not 1/sqrt(D), so a kernel that ignores its scale argument fails

# Rows and features of the norms, cross-entropy and embedding, in tiles of ROW_TILE x COLUMN_TILE.
ROWS, ROW_TILE, FEATURES, COLUMN_TILE, VOCAB, VOCAB_TILE = 13, 8, 24, 10, 50, 17
EPS = 1e-5


def spans(size, tile):
    """(start, stop) of each tile of an axis of ``size`` cut in tiles of ``tile``."""
    return [(start, min(start + tile, size)) for start in range(0, size, tile)]


def shuffled(items, seed=0):
    """``items`` as a list in a reproducible random order."""
    items = list(items)
    np.random.default_rng(seed).shuffle(items)
    return items


def block(x, rows, columns):
    """Contiguous copy of the tile of the 2-D ``x`` at ``rows`` x ``columns`` (start, stop)."""
    return np.ascontiguousarray(x[rows[0] : rows[1], columns[0] : columns[1]])


def random(shape, dtype, seed, mean=0.0, std=1.0):
    """Reproducible normal array of ``dtype``."""
    return np.random.default_rng(seed).normal(mean, std, shape).astype(dtype)


def assert_close(actual, expected, dtype):
    np.testing.assert_allclose(actual, np.asarray(expected, np.float64), **TOLERANCE[dtype])


def leaf(x):
    """float64 torch tensor of ``x`` that records gradients."""
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


# --- attention -----------------------------------------------------------------------------------


def head_tiles():
    """(first head, last head + 1) of each head tile."""
    return spans(HEADS, HEADS_PER_TILE)


def columns(heads):
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


def tiled_attention_forward(q, k, v, causal, key_order):
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
                nn.attention_forward_block(
                    q_tile, k_tile, v_tile, m, l, acc, n_heads, SCALE, rows[0], keys[0], causal
                )
            out_tile, lse_tile = np.empty_like(acc), np.empty_like(m)
            nn.attention_forward_finalize(acc, m, l, out_tile, lse_tile, n_heads)
            out[rows[0] : rows[1], slice(*columns(heads))] = out_tile
            lse[rows[0] : rows[1], slice(*heads)] = lse_tile
    return out, lse


KEY_ORDERS = {"increasing": list, "shuffled": shuffled}


@pytest.mark.parametrize("key_order", list(KEY_ORDERS))
@pytest.mark.parametrize("magnitude", [1.0, 30.0], ids=["moderate", "large-scores"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_attention_forward_matches_sdpa(dtype, causal, magnitude, key_order):
    q, k, v, _ = attention_inputs(dtype, magnitude)
    out, lse = tiled_attention_forward(q, k, v, causal, KEY_ORDERS[key_order])
    expected_out, expected_lse, _ = torch_attention(q, k, v, causal)
    assert out.dtype == dtype
    assert_close(out, expected_out.detach(), dtype)
    np.testing.assert_allclose(lse, expected_lse.detach(), rtol=TOLERANCE[dtype]["rtol"])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_attention_backward_matches_autograd(dtype, causal):
    q, k, v, dout = attention_inputs(dtype)
    out, lse = tiled_attention_forward(q, k, v, causal, list)
    expected_out, _, leaves = torch_attention(q, k, v, causal)
    expected_out.backward(torch.tensor(dout, dtype=torch.float64))

    delta = np.empty((T, HEADS))
    for rows in spans(T, TQ):
        for heads in head_tiles():
            delta_tile = np.empty((rows[1] - rows[0], heads[1] - heads[0]))
            tiles = (block(x, rows, columns(heads)) for x in (dout, out))
            nn.attention_backward_delta(*tiles, delta_tile, heads[1] - heads[0])
            delta[rows[0] : rows[1], slice(*heads)] = delta_tile
    np.testing.assert_allclose(delta, np.sum((dout * out).reshape(T, HEADS, D), axis=2))

    gradients = [np.zeros_like(q) for _ in range(3)]  # dq, dk, dv
    tile_gradients = {}  # (rows or keys, heads) -> gradient tile, as the runtime holds them
    pairs = [(r, c, h) for r in spans(T, TQ) for c in spans(T, TK) for h in head_tiles()]
    for rows, keys, heads in shuffled(pairs):
        cols = columns(heads)
        dq, dk, dv = (
            tile_gradients.setdefault((name, span, heads), np.zeros((span[1] - span[0], 0)))
            if False
            else tile_gradients.setdefault(
                (name, span, heads), np.zeros((span[1] - span[0], cols[1] - cols[0]), dtype)
            )
            for name, span in (("q", rows), ("k", keys), ("v", keys))
        )
        nn.attention_backward_block(
            block(q, rows, cols),
            block(k, keys, cols),
            block(v, keys, cols),
            block(dout, rows, cols),
            block(lse, rows, heads),
            block(delta, rows, heads),
            dq,
            dk,
            dv,
            heads[1] - heads[0],
            SCALE,
            rows[0],
            keys[0],
            causal,
        )
    for (name, span, heads), gradient in tile_gradients.items():
        gradients["qkv".index(name)][span[0] : span[1], slice(*columns(heads))] = gradient
    for gradient, reference in zip(gradients, leaves):
        assert gradient.dtype == dtype
        assert_close(gradient, reference.grad, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_attention_forward_block_leaves_rows_that_see_nothing_unchanged(dtype):
    q, k, v, _ = (x[:6, : 2 * D].copy() for x in attention_inputs(dtype))
    m, l, acc = random((6, 2), np.float64, 5), random((6, 2), np.float64, 6) ** 2, q[:, ::-1]
    m_before, l_before, acc_before = m.copy(), l.copy(), acc.copy()
    # Queries 10..15 and keys 20..25: the whole block lies in the future.
    nn.attention_forward_block(q, k, v, m, l, acc, 2, SCALE, 10, 20, True)
    for after, before in ((m, m_before), (l, l_before), (acc, acc_before)):
        np.testing.assert_array_equal(after, before)
    # Queries 10..15 and keys 13..18: rows 0-2 see nothing, rows 3-5 see keys 0..i-3.
    nn.attention_forward_block(q, k, v, m, l, acc, 2, SCALE, 10, 13, True)
    for after, before in ((m, m_before), (l, l_before), (acc, acc_before)):
        np.testing.assert_array_equal(after[:3], before[:3])
        assert np.all(after[3:] != before[3:])


# --- layer norm and RMS norm -------------------------------------------------------------------


def norm_tiles():
    """(rows, columns) spans of every tile of a (ROWS, FEATURES) activation, shuffled."""
    return shuffled((r, c) for r in spans(ROWS, ROW_TILE) for c in spans(FEATURES, COLUMN_TILE))


def norm_inputs(dtype):
    """x with a nonzero mean, upstream gradient dy, gamma and beta."""
    x = random((ROWS, FEATURES), dtype, 7, mean=3.0, std=2.0)
    dy = random((ROWS, FEATURES), dtype, 8)
    return x, dy, random(FEATURES, dtype, 9, mean=1.0), random(FEATURES, dtype, 10)


def tiled_norm(x, dy, apply, backward_accumulate, backward_apply, param_grad, centered):
    """y, dx, [dgamma, dbeta] of a norm: rows split over column tiles, two phases each way.

    The kernels get the tile arrays and the row statistics of the tile's rows; the layer norm
    ones also s1, a1 and dbeta, which the RMS norm ones do not take.
    """
    s1, s2, a1, a2 = (np.zeros(ROWS) for _ in range(4))
    y, dx = np.empty_like(x), np.empty_like(x)
    parameter_grads = [np.zeros(FEATURES, x.dtype) for _ in range(2 if centered else 1)]

    def moments(rows):
        pick = slice(*rows)
        return (s1[pick], s2[pick]) if centered else (s2[pick],)

    def sums(rows):
        pick = slice(*rows)
        return (a1[pick], a2[pick]) if centered else (a2[pick],)

    for rows, cols in norm_tiles():
        nn.row_moments_accumulate(block(x, rows, cols), s1[slice(*rows)], s2[slice(*rows)])
    for rows, cols in norm_tiles():
        y_tile = np.empty((rows[1] - rows[0], cols[1] - cols[0]), x.dtype)
        apply(block(x, rows, cols), *apply.parameters(cols), *moments(rows), y_tile, FEATURES, EPS)
        y[slice(*rows), slice(*cols)] = y_tile
    for rows, cols in norm_tiles():
        x_tile, dy_tile, gamma = block(x, rows, cols), block(dy, rows, cols), gamma_of(cols)
        backward_accumulate(x_tile, dy_tile, gamma, *moments(rows), *sums(rows), FEATURES, EPS)
    return y, dx, parameter_grads


def tiled_norm_forward(x, gamma, beta, centered):
    """y of a layer norm (centered) or RMS norm, with rows split over column tiles."""
    s1, s2 = np.zeros(ROWS), np.zeros(ROWS)
    for rows, cols in norm_tiles():
        nn.row_moments_accumulate(block(x, rows, cols), s1[slice(*rows)], s2[slice(*rows)])
    y = np.empty_like(x)
    for rows, cols in norm_tiles():
        x_tile, out = block(x, rows, cols), np.empty((rows[1] - rows[0], cols[1] - cols[0]), x.dtype)
        if centered:
            nn.layer_norm_apply(x_tile, gamma[slice(*cols)], beta[slice(*cols)], s1[slice(*rows)], s2[slice(*rows)], out, FEATURES, EPS)
    return y
