"""The accuracy check of bf16-mixed training: the default model (``numtile train`` with no
model flags) trained for 700 steps in ``bf16-mixed`` must reach a validation loss within 2% of
the same run in ``fp32`` (issue 15's target).

Each mode runs ``numtile train`` in its own process with the same seed, data and flags
(``--checkpoint '' --sample-tokens 0``; the validation loss evaluated every ``--eval-every``
steps and at the end, from ``metrics.jsonl`` in a log folder per mode). ``--measure N`` runs
only N steps of each mode and prints the median seconds per step and what the full check
would take on this machine, so it can be sized before it is run.

Usage: python bench/bf16_accuracy.py [--steps 700] [--tolerance 0.02] [--measure N]
       [--out DIR] [-- extra numtile train flags]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("fp32", "bf16-mixed")
_TRAIN = "import sys; from numtile.cli.main import main; sys.exit(main(sys.argv[1:]))"


def train(mode: str, steps: int, log_dir: str, extra: list[str]) -> list[dict]:
    """The metrics rows of ``numtile train --precision mode --steps steps``."""
    flags = ["train", "--precision", mode, "--steps", str(steps), "--checkpoint", ""]
    flags += ["--sample-tokens", "0", "--log-dir", log_dir, *extra]
    subprocess.run([sys.executable, "-c", _TRAIN, *flags], check=True)
    with open(os.path.join(log_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def seconds_per_step(rows: list[dict]) -> float:
    """Median wall seconds between consecutive steps (the first step, which compiles, and
    steps with a validation pass left out)."""
    gaps = [
        b["wall_time"] - a["wall_time"]
        for a, b in zip(rows, rows[1:])
        if a["step"] > 1 and "val/loss" not in b
    ]
    return statistics.median(gaps) if gaps else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=700)
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--measure", type=int, default=0, help="only time N steps per mode")
    parser.add_argument("--out", default=None, help="folder for the logs (default: temporary)")
    args, extra = parser.parse_known_args(argv)
    extra = [flag for flag in extra if flag != "--"]
    out = args.out or tempfile.mkdtemp(prefix="bf16-accuracy-")
    steps = args.measure or args.steps
    results = {}
    for mode in MODES:
        start = time.perf_counter()
        rows = train(mode, steps, os.path.join(out, mode), extra)
        validation = [r["val/loss"] for r in rows if "val/loss" in r]
        results[mode] = {
            "seconds_per_step": seconds_per_step(rows),
            "wall_s": time.perf_counter() - start,
            "final_val_loss": validation[-1] if validation else None,
            "tokens_per_s": statistics.median(r["perf/tokens_per_s"] for r in rows[1:] or rows),
        }
        print(mode, json.dumps(results[mode]), flush=True)
    if args.measure:
        total = sum(r["seconds_per_step"] for r in results.values()) * args.steps
        per_step = ", ".join(f"{m} {r['seconds_per_step']:.2f} s/step" for m, r in results.items())
        print(
            f"the {args.steps}-step check would take about {total / 3600:.1f} h here "
            f"({per_step}; load {os.getloadavg()[0]:.1f})"
        )
        return 0
    fp32, mixed = (results[m]["final_val_loss"] for m in MODES)
    gap = (mixed - fp32) / fp32
    ok = abs(gap) <= args.tolerance
    print(
        f"validation loss after {args.steps} steps: fp32 {fp32:.4f}, bf16-mixed {mixed:.4f} "
        f"({100 * gap:+.2f}%, target within {100 * args.tolerance:.0f}%): "
        f"{'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
