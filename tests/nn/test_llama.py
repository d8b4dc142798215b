"""LLaMA against Hugging Face transformers' LlamaForCausalLM built from a config (random
weights, no download): logits, loss, every gradient and AdamW steps, over tilings that divide
nothing, grouped-query heads, odd head widths, tied and untied heads, biases and llama3 RoPE."""

import numpy as np
import pytest
import torch
from transformers import LlamaConfig as HFConfig
from transformers import LlamaForCausalLM

from numtile.nn import optim
from numtile.nn.gpt2 import Tiling
from numtile.nn.llama import Llama, LlamaConfig, inverse_frequencies

VOCAB, T = 37, 9
BASE = dict(
    vocab_size=VOCAB,
    hidden_size=16,
    intermediate_size=20,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=16,
    rms_norm_eps=1e-5,
)
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8,
}
# (config changes, tiling): GQA with 1, 2 and all kv heads, head_dim 6 (half of it odd)
# and 10 (not hidden / heads), tiles that divide nothing
CASES = {
    "gqa2-whole": (dict(), Tiling()),
    "mqa-ragged": (
        dict(num_key_value_heads=1, tie_word_embeddings=True),
        Tiling(batch=1, seq=4, embd=5, inner=7, head=2, vocab=10),
    ),
    "mha-bias-llama3": (
        dict(
            num_key_value_heads=4,
            head_dim=6,
            attention_bias=True,
            mlp_bias=True,
            rope_scaling=LLAMA3,
        ),
        Tiling(batch=2, seq=3, embd=16, inner=20, head=1, vocab=37),
    ),
    "gqa2-headdim10-tied": (
        dict(head_dim=10, tie_word_embeddings=True, rope_theta=500.0),
        Tiling(batch=1, seq=5, embd=8, inner=9, head=4, vocab=16),
    ),
}


def _hf_config(changes):
    fields = {**BASE, **changes}
    scaling = fields.pop("rope_scaling", None)
    theta = fields.pop("rope_theta", 10000.0)
    rope = {"rope_type": "default", "rope_theta": theta}
    if scaling is not None:
        rope = {**scaling, "rope_theta": theta}
    return HFConfig(**fields, rope_parameters=rope, attention_dropout=0.0)


def _pair(dtype, changes, tiling, seed=0):
    torch.manual_seed(seed)
    hf = LlamaForCausalLM(_hf_config(changes))
    with torch.no_grad():  # biases start at zero in both: make them matter
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "layernorm" in name or name == "model.norm.weight":
                p.add_(0.1 * torch.randn_like(p))
    hf = hf.to(torch.float64 if dtype == "float64" else torch.float32).eval()
    ours = Llama(LlamaConfig(**{**BASE, **changes}), tiling, dtype=dtype, seq_len=T)
    ours.load_state_dict(hf.state_dict())
    return ours, hf


def _batch(seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, VOCAB, (2, T)), rng.integers(0, VOCAB, (2, T))


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _reference_loss(hf, idx, targets):
    logits = hf(torch.tensor(idx)).logits
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, VOCAB), torch.tensor(targets).reshape(-1)
    )
    return logits, loss


# float64: transformers computes RMSNorm and the RoPE angles in float32 even for float64 weights
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype, tol", [("float64", 1e-6), ("float32", 1e-5)])
def test_logits_loss_and_gradients_match_hugging_face(case, dtype, tol):
    changes, tiling = CASES[case]
    ours, hf = _pair(dtype, changes, tiling)
    idx, targets = _batch()
    logits, loss = ours(idx, targets)
    ref_logits, ref_loss = _reference_loss(hf, idx, targets)
    assert _rel(logits.to_numpy(), ref_logits.detach().numpy()) < tol
    assert abs(loss.item() - ref_loss.item()) / ref_loss.item() < tol
    loss.backward()
    ref_loss.backward()
    ref_grads = {k: p.grad.numpy() for k, p in hf.named_parameters()}
    names = [name for name, _ in ours.named_parameters()]
    assert sorted(names) == sorted(ref_grads)
    for name, p in ours.named_parameters():
        assert _rel(p.grad.to_numpy(), ref_grads[name]) < 10 * tol, name


def test_adamw_steps_match_torch():
    changes, tiling = CASES["mqa-ragged"]
    ours, hf = _pair("float32", changes, tiling)
    idx, targets = _batch(2)
    opt = optim.AdamW(ours.parameters(), lr=1e-2, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(hf.parameters(), lr=1e-2, weight_decay=0.1)
    for _ in range(5):
        opt.zero_grad()
        ref_opt.zero_grad()
        _, loss = ours(idx, targets)
        _, ref = _reference_loss(hf, idx, targets)
        assert abs(loss.item() - ref.item()) / ref.item() < 1e-4
        loss.backward()
        ref.backward()
        opt.step()
        ref_opt.step()
    for name, p in hf.named_parameters():
        value = dict(ours.named_parameters(remove_duplicate=False))[name].to_numpy()
        assert _rel(value, p.detach().numpy()) < 1e-4, name


def test_inverse_frequencies_are_transformers_own():
    for scaling in (None, LLAMA3):
        changes = dict(head_dim=16, rope_theta=500000.0, rope_scaling=scaling)
        hf = LlamaForCausalLM(_hf_config(changes))
        expected = hf.model.rotary_emb.inv_freq.numpy()
        ours = inverse_frequencies(LlamaConfig(**{**BASE, **changes}))
        np.testing.assert_array_equal(ours, expected)


def test_bad_config_and_inputs():
    with pytest.raises(ValueError, match="num_key_value_heads"):
        LlamaConfig(**{**BASE, "num_key_value_heads": 3})
    with pytest.raises(ValueError, match="even"):
        LlamaConfig(**{**BASE, "head_dim": 5})
    with pytest.raises(ValueError, match="llama3"):
        LlamaConfig(**BASE, rope_scaling={"rope_type": "yarn", "factor": 2.0})
    for dtype in ("bfloat16", "float16", "int32", np.int64):
        with pytest.raises(TypeError, match="float32 or float64.*bf16-mixed"):
            Llama(LlamaConfig(**BASE), dtype=dtype, seq_len=T)
    with pytest.raises(ValueError, match="group size"):
        Llama(LlamaConfig(**{**BASE, "num_key_value_heads": 1}), Tiling(head=3), seq_len=T)
    model = Llama(LlamaConfig(**BASE), seq_len=T)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(np.zeros((1, 17), np.int64))
    with pytest.raises(ValueError, match=r"\[0, 37\)"):
        model(np.array([[1, 40]]))
    assert model.num_parameters() == sum(
        p.numel() for p in LlamaForCausalLM(_hf_config({})).parameters()
    )
