"""GPT-2 and LLaMA training throughput and peak memory: numtile against PyTorch, same run, same
machine.

PyTorch side: transformers' GPT2LMHeadModel (or LlamaForCausalLM) + torch.optim.AdamW, float32,
dropout off, torch.set_num_threads(cores). numtile side: numtile.nn.gpt2.GPT2 (or
numtile.nn.llama.Llama) + numtile AdamW with the same sizes, batch and hyper-parameters. Each
(framework, config) runs in its own process so its peak resident memory (ru_maxrss) is its own.
Reported: median tokens/s over the timed steps (full steps: forward, backward, optimizer), the ratio
numtile/PyTorch, MFU against the sgemm peak measured in the same run, and peak RSS.

Usage: python bench/compare_gpt_train.py [--configs gpt2-mini,gpt2-small,llama-mini,llama-small]
       [--steps 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CONFIGS = {
    "gpt2-mini": dict(
        model=dict(vocab_size=50304, n_positions=256, n_embd=256, n_layer=4, n_head=4),
        batch=8,
        seq=256,
        tiling=dict(batch=4, seq=256, embd=256, inner=1024, head=4, vocab=8192),
    ),
    "gpt2-small": dict(
        model=dict(vocab_size=50304, n_positions=1024, n_embd=768, n_layer=12, n_head=12),
        batch=4,
        seq=256,
        tiling=dict(batch=2, seq=256, embd=768, inner=1536, head=4, vocab=8192),
    ),
    # issue 11's llama-mini benchmark: model configs with an architecture are numtile's
    "llama-mini": dict(
        model=dict(
            architecture="llama",
            vocab_size=32000,
            max_position_embeddings=256,
            hidden_size=256,
            intermediate_size=688,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
        ),
        batch=8,
        seq=256,
        tiling=dict(batch=4, seq=256, embd=256, inner=688, head=4, vocab=8000),
    ),
    # issue 11's llama at gpt2-small scale
    "llama-small": dict(
        model=dict(
            architecture="llama",
            vocab_size=32000,
            max_position_embeddings=256,
            hidden_size=768,
            intermediate_size=2048,
            num_hidden_layers=12,
            num_attention_heads=12,
            num_key_value_heads=4,
        ),
        batch=4,
        seq=256,
        tiling=dict(batch=2, seq=256, embd=768, inner=1024, head=6, vocab=8000),
    ),
}

WORKER = r"""
import json, resource, statistics, sys, time
import numpy as np
spec = json.loads(sys.argv[1]); framework = sys.argv[2]; steps = int(sys.argv[3])
cores = int(sys.argv[4])
model_cfg, B, T = spec["model"], spec["batch"], spec["seq"]
rng = np.random.default_rng(0)
batches = [(rng.integers(0, model_cfg["vocab_size"], (B, T)),
            rng.integers(0, model_cfg["vocab_size"], (B, T))) for _ in range(steps)]
times = []
if framework == "torch":
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.set_num_threads(cores)
    torch.manual_seed(0)
    fields = {k: v for k, v in model_cfg.items() if k != "architecture"}
    if model_cfg.get("architecture") == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        model = LlamaForCausalLM(LlamaConfig(**fields, attention_dropout=0.0))
    else:
        model = GPT2LMHeadModel(GPT2Config(**fields, resid_pdrop=0.0, embd_pdrop=0.0,
                                           attn_pdrop=0.0, activation_function="gelu_new"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    n_params = sum(p.numel() for p in model.parameters())
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for x, y in batches:
        start = time.perf_counter()
        logits = model(torch.tensor(x)).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 torch.tensor(y).reshape(-1))
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        float(loss)
        times.append(time.perf_counter() - start)
else:
    import numtile as nt
    from numtile.nn import optim
    from numtile.nn.gpt2 import Tiling
    from numtile.train import build_model
    from numtile.train_config import _model_config
    model = build_model(_model_config(model_cfg, "config"), Tiling(**spec["tiling"]), seq_len=T)
    opt = optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    n_params = model.num_parameters()
    nt.wait_all()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for x, y in batches:
        start = time.perf_counter()
        _, loss = model(x, y)
        loss.backward(); opt.step(); opt.zero_grad()
        loss.item(); nt.wait_all()
        times.append(time.perf_counter() - start)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
timed = times[2:] if len(times) > 2 else times
print(json.dumps({"tokens_per_s": B * T / statistics.median(timed), "step_s": times,
                  "peak_rss_mb": peak / 1024, "model_rss_mb": base / 1024,
                  "n_params": n_params}))
"""


def _model_config(fields: dict, source: str):
    from numtile.train_config import _model_config as model_config

    return model_config(fields, source)


def flops_per_token(config, n_params: int, seq_len: int) -> float:
    from numtile.train import flops_per_token as flops

    return flops(config, n_params, seq_len)


def sgemm_peak(cores: int) -> float:
    from numtile.train import sgemm_peak as peak

    return peak(cores)


def run(framework: str, name: str, steps: int, cores: int) -> dict:
    spec = json.dumps(CONFIGS[name])
    result = subprocess.run(
        [sys.executable, "-c", WORKER, spec, framework, str(steps), str(cores)],
        capture_output=True,
        text=True,
        env=dict(os.environ, NUMTILE_NCPU=str(cores)),
    )
    if result.returncode != 0:
        raise RuntimeError(f"{framework} {name} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="gpt2-mini,gpt2-small")
    parser.add_argument("--steps", type=int, default=5, help="steps per run (first 2 untimed)")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    peak = sgemm_peak(cores)
    print(f"{cores} cores; sgemm peak {peak / 1e9:.0f} GFLOP/s (1 thread per core, measured now)")
    header = (
        f"{'config':<12}{'framework':<10}{'tokens/s':>10}{'MFU':>7}{'peak RSS MB':>13}"
        f"{'numtile/torch':>15}"
    )
    print(header)
    print("-" * len(header))
    for name in args.configs.split(","):
        results = {fw: run(fw, name, args.steps, cores) for fw in ("torch", "numtile")}
        config = _model_config(CONFIGS[name]["model"], name)
        for fw in ("torch", "numtile"):
            r = results[fw]
            per_token = flops_per_token(config, r["n_params"], CONFIGS[name]["seq"])
            mfu = r["tokens_per_s"] * per_token / peak
            ratio = (
                r["tokens_per_s"] / results["torch"]["tokens_per_s"] if fw == "numtile" else None
            )
            ratio_text = f"{ratio:>15.2f}" if ratio is not None else ""
            print(
                f"{name:<12}{fw:<10}{r['tokens_per_s']:>10.0f}{100 * mfu:>6.0f}%"
                f"{r['peak_rss_mb']:>13.0f}{ratio_text}"
            )
        memory_ratio = results["numtile"]["peak_rss_mb"] / results["torch"]["peak_rss_mb"]
        print(f"{'':<12}peak memory numtile/torch: {memory_ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
