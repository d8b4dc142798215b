"""GPT-2 training on a GPU worker whose memory holds less than the training state.

Under Numba's CUDA simulator on a CPU-only machine (``NUMTILE_TEST_GPU=1`` runs it on a real
GPU): every kernel runs on the GPU worker (``restrict="cuda"``), the GPU memory limit is
below the bytes of parameters + gradients + AdamW moments, and losses and parameters after
two AdamW steps must match the same steps on the CPU backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import numtile as nt
from numtile.nn import optim
from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling
from numtile.ops_cuda import available

pytestmark = pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")

CONFIG = dict(vocab_size=19, n_positions=8, n_embd=8, n_layer=1, n_head=2)
TILING = Tiling(batch=1, seq=4, embd=4, inner=16, head=1, vocab=10)
SEQ = 6


def _train(state, steps, **runtime):
    nt.init(**runtime)
    try:
        model = GPT2(GPT2Config(**CONFIG), TILING, dtype="float64", seq_len=SEQ)
        model.load_state_dict(state, strict=False)
        opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        rng = np.random.default_rng(3)
        losses = []
        for _ in range(steps):
            idx = rng.integers(0, CONFIG["vocab_size"], (2, SEQ))
            opt.zero_grad()
            _, loss = model(idx, np.roll(idx, -1, axis=1))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        params = {name: p.to_numpy() for name, p in model.named_parameters()}
        counters = nt.get_runtime().manager.counters() if runtime.get("ncuda") else None
        return losses, params, counters, model
    finally:
        nt.init()


def test_training_with_gpu_memory_below_the_training_state_matches_cpu():
    nt.init()
    model = GPT2(GPT2Config(**CONFIG), TILING, dtype="float64", seq_len=SEQ)
    state = {name: p.to_numpy() for name, p in model.named_parameters()}
    n_params = model.num_parameters()
    training_state = 4 * 8 * n_params  # float64 weights, gradients, two moments
    limit = training_state // 2

    cpu_losses, cpu_params, _, _ = _train(state, 2, ncpu=2)
    gpu_losses, gpu_params, counters, _ = _train(
        state, 2, ncpu=1, ncuda=1, restrict="cuda", cuda_mem_limit=limit, scheduler="eager"
    )
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-10)
    for name, value in cpu_params.items():
        np.testing.assert_allclose(gpu_params[name], value, rtol=1e-9, atol=1e-12, err_msg=name)
    gpu = counters["nodes"]["cuda0"]
    assert gpu["peak"] <= limit < training_state
    assert gpu["evictions"] > 0 and counters["transferred_bytes"]["cuda0->host"] > 0
