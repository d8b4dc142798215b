"""The norm, loss, optim and embedding kernels (numtile.ops_cpu.nn, and their CUDA twins under
the simulator) against PyTorch, calling the kernels tile by tile as the runtime does.

Every problem is cut into tiles that do not divide it; kernels that accumulate commutatively
are called in a shuffled tile order. Every body runs on both backends; on cuda each call is
also checked against the CPU twin. tests/ops_cuda/test_nn.py checks the CUDA kernels on their
own cases (accumulators that start non-zero, rows that see no key, ...).
"""

import numpy as np
import pytest

from tests.kernels import NN_TOLERANCE, assert_matches_torch, leaf, random, run_nn, shuffled, spans

torch = pytest.importorskip("torch")
functional = torch.nn.functional

FLOATS = [np.float32, np.float64]

# Rows and features of the norms, cross-entropy and embedding, in tiles of ROW_TILE x COLUMN_TILE.
ROWS, ROW_TILE, FEATURES, COLUMN_TILE, VOCAB, VOCAB_TILE = 13, 8, 24, 10, 50, 17
EPS = 1e-5


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


def tiled_row_moments(backend, x):
    """s1, s2 of each row of x, accumulated over its column tiles."""
    s1, s2 = np.zeros(ROWS), np.zeros(ROWS)
    for rows, cols in norm_tiles():
        run_nn(
            backend,
            "row_moments_accumulate",
            np.ascontiguousarray(x[rows, cols]),
            s1[rows],
            s2[rows],
        )
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
def test_layer_norm_forward_and_backward_match_torch(backend, dtype):
    x, dy, gamma, beta = norm_inputs(dtype)
    s1, s2 = tiled_row_moments(backend, x)
    np.testing.assert_allclose(s1, x.astype(np.float64).sum(axis=1), rtol=1e-12)
    y = tiled_map(
        x,
        dy,
        lambda x, dy, r, c, out: run_nn(
            backend, "layer_norm_apply", x, gamma[c], beta[c], s1[r], s2[r], out, FEATURES, EPS
        ),
    )
    a1, a2 = np.zeros(ROWS), np.zeros(ROWS)
    dgamma, dbeta = np.zeros(FEATURES, dtype), np.zeros(FEATURES, dtype)
    for rows, cols in norm_tiles():
        x_tile, dy_tile = np.ascontiguousarray(x[rows, cols]), np.ascontiguousarray(dy[rows, cols])
        run_nn(
            backend,
            "layer_norm_backward_accumulate",
            x_tile,
            dy_tile,
            gamma[cols],
            s1[rows],
            s2[rows],
            a1[rows],
            a2[rows],
            FEATURES,
            EPS,
        )
        run_nn(
            backend,
            "layer_norm_param_grad",
            x_tile,
            dy_tile,
            s1[rows],
            s2[rows],
            dgamma[cols],
            dbeta[cols],
            FEATURES,
            EPS,
        )
    dx = tiled_map(
        x,
        dy,
        lambda x, dy, r, c, out: run_nn(
            backend,
            "layer_norm_backward_apply",
            x,
            dy,
            gamma[c],
            s1[r],
            s2[r],
            a1[r],
            a2[r],
            out,
            FEATURES,
            EPS,
        ),
    )
    leaves = [leaf(value) for value in (x, gamma, beta)]
    expected = functional.layer_norm(leaves[0], (FEATURES,), leaves[1], leaves[2], EPS)
    expected.backward(torch.tensor(dy, dtype=torch.float64))
    for actual, reference in zip(
        (y, dx, dgamma, dbeta), (expected.detach(), *(t.grad for t in leaves))
    ):
        assert actual.dtype == dtype
        assert_matches_torch(actual, reference, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm_forward_and_backward_match_torch(backend, dtype):
    x, dy, gamma, _ = norm_inputs(dtype)
    _, s2 = tiled_row_moments(backend, x)
    y = tiled_map(
        x,
        dy,
        lambda x, dy, r, c, out: run_nn(
            backend, "rms_norm_apply", x, gamma[c], s2[r], out, FEATURES, EPS
        ),
    )
    a2, dgamma = np.zeros(ROWS), np.zeros(FEATURES, dtype)
    for rows, cols in norm_tiles():
        x_tile, dy_tile = np.ascontiguousarray(x[rows, cols]), np.ascontiguousarray(dy[rows, cols])
        run_nn(
            backend,
            "rms_norm_backward_accumulate",
            x_tile,
            dy_tile,
            gamma[cols],
            s2[rows],
            a2[rows],
            FEATURES,
            EPS,
        )
        run_nn(
            backend, "rms_norm_param_grad", x_tile, dy_tile, s2[rows], dgamma[cols], FEATURES, EPS
        )
    dx = tiled_map(
        x,
        dy,
        lambda x, dy, r, c, out: run_nn(
            backend, "rms_norm_backward_apply", x, dy, gamma[c], s2[r], a2[r], out, FEATURES, EPS
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
        assert_matches_torch(actual, reference, dtype)


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
def test_cross_entropy_matches_torch(backend, dtype, padded):
    logits = random((ROWS, VOCAB), dtype, 11, std=4.0)
    targets = np.random.default_rng(12).integers(0, 30, ROWS)
    targets[[2, 9]] = -1  # ignored
    if padded:
        logits[:, 34:] = -np.inf  # a whole vocabulary tile of padding, never a target
    m, s, picked = np.full(ROWS, -np.inf), np.zeros(ROWS), np.zeros(ROWS)
    for rows, v_start, vocab in vocabulary_tiles():
        tile = np.ascontiguousarray(logits[rows, vocab])
        run_nn(backend, "logsumexp_accumulate", tile, m[rows], s[rows])
        run_nn(backend, "cross_entropy_pick", tile, targets[rows], v_start, picked[rows])
    kept = targets >= 0
    loss = np.sum((m + np.log(s) - picked)[kept]) / kept.sum()
    dlogits = np.full_like(logits, np.nan)
    for rows, v_start, vocab in vocabulary_tiles():
        out = np.empty_like(logits[rows, vocab])
        tile = np.ascontiguousarray(logits[rows, vocab])
        run_nn(
            backend,
            "cross_entropy_backward",
            tile,
            targets[rows],
            m[rows],
            s[rows],
            v_start,
            1 / kept.sum(),
            out,
        )
        dlogits[rows, vocab] = out
    logits_leaf = leaf(logits)
    expected = functional.cross_entropy(logits_leaf, torch.tensor(targets), ignore_index=-1)
    expected.backward()
    np.testing.assert_allclose(loss, expected.item(), rtol=NN_TOLERANCE[np.dtype(dtype)]["rtol"])
    assert dlogits.dtype == dtype
    assert_matches_torch(dlogits, logits_leaf.grad, dtype)


# --- AdamW ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_adamw_step_matches_torch_over_several_steps(backend, dtype):
    size, tile = 100, 37
    hyper = {"lr": 1e-2, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
    param = random(size, dtype, 13)
    exp_avg, exp_avg_sq = np.zeros_like(param), np.zeros_like(param)
    torch_param = torch.nn.Parameter(torch.tensor(param))
    optimizer = torch.optim.AdamW([torch_param], **hyper)
    for step in range(1, 6):
        grad = random(size, dtype, 100 + step)
        for first, last in shuffled(spans(size, tile), step):
            run_nn(
                backend,
                "adamw_step",
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
        assert_matches_torch(actual, reference.detach().double(), dtype)


# --- embedding -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_embedding_gather_and_scatter_add_match_torch(backend, dtype):
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
        run_nn(
            backend,
            "embedding_gather",
            ids,
            np.ascontiguousarray(table[vocab, cols]),
            v_start,
            out_tile,
        )
        out[:, cols] = out_tile
        grad_tile = np.ascontiguousarray(grad_table[vocab, cols])
        run_nn(
            backend,
            "embedding_scatter_add",
            ids,
            np.ascontiguousarray(grad_out[:, cols]),
            v_start,
            grad_tile,
        )
        grad_table[vocab, cols] = grad_tile
    # The middle vocabulary tile holds ids 17..33: rows with any other id stay untouched, the
    # neighbours 16 and 34 included.
    v_start, v_stop = VOCAB_TILE, 2 * VOCAB_TILE
    ids_in_tile = (v_start <= ids) & (ids < v_stop)
    probe = np.full((ROWS, COLUMN_TILE), np.nan, dtype)
    tile = np.ascontiguousarray(table[v_start:v_stop, :COLUMN_TILE])
    run_nn(backend, "embedding_gather", ids, tile, v_start, probe)
    assert np.isnan(probe[~ids_in_tile]).all() and not np.isnan(probe[ids_in_tile]).any()
    table_leaf = leaf(table)
    expected = functional.embedding(torch.tensor(ids), table_leaf)
    expected.backward(torch.tensor(grad_out, dtype=torch.float64))
    assert_matches_torch(out, expected.detach(), dtype)
    assert_matches_torch(grad_table, table_leaf.grad, dtype)
