"""LLaMA training on a GPU worker (under Numba's CUDA simulator on a CPU-only machine;
``NUMTILE_TEST_GPU=1`` runs it on a real GPU): every kernel, the grouped-query attention and
RoPE ones included, runs there (``restrict="cuda"``), and an AdamW step gives the losses
(before and after it) and parameters of the CPU run."""

from __future__ import annotations

import numpy as np
import pytest

import numtile as nt
from numtile.nn import optim
from numtile.nn.gpt2 import Tiling
from numtile.nn.llama import Llama, LlamaConfig
from numtile.ops_cuda import available

CONFIG = dict(
    vocab_size=7,
    hidden_size=8,
    intermediate_size=6,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=8,
    tie_word_embeddings=True,
)
TILING = Tiling(batch=2, seq=3, embd=8, inner=6, head=2, vocab=7)
SEQ = 5


def _train(**runtime):
    nt.init(**runtime)
    try:
        model = Llama(LlamaConfig(**CONFIG), TILING, dtype="float64", seq_len=SEQ)
        opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        idx = np.random.default_rng(3).integers(0, CONFIG["vocab_size"], (2, SEQ))
        _, loss = model(idx, np.roll(idx, -1, axis=1))
        loss.backward()
        opt.step()
        _, after = model(idx, np.roll(idx, -1, axis=1))
        losses = [loss.item(), after.item()]
        return losses, {name: p.to_numpy() for name, p in model.named_parameters()}
    finally:
        nt.init()


@pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")
def test_llama_training_on_the_gpu_worker_matches_cpu():
    reference = _train(ncpu=2)
    on_gpu = _train(ncpu=1, ncuda=1, restrict="cuda", scheduler="eager")
    np.testing.assert_allclose(on_gpu[0], reference[0], rtol=1e-10)
    for name, value in reference[1].items():
        np.testing.assert_allclose(on_gpu[1][name], value, rtol=1e-9, atol=1e-12, err_msg=name)
