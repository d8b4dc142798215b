"""GPT-2 generation with the key/value cache, and loading a Hugging Face folder: numtile
against transformers, same weights, same run, same machine.

Generation: gpt2-mini sizes (4 layers, 256 wide, 4 heads, vocabulary 50304) saved once with
``save_pretrained``; transformers' ``generate(do_sample=False)`` (its own KV cache) against
numtile's ``model.generate(temperature=0)`` on the folder read by ``load_hf``: batch 1, 128
new tokens after a 64-token prompt, median seconds of the timed repeats (the first is a
warm-up). Both produce the same ids (checked). Loading (``--load``): a gpt2-small-sized
folder (124M parameters, float32) read by ``load_hf`` and by ``from_pretrained``; peak
resident memory (ru_maxrss) over the process's memory before the load, against the model's
size in memory. Each measurement runs in its own process with ``cores`` threads/workers.

Usage: python bench/compare_generate.py [--batch 1] [--repeats 3] [--load]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

MINI = dict(vocab_size=50304, n_positions=256, n_embd=256, n_layer=4, n_head=4)
SMALL = dict(vocab_size=50304, n_positions=1024, n_embd=768, n_layer=12, n_head=12)

SAVE = r"""
import json, sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
GPT2LMHeadModel(GPT2Config(**json.loads(sys.argv[1]))).save_pretrained(sys.argv[2])
"""

GENERATE = r"""
import json, statistics, sys, time
import numpy as np
folder, framework, batch, prompt_len, new, repeats, cores = sys.argv[1:8]
batch, prompt_len, new, repeats, cores = map(int, (batch, prompt_len, new, repeats, cores))
prompt = np.random.default_rng(0).integers(0, 50257, (batch, prompt_len))
times = []
if framework == "torch":
    import torch
    from transformers import GPT2LMHeadModel
    torch.set_num_threads(cores)
    model = GPT2LMHeadModel.from_pretrained(folder).eval()
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
    from numtile.nn.hf import load_hf
    model = load_hf(folder, tiling=Tiling(batch=batch, embd=256, inner=1024, head=4, vocab=12576))
    for _ in range(repeats + 1):
        start = time.perf_counter()
        out = model.generate(prompt, new, temperature=0)
        times.append(time.perf_counter() - start)
print(json.dumps({"seconds": statistics.median(times[1:]), "ids": out.tolist()}))
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--load", action="store_true", help="also measure load_hf (gpt2-small)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        mini = os.path.join(root, "mini")
        _run(SAVE, json.dumps(MINI), mini, cores=args.cores)
        spec = (args.batch, args.prompt, args.new, args.repeats, args.cores)
        results = {
            fw: _run(GENERATE, mini, fw, *spec, cores=args.cores) for fw in ("torch", "numtile")
        }
        same = results["torch"]["ids"] == results["numtile"]["ids"]
        print(
            f"generation, gpt2-mini, batch {args.batch}, {args.new} new tokens after "
            f"{args.prompt}, {args.cores} cores (greedy ids equal: {same})"
        )
        rates = {fw: args.batch * args.new / r["seconds"] for fw, r in results.items()}
        for fw in ("torch", "numtile"):
            print(f"  {fw:<8}{rates[fw]:>10.1f} tokens/s")
        print(f"  numtile/transformers: {rates['numtile'] / rates['torch']:.2f}")
        if args.load:
            small = os.path.join(root, "small")
            _run(SAVE, json.dumps(SMALL), small, cores=args.cores)
            print("loading a gpt2-small-sized folder (peak RSS above the process before it)")
            for fw in ("torch", "numtile"):
                r = _run(LOAD, small, fw, cores=args.cores)
                print(
                    f"  {fw:<8}{r['seconds']:>7.2f} s  peak {r['peak_mb']:>6.0f} MB = "
                    f"{r['peak_mb'] / r['model_mb']:.2f} x the model ({r['model_mb']:.0f} MB)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
