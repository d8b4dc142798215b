"""GPT-2 against Hugging Face transformers: logits, loss, every gradient, AdamW steps."""

import numpy as np
import pytest
import torch
from transformers import GPT2Config as HFConfig
from transformers import GPT2LMHeadModel

from numtile.nn import optim
from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling

CONFIG = dict(vocab_size=37, n_positions=16, n_embd=12, n_layer=2, n_head=3)
TILINGS = [
    Tiling(),  # one tile per axis
    Tiling(batch=1, seq=4, embd=8, inner=20, head=1, vocab=10),  # tiles that do not divide
    Tiling(batch=2, seq=3, embd=12, inner=48, head=3, vocab=37),
]


def _pair(dtype, tiling, seed=0):
    torch.manual_seed(seed)
    hf = GPT2LMHeadModel(
        HFConfig(
            **CONFIG,
            n_inner=None,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            activation_function="gelu_new",
        )
    )
    hf = hf.to(torch.float64 if dtype == "float64" else torch.float32).eval()
    ours = GPT2(GPT2Config(**CONFIG), tiling, dtype=dtype, seq_len=9)
    ours.load_state_dict(
        {
            k: v
            for k, v in hf.state_dict().items()
            if not k.endswith(".attn.bias") and not k.endswith("masked_bias")
        }
    )
    return ours, hf


def _batch(seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 37, (2, 9)), rng.integers(0, 37, (2, 9))


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("tiling", TILINGS)
@pytest.mark.parametrize("dtype, tol", [("float64", 1e-10), ("float32", 1e-5)])
def test_logits_loss_and_gradients_match_hugging_face(tiling, dtype, tol):
    ours, hf = _pair(dtype, tiling)
    idx, targets = _batch()
    logits, loss = ours(idx, targets)
    out = hf(torch.tensor(idx), labels=None)
    ref_logits = out.logits
    ref_loss = torch.nn.functional.cross_entropy(
        ref_logits.reshape(-1, 37), torch.tensor(targets).reshape(-1)
    )
    assert _rel(logits.to_numpy(), ref_logits.detach().numpy()) < tol
    assert abs(loss.item() - ref_loss.item()) / ref_loss.item() < tol
    loss.backward()
    ref_loss.backward()
    ref_grads = {k: p.grad.numpy() for k, p in hf.named_parameters()}
    for name, p in ours.named_parameters():
        if name == "lm_head.weight":
            continue  # tied: its gradient is transformer.wte.weight's
        assert _rel(p.grad.to_numpy(), ref_grads[name]) < 10 * tol, name


def test_adamw_steps_match_torch():
    tiling = TILINGS[1]
    ours, hf = _pair("float32", tiling)
    idx, targets = _batch(2)
    opt = optim.AdamW(ours.parameters(), lr=1e-2, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(hf.parameters(), lr=1e-2, weight_decay=0.1)
    for _ in range(5):
        opt.zero_grad()
        ref_opt.zero_grad()
        _, loss = ours(idx, targets)
        ref = torch.nn.functional.cross_entropy(
            hf(torch.tensor(idx)).logits.reshape(-1, 37), torch.tensor(targets).reshape(-1)
        )
        assert abs(loss.item() - ref.item()) / ref.item() < 1e-4
        loss.backward()
        ref.backward()
        opt.step()
        ref_opt.step()


def test_bad_config_and_inputs():
    with pytest.raises(ValueError, match="n_embd"):
        GPT2Config(n_embd=10, n_head=3)
    for dtype in ("bfloat16", "float16", "int32", np.int64):
        with pytest.raises(TypeError, match="float32 or float64.*bf16-mixed"):
            GPT2(GPT2Config(**CONFIG), dtype=dtype, seq_len=9)
    model = GPT2(GPT2Config(**CONFIG), seq_len=9)
    with pytest.raises(ValueError, match="n_positions"):
        model(np.zeros((1, 17), np.int64))
    with pytest.raises(ValueError, match=r"\[0, 37\)"):
        model(np.array([[1, 40]]))
    assert model.num_parameters() == sum(
        p.numel() for p in GPT2LMHeadModel(HFConfig(**CONFIG)).parameters()
    )
