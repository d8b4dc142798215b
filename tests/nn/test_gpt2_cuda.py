"""GPT-2 training with less memory than its training state: on a GPU worker, and on host.

GPU: under Numba's CUDA simulator on a CPU-only machine (``NUMTILE_TEST_GPU=1`` runs it on a
real GPU), every kernel runs on the GPU worker (``restrict="cuda"``) and the GPU memory
limit is below the bytes of parameters + gradients + AdamW moments. Host: the same with a
host memory limit, tiles spilling to disk. Losses and parameters after two AdamW steps must
match the unlimited CPU run.
"""

from __future__ import annotations

import numpy as np
import pytest

import numtile as nt
from numtile.nn import optim
from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling
from numtile.ops_cuda import available

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
        manager = nt.get_runtime().manager
        counters = manager.counters() if manager is not None else None
        return losses, params, counters, model
    finally:
        nt.init()


def _initial_state():
    nt.init()
    model = GPT2(GPT2Config(**CONFIG), TILING, dtype="float64", seq_len=SEQ)
    state = {name: p.to_numpy() for name, p in model.named_parameters()}
    return state, 4 * 8 * model.num_parameters()  # float64 weights, gradients, two moments


def _check_same_training(reference, limited):
    np.testing.assert_allclose(limited[0], reference[0], rtol=1e-10)
    for name, value in reference[1].items():
        np.testing.assert_allclose(limited[1][name], value, rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.skipif(not available(), reason="needs a GPU or the CUDA simulator")
def test_training_with_gpu_memory_below_the_training_state_matches_cpu():
    state, training_state = _initial_state()
    limit = training_state // 2
    reference = _train(state, 2, ncpu=2)
    limited = _train(
        state, 2, ncpu=1, ncuda=1, restrict="cuda", cuda_mem_limit=limit, scheduler="eager"
    )
    _check_same_training(reference, limited)
    gpu = limited[2]["nodes"]["cuda0"]
    assert gpu["peak"] <= limit < training_state
    assert gpu["evictions"] > 0 and limited[2]["transferred_bytes"]["cuda0->host"] > 0


@pytest.mark.parametrize("scheduler", ["eager", "dmda"])
def test_training_with_host_memory_below_the_training_state_matches(tmp_path, scheduler):
    state, training_state = _initial_state()
    limit = training_state // 2
    reference = _train(state, 2, ncpu=2)
    limited = _train(
        state, 2, ncpu=2, scheduler=scheduler, host_mem_limit=limit, spill_dir=str(tmp_path)
    )
    _check_same_training(reference, limited)
    host, spill = limited[2]["nodes"]["host"], limited[2]["spill"]
    assert host["peak"] <= limit < training_state
    assert spill["writes"] > 0 and spill["reads"] > 0
