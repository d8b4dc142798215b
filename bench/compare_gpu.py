"""numtile on a real NVIDIA GPU against CuPy and PyTorch, timed in the same run.

Cases (ratio = numtile throughput / peer throughput):
  gemm     tiled float32 (and TF32) matmul, n x n, vs ``cupy.matmul``     [>= 0.85 at 8192]
  gpt      GPT-2 training tokens/s (numtile GPT2 + AdamW, all kernels on the GPU) vs
           transformers GPT2LMHeadModel + torch.optim.AdamW on CUDA
  solvers  tiled Cholesky, LU solve and QR (float64, 4096, tiles of 1024) vs ``cupy.linalg``,
           and one 512 tile's potrf/getrf/geqrt through cuSOLVER vs the @cuda.jit kernels
  largest  the largest GPT-2 (by layers) whose training state is 4x a GPU memory limit
           of a quarter of the card (capped at 40% of host RAM, where evicted tiles live;
           the ratio reached is reported), trained for a few steps with that limit

Each case runs in its own process (TF32 is read by CuPy at import). Usage:
  python bench/compare_gpu.py [--cases gemm,solvers,gpt,largest] [--n 8192] [--out results.json]
Smoke test of the "largest" case without a GPU, under Numba's CUDA simulator:
  NUMBA_ENABLE_CUDASIM=1 python bench/compare_gpu.py --cases largest --largest-embd 32 \
      --largest-seq 8 --largest-steps 1 --card-bytes 4e6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _median_seconds(fn, sync, repeat=5, warmup=2) -> float:
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def case_gemm(args) -> dict:
    import cupy
    import numpy as np

    import numtile as nt

    n, tile = args.n, args.tile
    runtime = nt.init(ncpu=2, ncuda=1, restrict="cuda")
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((n, n), np.float32)
    b_np = rng.standard_normal((n, n), np.float32)
    a = nt.from_numpy(a_np, tile_shape=(tile, tile))
    b = nt.from_numpy(b_np, tile_shape=(tile, tile))
    results = {}

    def ours():
        c = a @ b
        runtime.wait_handles(c.handles)  # results stay on the GPU
        results["c"] = c

    def sync():
        cupy.cuda.Device(0).synchronize()

    t_ours = _median_seconds(ours, sync)
    check = results["c"].to_numpy()
    ca, cb = cupy.asarray(a_np), cupy.asarray(b_np)
    t_cupy = _median_seconds(lambda: cupy.matmul(ca, cb), sync)
    reference = cupy.asnumpy(cupy.matmul(ca, cb))
    error = float(np.max(np.abs(check - reference)) / np.max(np.abs(reference)))
    flops = 2.0 * n**3
    return {
        "case": f"gemm float32 {n} tile {tile} tf32={os.environ.get('CUPY_TF32', '0')}",
        "numtile_tflops": flops / t_ours / 1e12,
        "cupy_tflops": flops / t_cupy / 1e12,
        "ratio": t_cupy / t_ours,
        "max_rel_error": error,
    }


def case_gpt(args) -> dict:
    import numpy as np
    import torch
    from transformers import GPT2Config as HFConfig
    from transformers import GPT2LMHeadModel

    import numtile as nt
    from numtile.nn import optim
    from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling

    cfg = dict(vocab_size=50304, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    batch, seq = args.batch, args.seq
    rng = np.random.default_rng(0)
    idx = rng.integers(0, cfg["vocab_size"], (batch, seq))
    targets = rng.integers(0, cfg["vocab_size"], (batch, seq))

    def time_torch() -> float:  # its own scope: the model is freed before numtile runs
        hf = GPT2LMHeadModel(HFConfig(**cfg, activation_function="gelu_new")).cuda()
        opt = torch.optim.AdamW(hf.parameters(), lr=1e-4)
        ti, tt = torch.tensor(idx).cuda(), torch.tensor(targets).cuda()

        def torch_step():
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(
                hf(ti).logits.reshape(-1, cfg["vocab_size"]), tt.reshape(-1)
            )
            loss.backward()
            opt.step()

        return _median_seconds(torch_step, torch.cuda.synchronize, repeat=5)

    t_torch = time_torch()
    torch.cuda.empty_cache()

    nt.init(ncpu=2, ncuda=1, restrict="cuda")
    tiling = Tiling(batch=1, seq=None, embd=None, inner=None, head=cfg["n_head"], vocab=8192)
    model = GPT2(GPT2Config(**cfg), tiling, dtype="float32", seq_len=seq)
    ours_opt = optim.AdamW(model.parameters(), lr=1e-4)

    def ours_step():
        ours_opt.zero_grad()
        loss = model(idx, targets)[1]  # logits dropped: freed tile by tile
        loss.backward()
        ours_opt.step()
        loss.item()

    t_ours = _median_seconds(ours_step, nt.wait_all, repeat=3, warmup=1)
    tokens = batch * seq
    return {
        "case": f"gpt2-small train step, batch {batch} x {seq}",
        "numtile_tokens_per_s": tokens / t_ours,
        "torch_tokens_per_s": tokens / t_torch,
        "ratio": t_torch / t_ours,
    }


def case_largest(args) -> dict:
    import numpy as np
    from numba import cuda

    import numtile as nt
    from numtile.nn import optim
    from numtile.nn.gpt2 import GPT2, GPT2Config, Tiling

    total = args.card_bytes or cuda.current_context().get_memory_info().total
    limit = int(total // 4)
    # the evicted state lives in host RAM: 4x a quarter of a big card can exceed it, so the
    # state is capped at 40% of host RAM and the ratio reached is reported
    host_ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    target_state = min(4 * limit, 0.4 * host_ram)
    runtime = nt.init(ncpu=2, ncuda=1, restrict="cuda", cuda_mem_limit=limit)
    embd, seq, batch = args.largest_embd, args.largest_seq, 1
    per_layer = 12 * embd * embd + 13 * embd
    state_bytes_per_param = 4 * 4  # float32 weight, gradient, two AdamW moments
    layers = int(target_state / state_bytes_per_param / per_layer) + 1
    vocab = min(8192, 4 * embd)
    cfg = GPT2Config(vocab_size=vocab, n_positions=seq, n_embd=embd, n_layer=layers, n_head=16)
    tile = max(embd // 2, 16)
    tiling = Tiling(batch=1, seq=None, embd=tile, inner=tile, head=4, vocab=vocab // 2)
    model = GPT2(cfg, tiling, dtype="float32", seq_len=seq)
    opt = optim.AdamW(model.parameters(), lr=1e-4)
    params = model.num_parameters()
    rng = np.random.default_rng(0)
    losses, start = [], time.perf_counter()
    for _ in range(args.largest_steps):
        idx = rng.integers(0, cfg.vocab_size, (batch, seq))
        opt.zero_grad()
        loss = model(idx, idx)[1]  # logits dropped: freed tile by tile
        loss.backward()
        opt.step()
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    counters = runtime.manager.counters()
    return {
        "case": f"largest GPT-2 under a {limit / 2**30:.1f} GiB limit (quarter of the card)",
        "layers": layers,
        "parameters": params,
        "training_state_gib": params * state_bytes_per_param / 2**30,
        "state_over_limit": params * state_bytes_per_param / limit,
        "host_ram_gib": host_ram / 2**30,
        "losses": losses,
        "seconds_per_step": seconds / args.largest_steps,
        "gpu_peak_gib": counters["nodes"]["cuda0"]["peak"] / 2**30,
        "evictions": counters["nodes"]["cuda0"]["evictions"],
        "moved_gib": {k: v / 2**30 for k, v in counters["transferred_bytes"].items()},
    }


def case_solvers(args) -> dict:
    """Tiled Cholesky, LU solve and QR (float64, every task on the GPU worker) against
    ``cupy.linalg``; then one tile's potrf, getrf and geqrt through cuSOLVER against the
    ``@cuda.jit`` kernels (each call restores the tile first, on both sides)."""
    import cupy
    import numpy as np
    from numba import cuda

    import numtile as nt
    from numtile import ops_cuda
    from numtile.ops_cuda import factorizations, lu, qr

    n, tile = args.solver_n, args.solver_tile
    runtime = nt.init(ncpu=2, ncuda=1, restrict="cuda")
    rng = np.random.default_rng(0)
    general = rng.standard_normal((n, n))
    spd = general @ general.T + n * np.eye(n)
    rhs = rng.standard_normal(n)
    a_spd, a_general = (nt.from_numpy(x, tile_shape=(tile, tile)) for x in (spd, general))
    b = nt.from_numpy(rhs, tile_shape=tile)
    c_spd, c_general, c_rhs = (cupy.asarray(x) for x in (spd, general, rhs))

    def sync():
        cupy.cuda.Device(0).synchronize()

    def wait(*tensors):
        runtime.wait_handles([h for t in tensors for h in t.handles])

    result = {"case": f"tiled factorisations float64 {n} tile {tile}"}
    result["solver_path"] = ops_cuda.solver_path()
    tiled = {
        "cholesky": (lambda: wait(nt.linalg.cholesky(a_spd)), lambda: cupy.linalg.cholesky(c_spd)),
        "solve": (
            lambda: wait(nt.linalg.solve(a_general, b)),
            lambda: cupy.linalg.solve(c_general, c_rhs),
        ),
        "qr": (lambda: wait(*nt.linalg.qr(a_general)), lambda: cupy.linalg.qr(c_general)),
    }
    for name, (ours, peer) in tiled.items():
        t_ours = _median_seconds(ours, sync, repeat=3, warmup=1)
        t_peer = _median_seconds(peer, sync, repeat=3, warmup=1)
        result[name] = {"numtile_s": t_ours, "cupy_s": t_peer, "ratio": t_peer / t_ours}
    error = np.abs(nt.linalg.cholesky(a_spd).to_numpy() - np.linalg.cholesky(spd)).max()
    result["cholesky"]["max_abs_error"] = float(error)
    k = args.kernel_tile
    pristine = cuda.to_device(spd[:k, :k].copy())
    work = cuda.device_array_like(pristine)
    pivots, info = cuda.device_array(k, np.int64), cuda.device_array(1, np.int64)
    factors = cuda.device_array((k, 32))
    kernels = {
        "potrf": (ops_cuda.potrf, factorizations.potrf, lambda f: f(work, info)),
        "getrf": (ops_cuda.getrf, lu.getrf, lambda f: f(work, pivots, info)),
        "geqrt": (ops_cuda.geqrt, qr.geqrt, lambda f: f(work, factors)),
    }
    for name, (library, kernel, call) in kernels.items():
        times = []
        for function in (library, kernel):

            def run(function=function, call=call):
                work.copy_to_device(pristine)
                call(function)

            times.append(_median_seconds(run, sync, repeat=3, warmup=1))
        result[f"tile {k} {name}"] = {
            "library_s": times[0],
            "cuda_jit_s": times[1],
            "speedup": times[1] / times[0],
        }
    return result


CASES = {"gemm": case_gemm, "solvers": case_solvers, "gpt": case_gpt, "largest": case_largest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="gemm,solvers,gpt,largest")
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--tile", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--solver-n", type=int, default=4096)
    parser.add_argument("--solver-tile", type=int, default=1024)
    parser.add_argument("--kernel-tile", type=int, default=512)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--largest-steps", type=int, default=2)
    parser.add_argument("--largest-embd", type=int, default=2048)
    parser.add_argument("--largest-seq", type=int, default=256)
    parser.add_argument(
        "--card-bytes", type=float, help="pretend the GPU has this many bytes (smoke tests)"
    )
    parser.add_argument("--out", default="gpu_results.json")
    parser.add_argument(
        "--budget",
        type=float,
        default=290.0,
        help="seconds for every case together (gpu_check.sh gives the step 300): a case gets "
        "its own cap or what is left, whichever is less",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(CASES[args.child](args)), flush=True)
        return
    results = []
    deadline = time.monotonic() + args.budget
    for name in args.cases.split(","):
        runs = [("", {})]
        if name == "gemm":
            runs = [("", {"CUPY_TF32": "0"}), (" (TF32)", {"CUPY_TF32": "1"})]
        for _, extra in runs:
            env = {**os.environ, **extra, "PYTHONPATH": ROOT}
            command = [sys.executable, os.path.abspath(__file__), "--child", name]
            command += [f"--n={args.n}", f"--tile={args.tile}", f"--batch={args.batch}"]
            command += [f"--seq={args.seq}", f"--largest-steps={args.largest_steps}"]
            command += [f"--solver-n={args.solver_n}", f"--solver-tile={args.solver_tile}"]
            command += [f"--kernel-tile={args.kernel_tile}"]
            command += [f"--largest-embd={args.largest_embd}", f"--largest-seq={args.largest_seq}"]
            if args.card_bytes:
                command.append(f"--card-bytes={args.card_bytes}")
            limit = max(1.0, min(args_timeout(name), deadline - time.monotonic()))
            try:
                out = subprocess.run(
                    command, env=env, capture_output=True, text=True, timeout=limit
                )
                lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
                result = (
                    json.loads(lines[-1][7:])
                    if lines
                    else {"case": name, "error": out.stderr[-2000:]}
                )
            except subprocess.TimeoutExpired:
                result = {"case": name, "error": f"timed out after {limit:.0f} s"}
            print(json.dumps(result), flush=True)
            results.append(result)
            with open(args.out, "w") as f:  # after every case: a cut run keeps what it measured
                json.dump(results, f, indent=1)


def args_timeout(name: str) -> int:
    # each case's own cap; --budget bounds them together (bench/gpu_check.sh: < 8 min)
    return {"gemm": 50, "solvers": 45, "gpt": 100, "largest": 120}[name]


if __name__ == "__main__":
    main()
