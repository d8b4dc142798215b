"""Generation with the key/value cache against transformers' ``generate`` on the same weights,
and the decode tiled ops against NumPy."""

import numpy as np
import pytest
import torch
from transformers import GPT2Config as HFConfig
from transformers import GPT2LMHeadModel

import numtile as nt
from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling
from numtile.tiletensor.fused.decode import cache_write, decode_attention, kv_cache

CONFIG = dict(vocab_size=37, n_positions=24, n_embd=12, n_layer=2, n_head=3)
TILINGS = [
    (Tiling(), None),  # one tile per axis, the cache one tile
    (Tiling(batch=1, seq=4, embd=8, inner=20, head=1, vocab=10), 5),  # nothing divides
    (Tiling(batch=2, seq=3, embd=12, inner=48, head=3, vocab=37), 7),
]


def _pair(tiling, seed=0, **extra):
    torch.manual_seed(seed)
    hf = GPT2LMHeadModel(HFConfig(**CONFIG, **extra)).eval()
    ours = GPT2(GPT2Config(**CONFIG), tiling)
    ours.load_state_dict(
        {k: v for k, v in hf.state_dict().items() if not k.endswith((".attn.bias", "masked_bias"))}
    )
    return ours, hf


def _hf_generate(hf, prompt, n, **options):
    with torch.no_grad():
        return hf.generate(
            torch.tensor(prompt),
            attention_mask=torch.ones(prompt.shape, dtype=torch.long),
            max_new_tokens=n,
            do_sample=False,
            **options,
        ).numpy()


@pytest.mark.parametrize("tiling, cache_tile", TILINGS)
def test_greedy_equals_transformers(tiling, cache_tile):
    ours, hf = _pair(tiling, eos_token_id=None, bos_token_id=0)
    prompt = np.random.default_rng(1).integers(0, 37, (3, 6))
    expected = _hf_generate(hf, prompt, 12, pad_token_id=0)
    got = ours.generate(prompt, 12, temperature=0, cache_tile=cache_tile)
    np.testing.assert_array_equal(got, expected)


def test_stop_tokens_and_streaming():
    ours, hf = _pair(Tiling(batch=1, seq=4, embd=8, head=1), eos_token_id=None, bos_token_id=0)
    prompt = np.random.default_rng(2).integers(0, 37, (2, 4))
    free = ours.generate(prompt, 10, temperature=0)
    stop = int(free[0, 6])  # row 0 stops early; row 1 later or never
    expected = _hf_generate(hf, prompt, 10, eos_token_id=stop, pad_token_id=stop)
    seen = []
    got = ours.generate(prompt, 10, temperature=0, stop_tokens=[stop], on_token=seen.append)
    np.testing.assert_array_equal(got, expected[:, : got.shape[1]])
    assert (expected[:, got.shape[1] :] == stop).all()  # HF only pads after every row stopped
    np.testing.assert_array_equal(np.stack(seen, axis=1), got[:, 4:])


def test_sampling_options():
    ours, _ = _pair(Tiling(vocab=10))
    prompt = np.array([3, 1, 4])
    greedy = ours.generate(prompt, 8, temperature=0)
    assert greedy.shape == (11,) and (greedy[:3] == prompt).all()
    np.testing.assert_array_equal(ours.generate(prompt, 8, top_k=1, seed=5), greedy)
    np.testing.assert_array_equal(ours.generate(prompt, 8, top_p=1e-9, seed=5), greedy)
    a, b = (ours.generate(prompt, 8, temperature=2.0, seed=7) for _ in range(2))
    np.testing.assert_array_equal(a, b)  # the seed decides
    top3 = ours.generate(np.array([[3, 1, 4]] * 4), 6, temperature=5.0, top_k=3, seed=1)
    with nt.no_grad():
        logits = ours(top3[:, :-1])[0].to_numpy()
    allowed = np.argsort(-logits, axis=2)[:, 2:, :3]  # the 3 most likely after each prefix
    assert all(top3[r, t + 3] in allowed[r, t] for r in range(4) for t in range(6))
    long = ours.generate(prompt, 40, temperature=0)  # past n_positions: the context restarts
    assert long.shape == (43,)
    with pytest.raises(ValueError, match="temperature"):
        ours.generate(prompt, 2, temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        ours.generate(prompt, 2, top_p=0)


def test_decode_ops_against_numpy():
    rng = np.random.default_rng(0)
    B, L, C, H = 3, 11, 12, 4
    D = C // H
    rows = rng.standard_normal((B, 8, 3 * C))
    k_cache = kv_cache(B, L, C, (2, 3, 2 * D), np.float64)
    v_cache = kv_cache(B, L, C, (2, 3, 2 * D), np.float64)
    cache_write(nt.from_numpy(rows[:, :7], tile_shape=(2, 4, 5)), k_cache, v_cache, 0)
    step = nt.from_numpy(rows[:, 7:], tile_shape=(2, 1, 2 * D))
    cache_write(step, k_cache, v_cache, 7)
    n = 8
    np.testing.assert_array_equal(k_cache.to_numpy()[:, :n], rows[:, :, C : 2 * C])
    np.testing.assert_array_equal(v_cache.to_numpy()[:, :n], rows[:, :, 2 * C :])
    out = decode_attention(step, k_cache, v_cache, n, H).to_numpy()
    q = rows[:, 7, :C].reshape(B, H, D)
    k = rows[:, :, C : 2 * C].reshape(B, n, H, D)
    v = rows[:, :, 2 * C :].reshape(B, n, H, D)
    scores = np.einsum("bhd,bnhd->bhn", q, k) / np.sqrt(D)
    weights = np.exp(scores - scores.max(axis=2, keepdims=True))
    weights /= weights.sum(axis=2, keepdims=True)
    expected = np.einsum("bhn,bnhd->bhd", weights, v).reshape(B, 1, C)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="do not fit a cache of length 11"):
        cache_write(step, k_cache, v_cache, 11)
