"""What a host memory limit costs one training step: numtile alone, one process per run.

Runs ``opt.step_in_backward(loss)`` steps as ``compare_gpt_train.py`` does and prints the
median step time, CPU seconds, system seconds and minor page faults a step, the spill
written a step, the manager's peak and the process's peak RSS. Run it with and without
``--host-mem-limit`` (and on two trees, alternating) to compare. ``--phases`` also charges
the workers' thread CPU time to the phases of the task loop that belong to the runtime, not
to the kernels (the manager's ``prefetch``, ``acquire`` and ``release``, and the engine's
``_complete``), summed over the workers, a step: the manager's own cost per task, which a
loaded machine distorts less than wall time (the wrappers' own ``thread_time`` calls, about
1 us each, are in the figures); and the CPU time of Python's cyclic garbage collections of
each generation, in whatever thread they ran (inside the phases' figures when they ran
there).

    python bench/limit_cost.py --config llama-small --precision bf16-mixed --host-mem-limit 1800MiB
"""

from __future__ import annotations

import argparse
import gc
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
    parser.add_argument("--phases", action="store_true", help="runtime CPU per loop phase")
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
    phases = _instrument(nt.get_runtime()) if args.phases else None
    rows, phase_rows = [], []
    for x, y in batches:
        for spent in (phases or {}).values():
            spent.clear()
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
        if phases is not None:
            phase_rows.append({name: (sum(s), len(s)) for name, s in phases.items()})
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
    if phase_rows:
        timed = phase_rows[2:] or phase_rows
        cells = []
        for name in timed[0]:
            seconds = statistics.median(row[name][0] for row in timed)
            calls = statistics.median(row[name][1] for row in timed)
            cells.append(f"{name} {seconds:.3f} s / {calls:.0f} calls")
        print("thread CPU a step (median): " + ", ".join(cells))


def _instrument(runtime) -> dict[str, list[float]]:
    """Wrap the task loop's runtime phases of ``runtime`` (instance attributes shadow the
    methods the workers call) to append each call's thread CPU seconds to a list per phase."""
    phases: dict[str, list[float]] = {}
    targets = [(runtime, "_complete")]
    if runtime.manager is not None:
        targets += [(runtime.manager, name) for name in ("prefetch", "acquire", "release")]
    for owner, name in targets:
        spent = phases[name] = []
        method = getattr(owner, name)

        def timed(*args, _method=method, _spent=spent, **kwargs):
            start = time.thread_time()
            try:
                return _method(*args, **kwargs)
            finally:
                _spent.append(time.thread_time() - start)  # list.append: thread safe

        setattr(owner, name, timed)
    started = [0.0]

    def collected(event: str, info: dict) -> None:  # the GIL is held from start to stop
        if event == "start":
            started[0] = time.thread_time()
        else:
            phases[f"gc{info['generation']}"].append(time.thread_time() - started[0])

    for generation in range(3):
        phases[f"gc{generation}"] = []
    gc.callbacks.append(collected)
    return phases


if __name__ == "__main__":
    main()
