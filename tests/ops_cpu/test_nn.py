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
    """actual == expected (a NumPy array or torch tensor) within the tolerance of ``dtype``."""
    np.testing.assert_allclose(actual, np.asarray(expected, np.float64), **TOLERANCE[dtype])


def leaf(x):
    """float64 torch tensor of ``x`` that records gradients."""
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


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
    assert_close(lse, expected_lse.detach(), dtype)


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
        nn.attention_backward_block(
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
        assert_close(gradient, reference.grad, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_attention_forward_block_leaves_rows_that_see_nothing_unchanged(dtype):
    q, k, v, _ = (x[:6, : 2 * D].copy() for x in attention_inputs(dtype))
    # Any running state: m well below the scores, so that every row that sees a key changes.
    m, l, acc = (
        random((6, 2), np.float64, 5) - 10,
        random((6, 2), np.float64, 6) ** 2,
        q[::-1].copy(),
    )
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
    """(row slice, column slice) of every tile of a (ROWS, FEATURES) activation, shuffled."""
    return shuffled(
        (slice(*r), slice(*c)) for r in spans(ROWS, ROW_TILE) for c in spans(FEATURES, COLUMN_TILE)
    )


def norm_inputs(dtype):
    """x with a nonzero mean, upstream gradient dy, gamma and beta."""
    x = random((ROWS, FEATURES), dtype, 7, mean=3.0, std=2.0)
    dy = random((ROWS, FEATURES), dtype, 8)
    return x, dy, random(FEATURES, dtype, 9, mean=1.0), random(FEATURES, dtype, 10)


def tiled_row_moments(x):
    """s1, s2 of each row of x, accumulated over its column tiles."""
    s1, s2 = np.zeros(ROWS), np.zeros(ROWS)
    for rows, cols in norm_tiles():
        nn.row_moments_accumulate(np.ascontiguousarray(x[rows, cols]), s1[rows], s2[rows])
    return s1, s2


def tiled_map(x, dy, kernel):
    """Array like x assembled from kernel(x tile, dy tile, rows, cols, output tile) per tile."""
    result = np.full_like(x, np.nan)
    for rows, cols in norm_tiles():
        out = np.empty_like(x[rows, cols])
        kernel(
            np.ascontiguousarray(x[rows, cols]),
            np.ascontiguousarray(dy[rows, cols]),
            rows,
            cols,
            out,
        )
        result[rows, cols] = out
    return result


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_forward_and_backward_match_torch(dtype):
    x, dy, gamma, beta = norm_inputs(dtype)
    s1, s2 = tiled_row_moments(x)
    np.testing.assert_allclose(s1, x.astype(np.float64).sum(axis=1), rtol=1e-12)
    y = tiled_map(
        x,
        dy,
        lambda x, dy, r, c, out: nn.layer_norm_apply(
            x, gamma[c], beta[c], s1[r], s2[r], out, FEATURES, EPS
        ),
    )
    a1, a2 = np.zeros(ROWS), np.zeros(ROWS)
    dgamma, dbeta = np.zeros(FEATURES, dtype), np.zeros(FEATURES, dtype)
    for rows, cols in norm_tiles():
        x_tile, dy_tile = np.ascontiguousarray(x[rows, cols]), np.ascontiguousarray(dy[rows, cols])
        nn.layer_norm_backward_accumulate(
            x_tile, dy_tile, gamma[cols], s1[rows], s2[rows], a1[rows], a2[rows], FEATURES, EPS
        )
        nn.layer_norm_param_grad(
            x_tile, dy_tile, s1[rows], s2[rows], dgamma[cols], dbeta[cols], FEATURES, EPS
        )
    dx = tiled_map(
        x,
        dy,
        lambda x, dy, r, c, out: nn.layer_norm_backward_apply(
            x, dy, gamma[c], s1[r], s2[r], a1[r], a2[r], out, FEATURES, EPS
        ),
    )
    leaves = [leaf(value) for value in (x, gamma, beta)]
    expected = functional.layer_norm(leaves[0], (FEATURES,), leaves[1], leaves[2], EPS)
    expected.backward(torch.tensor(dy, dtype=torch.float64))
    for actual, reference in zip(
        (y, dx, dgamma, dbeta), (expected.detach(), *(t.grad for t in leaves))
    ):
        assert actual.dtype == dtype
        assert_close(actual, reference, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm_forward_and_backward_match_torch(dtype):
    x, dy, gamma, _ = norm_inputs(dtype)
    _, s2 = tiled_row_moments(x)
    y = tiled_map(
        x, dy, lambda x, dy, r, c, out: nn.rms_norm_apply(x, gamma[c], s2[r], out, FEATURES, EPS)
    )
    a2, dgamma = np.zeros(ROWS), np.zeros(FEATURES, dtype)
    for rows, cols in norm_tiles():
        x_tile, dy_tile = np.ascontiguousarray(x[rows, cols]), np.ascontiguousarray(dy[rows, cols])
        nn.rms_norm_backward_accumulate(
            x_tile, dy_tile, gamma[cols], s2[rows], a2[rows], FEATURES, EPS
        )
        nn.rms_norm_param_grad(x_tile, dy_tile, s2[rows], dgamma[cols], FEATURES, EPS)
    dx = tiled_map(
        x,
        dy,
        lambda x, dy, r, c, out: nn.rms_norm_backward_apply(
            x, dy, gamma[c], s2[r], a2[r], out, FEATURES, EPS
        ),
    )
    x_leaf, gamma_leaf = leaf(x), leaf(gamma)
    rstd = torch.rsqrt(x_leaf.pow(2).mean(dim=-1, keepdim=True) + EPS)  # (ROWS, 1)
    expected = x_leaf * rstd * gamma_leaf
    expected.backward(torch.tensor(dy, dtype=torch.float64))
    for actual, reference in zip(
        (y, dx, dgamma), (expected.detach(), x_leaf.grad, gamma_leaf.grad)
    ):
        assert actual.dtype == dtype
        assert_close(actual, reference, dtype)


# --- cross-entropy -----------------------------------------------------------------------------


def vocabulary_tiles():
    """(row slice, vocabulary start, vocabulary slice) of every (ROWS, VOCAB) tile, shuffled."""
    return shuffled(
        (slice(*r), v[0], slice(*v))
        for r in spans(ROWS, ROW_TILE)
        for v in spans(VOCAB, VOCAB_TILE)
    )


@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded-vocabulary"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy_matches_torch(dtype, padded):
    logits = random((ROWS, VOCAB), dtype, 11, std=4.0)
    targets = np.random.default_rng(12).integers(0, 30, ROWS)
    targets[[2, 9]] = -1  # ignored
    if padded:
        logits[:, 34:] = -np.inf  # a whole vocabulary tile of padding, never a target
    m, s, picked = np.full(ROWS, -np.inf), np.zeros(ROWS), np.zeros(ROWS)
    for rows, v_start, vocab in vocabulary_tiles():
        tile = np.ascontiguousarray(logits[rows, vocab])
        nn.logsumexp_accumulate(tile, m[rows], s[rows])
        nn.cross_entropy_pick(tile, targets[rows], v_start, picked[rows])
    kept = targets >= 0
    loss = np.sum((m + np.log(s) - picked)[kept]) / kept.sum()
    dlogits = np.full_like(logits, np.nan)
    for rows, v_start, vocab in vocabulary_tiles():
        out = np.empty_like(logits[rows, vocab])
        tile = np.ascontiguousarray(logits[rows, vocab])
        nn.cross_entropy_backward(
            tile, targets[rows], m[rows], s[rows], v_start, 1 / kept.sum(), out
        )
        dlogits[rows, vocab] = out
    logits_leaf = leaf(logits)
    expected = functional.cross_entropy(logits_leaf, torch.tensor(targets), ignore_index=-1)
    expected.backward()
    np.testing.assert_allclose(loss, expected.item(), rtol=TOLERANCE[dtype]["rtol"])
    assert dlogits.dtype == dtype
    assert_close(dlogits, logits_leaf.grad, dtype)


# --- AdamW ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_adamw_step_matches_torch_over_several_steps(dtype):
    size, tile = 100, 37
    hyper = {"lr": 1e-2, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
    param = random(size, dtype, 13)
    exp_avg, exp_avg_sq = np.zeros_like(param), np.zeros_like(param)
    torch_param = torch.nn.Parameter(torch.tensor(param))
    optimizer = torch.optim.AdamW([torch_param], **hyper)
    for step in range(1, 6):
        grad = random(size, dtype, 100 + step)
        for first, last in shuffled(spans(size, tile), step):
            nn.adamw_step(
                param[first:last],
                grad[first:last],
                exp_avg[first:last],
                exp_avg_sq[first:last],
                hyper["lr"],
                *hyper["betas"],
                hyper["eps"],
                hyper["weight_decay"],
                step,
            )
        torch_param.grad = torch.tensor(grad)
        optimizer.step()
    state = optimizer.state[torch_param]
    for actual, reference in (
        (param, torch_param),
        (exp_avg, state["exp_avg"]),
        (exp_avg_sq, state["exp_avg_sq"]),
    ):
        assert actual.dtype == dtype
        assert_close(actual, reference.detach().double(), dtype)


# --- embedding -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_embedding_gather_and_scatter_add_match_torch(dtype):
    table = random((VOCAB, FEATURES), dtype, 14)
    ids = np.random.default_rng(15).integers(0, VOCAB, ROWS)
    ids[[3, 7, 11]] = ids[0]  # repeated ids accumulate their gradients
    ids[[1, 5]] = VOCAB_TILE - 1, 2 * VOCAB_TILE  # next to the middle tile's ids
    grad_out = random((ROWS, FEATURES), dtype, 16)
    tiles = shuffled(
        (v[0], slice(*v), slice(*c))
        for v in spans(VOCAB, VOCAB_TILE)
        for c in spans(FEATURES, COLUMN_TILE)
    )
    out = np.full((ROWS, FEATURES), np.nan, dtype)
    grad_table = np.zeros_like(table)
    for v_start, vocab, cols in tiles:
        out_tile = np.ascontiguousarray(out[:, cols])
        nn.embedding_gather(ids, np.ascontiguousarray(table[vocab, cols]), v_start, out_tile)
        out[:, cols] = out_tile
        grad_tile = np.ascontiguousarray(grad_table[vocab, cols])
        nn.embedding_scatter_add(ids, np.ascontiguousarray(grad_out[:, cols]), v_start, grad_tile)
        grad_table[vocab, cols] = grad_tile
    # The middle vocabulary tile holds ids 17..33: rows with any other id stay untouched, the
    # neighbours 16 and 34 included.
    v_start, v_stop = VOCAB_TILE, 2 * VOCAB_TILE
    ids_in_tile = (v_start <= ids) & (ids < v_stop)
    probe = np.full((ROWS, COLUMN_TILE), np.nan, dtype)
    tile = np.ascontiguousarray(table[v_start:v_stop, :COLUMN_TILE])
    nn.embedding_gather(ids, tile, v_start, probe)
    assert np.isnan(probe[~ids_in_tile]).all() and not np.isnan(probe[ids_in_tile]).any()
    table_leaf = leaf(table)
    expected = functional.embedding(torch.tensor(ids), table_leaf)
    expected.backward(torch.tensor(grad_out, dtype=torch.float64))
    assert_close(out, expected.detach(), dtype)
    assert_close(grad_table, table_leaf.grad, dtype)
