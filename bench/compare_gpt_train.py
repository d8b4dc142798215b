"""GPT-2 and LLaMA training throughput and peak memory: numtile against PyTorch, same run, same
machine.

PyTorch side: transformers' GPT2LMHeadModel (or LlamaForCausalLM) + torch.optim.AdamW, float32,
dropout off, torch.set_num_threads(cores). numtile side: numtile.nn.gpt2.GPT2 (or
numtile.nn.llama.Llama) + numtile AdamW with the same sizes, batch and hyper-parameters. Each
(framework, config) runs in its own process so its peak resident memory (ru_maxrss) is its own.
Reported: median tokens/s over the timed steps (full steps: forward, backward, optimizer), the ratio
numtile/PyTorch, MFU against the sgemm peak measured in the same run, and peak RSS.

With ``--precision bf16-mixed`` the PyTorch side runs forward and loss under
``torch.autocast("cpu", dtype=torch.bfloat16)`` and numtile's model under
``model.set_precision("bf16-mixed")``; MFU is then against the bf16 GEMM peak (numtile's
``gemm_bf16`` kernel, measured in the same run). ``fp32-fast-bf16`` and ``tf32`` have no CPU
counterpart in PyTorch: its side stays float32 there.

numtile's side updates each parameter during the backward (``opt.step_in_backward(loss)``: the
same AdamW updates as ``loss.backward(); opt.step(); opt.zero_grad()``, each made as soon as
that parameter's gradient is complete, so the gradients never all exist at once and the
optimizer's tasks run beside the backward's GEMMs); ``--separate-step`` runs the classic loop
instead. PyTorch's side runs the classic loop (PyTorch can fuse it through
``register_post_accumulate_grad_hook``, which transformers' training loops do not use).

Usage: python bench/compare_gpt_train.py [--configs gpt2-mini,gpt2-small,llama-mini,llama-small]
       [--steps 4] [--torch-steps 1] [--precision fp32|bf16-mixed|fp32-fast-bf16|tf32]
       [--host-mem-limit SIZE | --host-mem-limit gpt2-small=1200MiB,llama-small=1GiB]

``--host-mem-limit`` runs numtile a second time, under ``NUMTILE_HOST_MEM_LIMIT`` (one size for
every config, or ``config=SIZE`` pairs; configs without one skip that row), so the tiles beyond
the limit (the AdamW moments and master weights between their uses) wait in spill files: the row
``numtile@SIZE`` gives its tokens/s and peak RSS next to the unlimited run's, with the bytes
spilled and read back per step and the memory manager's own peak.

On CPUs without bf16 units PyTorch's bf16 GEMMs run at about 0.4 GFLOP/s on two cores, so
one autocast step of gpt2-mini takes minutes: ``--torch-steps 1`` times a single PyTorch step
(no warm-up: its first step is its steady state but for allocations), and ``--torch-batch 1``
runs PyTorch's side on one sequence a step (its bf16 GEMM ran at the same rate at 512 and
1024 here, so its tokens/s hardly depends on the batch); with bf16 the header
also gives ``torch.matmul``'s bf16 rate at 1024, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CONFIGS = {
    # small enough for PyTorch's bf16 autocast on CPUs without bf16 units (its bf16 GEMM
    # runs at about 1 GFLOP/s per core there)
    "gpt2-tiny": dict(
        model=dict(vocab_size=8192, n_positions=128, n_embd=128, n_layer=2, n_head=2),
        batch=4,
        seq=128,
        tiling=dict(batch=2, seq=128, embd=128, inner=512, head=2, vocab=4096),
    ),
    "llama-tiny": dict(
        model=dict(
            architecture="llama",
            vocab_size=8192,
            max_position_embeddings=128,
            hidden_size=128,
            intermediate_size=344,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
        ),
        batch=4,
        seq=128,
        tiling=dict(batch=2, seq=128, embd=128, inner=344, head=2, vocab=4096),
    ),
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
cores = int(sys.argv[4]); precision = sys.argv[5]; separate = sys.argv[6] == "separate"
import contextlib, warnings
warnings.simplefilter("ignore")
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
    autocast = contextlib.nullcontext()
    if precision == "bf16-mixed":
        autocast = torch.autocast("cpu", dtype=torch.bfloat16)
    for x, y in batches:
        start = time.perf_counter()
        with autocast:
            logits = model(torch.tensor(x)).logits
            loss = torch.nn.functional.cross_entropy(
                logits.float().reshape(-1, logits.shape[-1]), torch.tensor(y).reshape(-1))
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
    model.set_precision(precision)
    opt = optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    n_params = model.num_parameters()
    nt.wait_all()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for x, y in batches:
        start = time.perf_counter()
        loss = model(x, y)[1]  # logits dropped: freed tile by tile
        if separate:
            loss.backward(); opt.step(); opt.zero_grad()
        else:
            opt.step_in_backward(loss)
        loss.item(); nt.wait_all()
        times.append(time.perf_counter() - start)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
timed = times[2:] if len(times) > 2 else times
spill = {}
if framework == "numtile" and nt.get_runtime().manager is not None:
    counters = nt.get_runtime().manager.counters()
    spill = {"managed_peak_mb": counters["nodes"]["host"]["peak"] / 2**20,
             "written_mb": counters["spill"]["bytes_written"] / 2**20 / steps,
             "read_mb": counters["spill"]["bytes_read"] / 2**20 / steps}
print(json.dumps({"tokens_per_s": B * T / statistics.median(timed), "step_s": times,
                  "peak_rss_mb": peak / 1024, "model_rss_mb": base / 1024,
                  "n_params": n_params, "spill": spill}))
"""


def _model_config(fields: dict, source: str):
    from numtile.train_config import _model_config as model_config

    return model_config(fields, source)


def flops_per_token(config, n_params: int, seq_len: int) -> float:
    from numtile.train import flops_per_token as flops

    return flops(config, n_params, seq_len)


def gemm_peak(cores: int, precision: str) -> float:
    from numtile.train import gemm_peak as peak

    return peak(cores, precision)


def torch_bf16_rate(cores: int, n: int = 1024) -> float:
    """FLOP/s of ``torch.matmul`` on (n, n) bfloat16 tensors with ``cores`` threads."""
    import time

    import torch

    torch.set_num_threads(cores)
    a = torch.ones(n, n, dtype=torch.bfloat16)
    torch.matmul(a, a)
    start = time.perf_counter()
    torch.matmul(a, a)
    return 2.0 * n**3 / (time.perf_counter() - start)


def run(
    framework: str,
    name: str,
    steps: int,
    cores: int,
    precision: str = "fp32",
    batch=None,
    host_mem_limit: str | None = None,
    separate_step: bool = False,
) -> dict:
    spec = json.dumps({**CONFIGS[name], "batch": batch or CONFIGS[name]["batch"]})
    env = dict(os.environ, NUMTILE_NCPU=str(cores))
    env.pop("NUMTILE_HOST_MEM_LIMIT", None)  # the unlimited row is unlimited
    if host_mem_limit is not None:
        env["NUMTILE_HOST_MEM_LIMIT"] = host_mem_limit
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            WORKER,
            spec,
            framework,
            str(steps),
            str(cores),
            precision,
            "separate" if separate_step else "fused",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{framework} {name} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def host_mem_limits(text: str | None, names: list[str]) -> dict[str, str]:
    """``--host-mem-limit``: one size for every config, or ``config=SIZE`` pairs.

    >>> host_mem_limits("gpt2-small=1GiB,gpt2-mini=400MiB", ["gpt2-mini", "gpt2-small"])
    {'gpt2-small': '1GiB', 'gpt2-mini': '400MiB'}
    >>> host_mem_limits("2GiB", ["gpt2-mini"])
    {'gpt2-mini': '2GiB'}
    """
    if not text:
        return {}
    if "=" not in text:
        return dict.fromkeys(names, text)
    limits = dict(pair.split("=", 1) for pair in text.split(","))
    unknown = sorted(set(limits) - set(names))
    if unknown:
        raise SystemExit(f"--host-mem-limit names {unknown}, not among --configs {names}")
    return limits


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="gpt2-mini,gpt2-small")
    parser.add_argument("--steps", type=int, default=5, help="steps per run (first 2 untimed)")
    parser.add_argument("--torch-steps", type=int, default=None, help="PyTorch's (default --steps)")
    parser.add_argument(
        "--torch-batch", type=int, default=None, help="PyTorch's batch (default the config's)"
    )
    parser.add_argument(
        "--precision", default="fp32", choices=["fp32", "bf16-mixed", "fp32-fast-bf16", "tf32"]
    )
    parser.add_argument(
        "--host-mem-limit",
        metavar="SIZE",
        help="also run numtile under NUMTILE_HOST_MEM_LIMIT=SIZE (or config=SIZE,...)",
    )
    parser.add_argument(
        "--separate-step",
        action="store_true",
        help="numtile: loss.backward(); opt.step() (default: opt.step_in_backward(loss))",
    )
    args = parser.parse_args(argv)
    names = args.configs.split(",")
    limits = host_mem_limits(args.host_mem_limit, names)
    cores = os.cpu_count() or 1
    peak = gemm_peak(cores, args.precision)
    what = "bf16 GEMM" if args.precision in ("bf16-mixed", "fp32-fast-bf16") else "sgemm"
    print(
        f"{cores} cores; precision {args.precision}; {what} peak {peak / 1e9:.0f} GFLOP/s "
        f"(1 thread per core, measured now)"
    )
    if args.precision == "bf16-mixed":
        print(f"torch.matmul bfloat16 1024: {torch_bf16_rate(cores) / 1e9:.2f} GFLOP/s (now)")
    steps = {"torch": args.torch_steps or args.steps, "numtile": args.steps}
    batches = {"torch": args.torch_batch, "numtile": None}
    header = (
        f"{'config':<12}{'framework':<17}{'tokens/s':>10}{'MFU':>7}{'peak RSS MB':>13}"
        f"{'numtile/torch':>15}"
    )
    print(header)
    print("-" * len(header))
    for name in names:
        results = {
            fw: run(
                fw, name, steps[fw], cores, args.precision, batches[fw], None, args.separate_step
            )
            for fw in ("torch", "numtile")
        }
        if name in limits:
            limited = f"numtile@{limits[name]}"
            results[limited] = run(
                "numtile",
                name,
                args.steps,
                cores,
                args.precision,
                None,
                limits[name],
                args.separate_step,
            )
        config = _model_config(CONFIGS[name]["model"], name)
        for fw, r in results.items():
            per_token = flops_per_token(config, r["n_params"], CONFIGS[name]["seq"])
            mfu = r["tokens_per_s"] * per_token / peak
            ratio = r["tokens_per_s"] / results["torch"]["tokens_per_s"] if fw != "torch" else None
            ratio_text = f"{ratio:>15.2f}" if ratio is not None else ""
            print(
                f"{name:<12}{fw:<17}{r['tokens_per_s']:>10.1f}{100 * mfu:>6.1f}%"
                f"{r['peak_rss_mb']:>13.0f}{ratio_text}"
            )
            print(f"{'':<12}step seconds: {', '.join(f'{t:.2f}' for t in r['step_s'])}")
            spill = r.get("spill")
            if spill:
                print(
                    f"{'':<12}spilled {spill['written_mb']:.0f} MB and read back "
                    f"{spill['read_mb']:.0f} MB a step; memory manager's peak "
                    f"{spill['managed_peak_mb']:.0f} MB"
                )
        for fw in results:
            if fw != "torch":
                memory_ratio = results[fw]["peak_rss_mb"] / results["torch"]["peak_rss_mb"]
                print(f"{'':<12}peak memory {fw}/torch: {memory_ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
