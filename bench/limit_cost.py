"""What a host memory limit costs one training step: numtile alone, one process per run.

Runs ``opt.step_in_backward(loss)`` steps as ``compare_gpt_train.py`` does and prints the
median step time, CPU seconds, system seconds and minor page faults a step, the spill
written a step, the manager's peak and the process's peak RSS. Run it with and without
``--host-mem-limit`` (and on two trees, alternating) to compare:

    python bench/limit_cost.py --config llama-small --precision bf16-mixed --host-mem-limit 1800MiB
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_gpt_train import CONFIGS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="llama-small", choices=sorted(CONFIGS))
    parser.add_argument("--precision", default="bf16-mixed")
    parser.add_argument("--steps", type=int, default=5, help="steps (first 2 untimed)")
    parser.add_argument("--host-mem-limit", default=None, help="NUMTILE_HOST_MEM_LIMIT")
    args = parser.parse_args()
    if args.host_mem_limit:
        os.environ["NUMTILE_HOST_MEM_LIMIT"] = args.host_mem_limit
    import numtile as nt
    from numtile.nn import optim
    from numtile.nn.gpt2 import Tiling
    from numtile.train import build_model
    from numtile.train_config import _model_config

    spec = CONFIGS[args.config]
    model_cfg, batch, seq = spec["model"], spec["batch"], spec["seq"]
    rng = np.random.default_rng(0)
    vocab = model_cfg["vocab_size"]
    batches = [
        (rng.integers(0, vocab, (batch, seq)), rng.integers(0, vocab, (batch, seq)))
        for _ in range(args.steps)
    ]
    model = build_model(_model_config(model_cfg, "config"), Tiling(**spec["tiling"]), seq_len=seq)
    model.set_precision(args.precision)
    opt = optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    nt.wait_all()
    rows = []
    for x, y in batches:
        before = resource.getrusage(resource.RUSAGE_SELF)
        start, cpu = time.perf_counter(), time.process_time()
        opt.step_in_backward(model(x, y)[1])
        nt.wait_all()
        after = resource.getrusage(resource.RUSAGE_SELF)
        rows.append(
            (
                time.perf_counter() - start,
                time.process_time() - cpu,
                after.ru_stime - before.ru_stime,
                after.ru_minflt - before.ru_minflt,
            )
        )
    timed = rows[2:] or rows
    step, cpu, system, faults = (statistics.median(column) for column in zip(*timed))
    manager = nt.get_runtime().manager
    spill = peak = 0.0
    if manager is not None:
        counters = manager.counters()
        spill = counters["spill"]["bytes_written"] / 2**20 / args.steps
        peak = counters["nodes"]["host"]["peak"] / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.config} {args.precision} limit={args.host_mem_limit}: step {step:.3f} s, "
        f"CPU {cpu:.3f} s, system {system:.2f} s, minor faults {faults:.0f} a step; "
        f"spill {spill:.0f} MB a step, manager peak {peak:.0f} MiB, peak RSS {rss:.0f} MB"
    )


if __name__ == "__main__":
    main()
