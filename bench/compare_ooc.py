"""Out-of-core: the same tiled computation with a host memory limit and without.

The computation is a chain of large matmuls and elementwise ops whose live data (inputs,
intermediates and results all kept) is several times ``NUMTILE_HOST_MEM_LIMIT``, so tiles
spill to disk and come back. Each configuration runs in a fresh process (the limit is
fixed at start-up), ``--repeat`` times; the script prints the median seconds, GFLOP/s, the
ratio limited / unlimited throughput [target >= 0.5], the bytes moved each way and checks
the result against NumPy.

A second case trains the default ``numtile train`` GPT for ``--train-steps`` steps with the
host limit at ``--train-limit`` and without, and reports tokens/s, peak host bytes, data
moved and that the validation loss is the same.

Usage: python bench/compare_ooc.py [--n 4096] [--tile 1024] [--factor 4] [--repeat 3]
                                   [--cases chain,train] [--train-steps 20] [--train-limit 32MiB]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def workload(n: int, tile: int, seed: int = 0):
    """Build the computation; returns (inputs, outputs, flops, live bytes)."""
    import numpy as np

    import numtile as nt

    rng = np.random.default_rng(seed)
    a_np = rng.standard_normal((n, n)) / np.sqrt(n)
    b_np = rng.standard_normal((n, n)) / np.sqrt(n)
    a = nt.from_numpy(a_np, tile_shape=(tile, tile))
    b = nt.from_numpy(b_np, tile_shape=(tile, tile))
    ab = a @ b
    c = nt.tanh(ab) * 0.5 + a
    d = c @ b - c
    e = nt.exp(-d * d) + ab
    live = [a, b, ab, c, d, e]  # everything stays referenced: 6 n x n float64 matrices
    flops = 2 * 2.0 * n**3
    return (a_np, b_np), live, flops, sum(t.nbytes for t in live)


def train_child(args) -> None:
    import numtile as nt
    from numtile.train import TrainConfig, Trainer

    runtime = nt.init()
    cfg = TrainConfig(
        steps=args.train_steps, eval_every=10**6, eval_batches=1, checkpoint=None, sample_tokens=0
    )
    trainer = Trainer(cfg, log=lambda *a, **k: None)
    result = trainer.run()
    counters = runtime.manager.counters() if runtime.manager is not None else {}
    print(
        json.dumps(
            {
                "tokens_per_s": result["tokens_per_s"],
                "val_loss": result["final_val_loss"],
                "state_bytes": 16 * trainer.model.num_parameters(),  # f32 weight, grad, 2 moments
                "counters": counters,
            }
        )
    )


def child(args) -> None:
    import time

    import numpy as np

    import numtile as nt

    runtime = nt.init()  # NUMTILE_HOST_MEM_LIMIT / NUMTILE_SPILL_DIR come from the environment
    times = []
    for _ in range(args.repeat + 1):  # the first run compiles and warms the pool
        start = time.perf_counter()
        inputs, live, flops, live_bytes = workload(args.n, args.tile)
        result = live[-1].to_numpy()
        times.append(time.perf_counter() - start)
        if len(times) == 1:
            a, b = inputs
            ab = a @ b
            c = np.tanh(ab) * 0.5 + a
            d = c @ b - c
            error = float(np.max(np.abs(result - (np.exp(-d * d) + ab))))
        del live, result
    counters = runtime.manager.counters() if runtime.manager is not None else {}
    print(
        json.dumps(
            {
                "seconds": statistics.median(times[1:]),
                "flops": flops,
                "live_bytes": live_bytes,
                "max_abs_error": error,
                "counters": counters,
            }
        )
    )


def run(limit, args, case: str = "chain") -> dict:
    env = dict(os.environ)
    env.pop("NUMTILE_HOST_MEM_LIMIT", None)
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        f"--cases={case}",
        f"--train-steps={args.train_steps}",
        f"--n={args.n}",
        f"--tile={args.tile}",
        f"--repeat={args.repeat}",
    ]
    with tempfile.TemporaryDirectory(prefix="numtile-ooc-bench-") as spill:
        if limit is not None:
            env["NUMTILE_HOST_MEM_LIMIT"] = str(limit)
            env["NUMTILE_SPILL_DIR"] = spill
        out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--tile", type=int, default=1024)
    parser.add_argument("--factor", type=float, default=4.0, help="live data / host limit")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", default="chain,train")
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--train-limit", default="32MiB")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        train_child(args) if args.cases == "train" else child(args)
        return
    if "chain" in args.cases.split(","):
        chain(args)
    if "train" in args.cases.split(","):
        train(args)


def train(args) -> None:
    from numtile.config import parse_bytes

    limit = parse_bytes(args.train_limit)
    # the unlimited run is tracked with a limit no tile set reaches, for its peak
    free, limited = run("1TiB", args, "train"), run(limit, args, "train")
    mib = 1 << 20
    peak = free["counters"]["nodes"]["host"]["peak"]
    print(
        f"\ntraining the default GPT, {args.train_steps} steps: training state "
        f"{free['state_bytes'] / mib:.0f} MiB, peak tiles in host RAM without a limit "
        f"{peak / mib:.0f} MiB"
    )
    print(f"{'configuration':<34}{'tokens/s':>10}{'val loss':>10}{'host peak MiB':>15}")
    for name, result in (("no limit", free), (f"host limit {args.train_limit}", limited)):
        host = result["counters"]["nodes"]["host"]["peak"] / mib
        print(f"{name:<34}{result['tokens_per_s']:>10,.0f}{result['val_loss']:>10.4f}{host:>15.0f}")
    moved = limited["counters"]["transferred_bytes"]
    print(
        f"throughput limited / unlimited: {limited['tokens_per_s'] / free['tokens_per_s']:.2f}; "
        + ", ".join(f"{route} {nbytes / mib:.0f} MiB" for route, nbytes in sorted(moved.items()))
    )


def chain(args) -> None:
    live_bytes = 6 * args.n * args.n * 8
    limit = int(live_bytes / args.factor)
    free = run(None, args)
    limited = run(limit, args)
    mib = 1 << 20
    print(
        f"chain of 2 matmuls + 8 elementwise ops, n={args.n}, tile {args.tile}, float64; "
        f"live data {live_bytes / mib:.0f} MiB"
    )
    print(f"{'configuration':<34}{'median s':>10}{'GFLOP/s':>10}{'max |err|':>12}")
    for name, result in (
        ("no limit", free),
        (f"host limit {limit / mib:.0f} MiB (1/{args.factor:g})", limited),
    ):
        rate = result["flops"] / result["seconds"] / 1e9
        print(f"{name:<34}{result['seconds']:>10.3f}{rate:>10.1f}{result['max_abs_error']:>12.2e}")
    ratio = free["seconds"] / limited["seconds"]
    print(f"throughput limited / unlimited: {ratio:.2f}  [target >= 0.5]")
    moved = limited["counters"].get("transferred_bytes", {})
    host = limited["counters"].get("nodes", {}).get("host", {})
    print(
        "moved per run incl. warm-up ("
        + ", ".join(f"{route} {nbytes / mib:.0f} MiB" for route, nbytes in sorted(moved.items()))
        + f"); host peak {host.get('peak', 0) / mib:.0f} MiB, evictions {host.get('evictions')}"
    )


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))
    main()
