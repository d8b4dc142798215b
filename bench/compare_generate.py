"""Generation with the key/value cache, and loading a Hugging Face folder: numtile against
transformers, same weights, same run, same machine.

Generation: gpt2-mini (4 layers, 256 wide, 4 heads, vocabulary 50304) and llama-mini (4 layers,
hidden 256, intermediate 688, 4 heads, 2 key/value heads, vocabulary 32000), random weights
saved once with ``save_pretrained``; transformers' ``generate(do_sample=False)`` (its own KV
cache) against numtile's ``model.generate(temperature=0)`` on the same weights (GPT-2 read by
``load_hf``, LLaMA's safetensors loaded into ``Llama``): 128 new tokens after a 64-token
prompt, for each batch size and core count asked. Each framework runs in its own process
(``cores`` threads for torch, ``cores`` workers for numtile), one warm-up then ``repeats``
timed runs; the two alternate ``rounds`` times so that a change in the machine's load hits
both; the figure is the median over every timed run. Both produce the same ids (checked).

Loading (``--load``): a gpt2-small-sized folder (124M parameters, float32) read by ``load_hf``
and by ``from_pretrained``; peak resident memory (ru_maxrss) over the process's memory before
the load, against the model's size in memory.

Usage: python bench/compare_generate.py [--model gpt2 llama] [--batch 1 8] [--cores 1 2]
       [--rounds 2] [--repeats 2] [--load]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODELS = {
    "gpt2": dict(vocab_size=50304, n_positions=256, n_embd=256, n_layer=4, n_head=4),
    "llama": dict(
        vocab_size=32000,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    ),
}
SMALL = dict(vocab_size=50304, n_positions=1024, n_embd=768, n_layer=12, n_head=12)

SAVE = r"""
import json, sys, torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
arch, sizes = sys.argv[1], json.loads(sys.argv[2])
if arch == "gpt2":
    model = GPT2LMHeadModel(GPT2Config(**sizes))
else:
    model = LlamaForCausalLM(LlamaConfig(**sizes, tie_word_embeddings=False))
model.save_pretrained(sys.argv[3])
"""

GENERATE = r"""
import json, sys, time
import numpy as np
folder, arch, framework, batch, prompt_len, new, repeats, cores = sys.argv[1:9]
batch, prompt_len, new, repeats, cores = map(int, (batch, prompt_len, new, repeats, cores))
sizes = json.loads(sys.argv[9])
prompt = np.random.default_rng(0).integers(0, sizes["vocab_size"], (batch, prompt_len))
times = []
if framework == "torch":
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(cores)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = torch.tensor(prompt)
    mask = torch.ones_like(ids)
    for _ in range(repeats + 1):
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                                 do_sample=False, pad_token_id=0).numpy()
        times.append(time.perf_counter() - start)
else:
    from numtile.nn.gpt2 import Tiling
    vocab_tile = -(-sizes["vocab_size"] // cores)  # one head tile per worker
    tiling = Tiling(batch=batch, head=4, vocab=vocab_tile)
    if arch == "gpt2":
        from numtile.nn.hf import load_hf
        model = load_hf(folder, tiling=tiling)
    else:
        from safetensors.numpy import load_file
        from numtile.nn.llama import Llama, LlamaConfig
        model = Llama(LlamaConfig(**sizes), tiling)
        model.load_state_dict(load_file(f"{folder}/model.safetensors"))
    for _ in range(repeats + 1):
        start = time.perf_counter()
        out = model.generate(prompt, new, temperature=0)
        times.append(time.perf_counter() - start)
print(json.dumps({"seconds": times[1:], "ids": out.tolist()}))
"""

LOAD = r"""
import json, resource, sys, time
folder, framework = sys.argv[1:3]
if framework == "torch":
    import torch
    from transformers import GPT2LMHeadModel
    torch.set_num_threads(1)
    GPT2LMHeadModel.from_pretrained  # imports done before the baseline
else:
    import numtile as nt
    from numtile.nn.hf import load_hf
    nt.get_runtime()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
if framework == "torch":
    model = GPT2LMHeadModel.from_pretrained(folder)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
else:
    model = load_hf(folder)
    nt.wait_all()
    nbytes = sum(p.size * p.dtype.itemsize for p in model.parameters())
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_mb": (peak - base) / 1024, "model_mb": nbytes / 2**20}))
"""


def _run(script: str, *args, cores: int) -> dict:
    env = dict(os.environ, NUMTILE_NCPU=str(cores), OMP_NUM_THREADS=str(cores))
    result = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise RuntimeError(f"{args} failed:\n{result.stderr[-3000:]}")
    lines = result.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def _generation(folder: str, arch: str, batch: int, cores: int, args) -> None:
    times: dict[str, list[float]] = {"torch": [], "numtile": []}
    ids = {}
    for _ in range(args.rounds):
        for fw in times:
            spec = (args.prompt, args.new, args.repeats, cores, json.dumps(MODELS[arch]))
            result = _run(GENERATE, folder, arch, fw, batch, *spec, cores=cores)
            times[fw] += result["seconds"]
            ids[fw] = result["ids"]
    rates = {fw: batch * args.new / statistics.median(t) for fw, t in times.items()}
    print(
        f"{arch}-mini  batch {batch}  {cores} core(s): transformers {rates['torch']:7.1f}, "
        f"numtile {rates['numtile']:7.1f} tokens/s = {rates['numtile'] / rates['torch']:.2f}x "
        f"(median of {len(times['torch'])}; greedy ids equal: {ids['torch'] == ids['numtile']})",
        flush=True,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", choices=sorted(MODELS), default=["gpt2", "llama"])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--load", action="store_true", help="also measure load_hf (gpt2-small)")
    args = parser.parse_args(argv)
    print(f"generation: {args.new} new tokens after {args.prompt}; load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as root:
        for arch in args.model:
            folder = os.path.join(root, arch)
            _run(SAVE, arch, json.dumps(MODELS[arch]), folder, cores=1)
            for batch in args.batch:
                for cores in args.cores:
                    _generation(folder, arch, batch, cores, args)
        if args.load:
            small = os.path.join(root, "small")
            _run(SAVE, "gpt2", json.dumps(SMALL), small, cores=1)
            print("loading a gpt2-small-sized folder (peak RSS above the process before it)")
            for fw in ("torch", "numtile"):
                r = _run(LOAD, small, fw, cores=1)
                print(
                    f"  {fw:<8}{r['seconds']:>7.2f} s  peak {r['peak_mb']:>6.0f} MB = "
                    f"{r['peak_mb'] / r['model_mb']:.2f} x the model ({r['model_mb']:.0f} MB)"
                )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
