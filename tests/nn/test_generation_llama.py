"""LLaMA generation with the key/value cache against transformers' ``LlamaForCausalLM.generate``
on the same weights (random, from a config), grouped-query decode attention against NumPy, and
the task recording a decode step is replayed with."""

import numpy as np
import pytest
import torch
from transformers import LlamaForCausalLM

import numtile as nt
from numtile.nn.gpt2 import Tiling
from numtile.nn.llama import Llama, LlamaConfig
from numtile.tiletensor.elementwise import copy_into
from numtile.tiletensor.fused.decode import (
    TaskRecording,
    cache_write_rows,
    grouped_decode_attention,
    kv_cache,
)
from tests.nn.test_llama import BASE, LLAMA3, VOCAB, _hf_config

# (config changes, tiling, cache tile): kv heads 1, 2 and = heads, llama3 RoPE, tiles and cache
# tiles that divide nothing
CASES = {
    "mqa-ragged": (
        dict(num_key_value_heads=1),
        Tiling(batch=1, seq=4, embd=5, inner=7, head=2, vocab=10),
        4,
    ),
    "gqa2-whole": (dict(), Tiling(batch=3), None),
    "gqa2-head-tile-4": (dict(), Tiling(batch=2, seq=2, head=4), 6),
    "mha-llama3-bias": (
        dict(num_key_value_heads=4, head_dim=6, attention_bias=True, rope_scaling=LLAMA3),
        Tiling(batch=2, seq=3, embd=16, inner=20, head=1, vocab=37),
        5,
    ),
}


def _pair(changes, tiling, seed=0):
    torch.manual_seed(seed)
    hf = LlamaForCausalLM(_hf_config({**changes, "bos_token_id": 0, "eos_token_id": None}))
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("bias"):  # biases start at zero: make them matter
                p.add_(0.1 * torch.randn_like(p))
            if name.endswith(("q_proj.weight", "k_proj.weight")):  # attention far from uniform
                p.mul_(40.0)
    ours = Llama(LlamaConfig(**{**BASE, **changes}), tiling)
    ours.load_state_dict(hf.state_dict())
    return ours, hf.eval()


def _hf_generate(hf, prompt, n, **options):
    with torch.no_grad():
        return hf.generate(
            torch.tensor(prompt),
            attention_mask=torch.ones(prompt.shape, dtype=torch.long),
            max_new_tokens=n,
            do_sample=False,
            pad_token_id=0,
            **options,
        ).numpy()


@pytest.mark.parametrize("case", CASES)
def test_greedy_equals_transformers(case):
    changes, tiling, cache_tile = CASES[case]
    ours, hf = _pair(changes, tiling)
    prompt = np.random.default_rng(1).integers(0, VOCAB, (3, 5))
    expected = _hf_generate(hf, prompt, 10)
    got = ours.generate(prompt, 10, temperature=0, cache_tile=cache_tile)
    np.testing.assert_array_equal(got, expected)


def test_stop_tokens_and_one_prompt():
    ours, hf = _pair({}, Tiling(seq=2, head=2))
    prompt = np.random.default_rng(2).integers(0, VOCAB, (2, 4))
    free = ours.generate(prompt, 8, temperature=0)
    stop = int(free[0, 5])
    expected = _hf_generate(hf, prompt, 8, eos_token_id=stop)
    got = ours.generate(prompt, 8, temperature=0, stop_tokens=[stop])
    np.testing.assert_array_equal(got, expected[:, : got.shape[1]])
    np.testing.assert_array_equal(ours.generate(prompt[1], 8, temperature=0), free[1])
    a, b = (ours.generate(prompt[0], 6, temperature=1.5, top_k=5, top_p=0.9, seed=3) for _ in "ab")
    np.testing.assert_array_equal(a, b)
    assert ours.generate(prompt[0], 20, temperature=0).shape == (24,)  # past the context


@pytest.mark.parametrize("n_head, n_kv_head, head_tile", [(4, 1, 2), (4, 2, 4), (6, 2, 1)])
def test_grouped_decode_attention_against_numpy(n_head, n_kv_head, head_tile):
    rng = np.random.default_rng(0)
    B, n, D, group = 3, 7, 3, n_head // n_kv_head
    kv_width = max(1, head_tile // group) * D
    keys, values = rng.standard_normal((2, B, n, n_kv_head * D))
    k_cache, v_cache = (kv_cache(B, 9, n_kv_head * D, (2, 4, kv_width), np.float64) for _ in "kv")
    cache_write_rows(nt.from_numpy(keys, tile_shape=(2, 3, 2)), k_cache, 0)
    cache_write_rows(nt.from_numpy(values, tile_shape=(2, 5, kv_width)), v_cache, 0)
    q = rng.standard_normal((B, 1, n_head * D))
    tiles = (2, 1, head_tile * D)
    out = grouped_decode_attention(
        nt.from_numpy(q, tile_shape=tiles), k_cache, v_cache, n, n_head, n_kv_head, head_tile
    ).to_numpy()
    heads = np.arange(n_head) // group
    k = keys.reshape(B, n, n_kv_head, D)[:, :, heads]
    v = values.reshape(B, n, n_kv_head, D)[:, :, heads]
    scores = np.einsum("bhd,bnhd->bhn", q.reshape(B, n_head, D), k) / np.sqrt(D)
    weights = np.exp(scores - scores.max(axis=2, keepdims=True))
    weights /= weights.sum(axis=2, keepdims=True)
    expected = np.einsum("bhn,bnhd->bhd", weights, v).reshape(B, 1, n_head * D)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_task_recording_hoists_fuses_and_replays():
    x, bias = nt.from_numpy(np.arange(4.0)), nt.from_numpy(np.full(4, 0.5))
    recording = TaskRecording()
    with recording.recording(0):
        copy_into(x, x * 2.0 + bias * 3.0)  # bias * 3.0 cannot change: hoisted
    recording.hoist()
    names = [t[0].name for t in recording.segments[0]]
    assert names == ["binary_scalar:multiply", "binary:add", "copy_strided"]
    recording.fuse(0)
    assert [t[0].name for t in recording.segments[0]] == ["decode_segment"]
    recording.replay(0)
    recording.replay(0)
    expected = np.arange(4.0)
    for _ in range(3):
        expected = expected * 2.0 + 1.5
    np.testing.assert_array_equal(x.to_numpy(), expected)
    captured = TaskRecording()
    with captured.recording(0, submit=False):
        copy_into(x, x + bias)
    np.testing.assert_array_equal(x.to_numpy(), expected)  # only recorded
    captured.fuse(0)
    captured.replay(0)
    np.testing.assert_array_equal(x.to_numpy(), expected + 0.5)
