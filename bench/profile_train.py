"""Where one training step's time goes: numtile's tasks per codelet against torch.profiler's ops.

Builds a model of ``bench/compare_gpt_train.py``'s configs (same tiling, batch and sequence),
runs ``--warmup`` untimed steps, then one step under ``nt.trace``: per task name the calls and
the seconds spent in the tasks (wall time inside the kernels, summed over workers), the workers'
busy fraction of the step, the idle time between tasks, the tasks per step and the CPU time of
the submitting thread (the Python that builds the task graph). On a loaded machine wall times
mislead: each task is also charged the CPU time its worker thread spent since that worker's
previous task ended (the kernel plus the runtime's own work around it; a waiting worker burns
none), the "cpu s" column. Under ``NUMTILE_HOST_MEM_LIMIT`` it also prints the step's spill
traffic and the seconds the workers waited (part of the idle time between their tasks) for
writes that make room, for read-backs and for room that running tasks held. ``--torch``
profiles the same step of transformers under ``torch.autocast`` (bf16-mixed) with
``torch.profiler``: self CPU seconds per op.

Usage: python bench/profile_train.py [--config llama-small] [--precision bf16-mixed]
       [--warmup 2] [--torch] [--trace step.json] [--top 30] [--by-shape] [--step-in-backward]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compare_gpt_train import CONFIGS  # noqa: E402


def _batches(spec: dict, steps: int):
    import numpy as np

    rng = np.random.default_rng(0)
    vocab = spec["model"]["vocab_size"]
    shape = (spec["batch"], spec["seq"])
    return [(rng.integers(0, vocab, shape), rng.integers(0, vocab, shape)) for _ in range(steps)]


def profile_numtile(
    name: str,
    precision: str,
    warmup: int,
    trace_path: str | None,
    top: int,
    by_shape: bool,
    in_backward: bool = False,
):
    """Print the per-task-name table, idle time and the submitter's CPU time of one step."""
    import numtile as nt
    from numtile.nn import optim
    from numtile.nn.gpt2 import Tiling
    from numtile.runtime.trace import Tracer
    from numtile.train import build_model
    from numtile.train_config import _model_config

    spec = CONFIGS[name]
    model = build_model(
        _model_config(spec["model"], "config"), Tiling(**spec["tiling"]), seq_len=spec["seq"]
    )
    model.set_precision(precision)
    opt = optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    batches = _batches(spec, warmup + 1)

    def step(x, y) -> dict:
        phases = {}
        wall, cpu = time.perf_counter(), time.thread_time()
        loss = model(x, y)[1]  # logits dropped: freed tile by tile
        phases["forward"] = time.thread_time() - cpu
        mark = time.thread_time()
        if in_backward:
            opt.step_in_backward(loss)
            phases["backward + optimizer"] = time.thread_time() - mark
        else:
            loss.backward()
            phases["backward"] = time.thread_time() - mark
            mark = time.thread_time()
            opt.step()
            opt.zero_grad()
            phases["optimizer"] = time.thread_time() - mark
        phases["submit wall"] = time.perf_counter() - wall
        loss.item()
        nt.wait_all()
        phases["step wall"] = time.perf_counter() - wall
        phases["submitter cpu"] = time.thread_time() - cpu
        return phases

    for x, y in batches[:warmup]:
        step(x, y)
    cpu_per_name: dict[str, float] = defaultdict(float)
    per_shape: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    last_cpu: dict[int, float] = {}
    record = Tracer.record

    def record_with_cpu(self, task) -> None:  # runs on the worker thread that ran the task
        now = time.thread_time()
        thread = threading.get_ident()
        if thread in last_cpu:
            name = task.name or task.codelet.name
            cpu_per_name[name] += now - last_cpu[thread]
            if by_shape and name.startswith("linear"):  # the GEMMs by operand shapes and flags
                shapes = " ".join("x".join(map(str, h.shape)) for h in task.handles[:2])
                key = f"{name} {shapes} {''.join('T' if f else 'N' for f in task.args[:2])}"
                per_shape[key][0] += 1
                per_shape[key][1] += now - last_cpu[thread]
        last_cpu[thread] = now
        record(self, task)

    Tracer.record = record_with_cpu
    path = trace_path or os.path.join(tempfile.mkdtemp(), "step.json")
    before = _manager_counters(nt)
    with nt.trace(path) as tracer:
        phases = step(*batches[-1])
    Tracer.record = record
    after = _manager_counters(nt)
    events = tracer.events
    origin = min(e[2] for e in events)
    end = max(e[3] for e in events)
    per_name: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    per_worker: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for worker, task_name, start, stop, *_ in events:
        per_name[task_name][0] += 1
        per_name[task_name][1] += stop - start
        per_worker[worker].append((start, stop))
    busy = sum(v[1] for v in per_name.values())
    print(
        f"numtile {name} {precision}: one step {phases['step wall']:.3f} s wall, "
        f"{len(events)} tasks, {busy:.3f} task-seconds on {len(per_worker)} workers"
    )
    print("submitting thread CPU s: " + ", ".join(f"{k} {v:.3f}" for k, v in phases.items()))
    for worker, spans in sorted(per_worker.items()):
        spans.sort()
        gaps = [b[0] - a[1] for a, b in zip(spans, spans[1:]) if b[0] > a[1]]
        long_gaps = len([g for g in gaps if g > 1e-3])
        work = sum(s[1] - s[0] for s in spans)
        print(
            f"worker {worker}: busy {work:.3f} s ({100 * work / (end - origin):.0f}% of the "
            f"tasks' span {end - origin:.3f} s), idle between tasks {sum(gaps):.3f} s "
            f"({long_gaps} gaps > 1 ms, largest {max(gaps, default=0):.3f} s)"
        )
    if after is not None:
        _print_spill(before, after)
    cpu_total = sum(cpu_per_name.values())
    print(f"worker CPU time charged to tasks: {cpu_total:.3f} s")
    print(f"{'task':<34}{'calls':>7}{'wall s':>9}{'cpu s':>9}{'share':>8}{'cpu ms/call':>12}")
    ranked = sorted(per_name.items(), key=lambda kv: -cpu_per_name[kv[0]])
    for task_name, (calls, seconds) in ranked[:top]:
        cpu = cpu_per_name[task_name]
        print(
            f"{task_name:<34}{calls:>7}{seconds:>9.3f}{cpu:>9.3f}{100 * cpu / cpu_total:>7.1f}%"
            f"{1e3 * cpu / calls:>12.2f}"
        )
    for key, (calls, cpu) in sorted(per_shape.items(), key=lambda kv: -kv[1][1]):
        print(f"{key:<56}{calls:>7}{cpu:>9.3f} cpu s {1e3 * cpu / calls:>8.2f} ms/call")


def _manager_counters(nt) -> dict | None:
    """The memory manager's spill counters (under ``NUMTILE_HOST_MEM_LIMIT``), else None."""
    manager = nt.get_runtime().manager
    if manager is None or manager.spill is None:
        return None
    counters = manager.counters()
    return {**counters["spill"], **counters["nodes"]["host"]}


def _print_spill(before: dict, after: dict) -> None:
    """What the host limit cost the step: bytes through spill files, buffers reused, and the
    seconds workers waited (summed over them) for writes that make room, for read-backs and
    for room that running tasks held."""
    mb = 2**20
    waits = {
        reason: seconds - before["wait_seconds"].get(reason, 0.0)
        for reason, seconds in after["wait_seconds"].items()
    }
    print(
        f"host limit: {(after['bytes_written'] - before['bytes_written']) / mb:.0f} MB spilled, "
        f"{(after['bytes_read'] - before['bytes_read']) / mb:.0f} MB read back "
        f"({after['prefetched'] - before['prefetched']} reads prefetched), "
        f"{after['reused'] - before['reused']} buffers reused, "
        f"{after['evictions'] - before['evictions']} evictions; workers waited "
        + (", ".join(f"{s:.3f} s for {r}" for r, s in sorted(waits.items())) or "0 s")
    )


def profile_torch(name: str, precision: str, warmup: int, top: int):
    """Print torch.profiler's self CPU seconds per op for one step of the transformers peer."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    spec = CONFIGS[name]
    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(0)
    fields = {k: v for k, v in spec["model"].items() if k != "architecture"}
    if spec["model"].get("architecture") == "llama":
        model = LlamaForCausalLM(LlamaConfig(**fields, attention_dropout=0.0))
    else:
        model = GPT2LMHeadModel(
            GPT2Config(
                **fields,
                resid_pdrop=0.0,
                embd_pdrop=0.0,
                attn_pdrop=0.0,
                activation_function="gelu_new",
            )
        )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    autocast = contextlib.nullcontext()
    if precision == "bf16-mixed":
        autocast = torch.autocast("cpu", dtype=torch.bfloat16)

    def step(x, y):
        with autocast:
            logits = model(torch.tensor(x)).logits
            loss = torch.nn.functional.cross_entropy(
                logits.float().reshape(-1, logits.shape[-1]), torch.tensor(y).reshape(-1)
            )
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        float(loss)

    batches = _batches(spec, warmup + 2)
    for x, y in batches[:warmup]:
        step(x, y)
    start, cpu = time.perf_counter(), time.process_time()
    step(*batches[-1])
    plain = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step(*batches[-1])
    wall = time.perf_counter() - start
    averages = sorted(prof.key_averages(), key=lambda a: -a.self_cpu_time_total)
    total = sum(a.self_cpu_time_total for a in averages) / 1e6
    print(
        f"torch {name} {precision}: one step {plain[0]:.3f} s wall, {plain[1]:.3f} s process CPU; "
        f"profiled: {wall:.3f} s wall, ops' self time {total:.3f} s (wall, the calling thread)"
    )
    print(f"{'op':<44}{'calls':>7}{'self s':>10}{'share':>8}")
    for a in averages[:top]:
        seconds = a.self_cpu_time_total / 1e6
        print(f"{a.key[:43]:<44}{a.count:>7}{seconds:>10.3f}{100 * seconds / total:>7.1f}%")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="llama-small", choices=sorted(CONFIGS))
    parser.add_argument("--precision", default="bf16-mixed")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--torch", action="store_true", help="profile the PyTorch peer instead")
    parser.add_argument("--trace", help="also keep the numtile step's Chrome/Perfetto trace here")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--by-shape", action="store_true", help="also the linear GEMM tasks by operand shapes"
    )
    parser.add_argument(
        "--step-in-backward",
        action="store_true",
        help="opt.step_in_backward(loss) instead of loss.backward(); opt.step()",
    )
    args = parser.parse_args(argv)
    if args.torch:
        profile_torch(args.config, args.precision, args.warmup, args.top)
    else:
        profile_numtile(
            args.config,
            args.precision,
            args.warmup,
            args.trace,
            args.top,
            args.by_shape,
            args.step_in_backward,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
