"""Timing helpers shared by the ``bench/compare_*.py`` scripts."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], repeat: int, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` over ``repeat`` runs after ``warmup`` untimed runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def print_table(rows: list[dict]) -> None:
    """Rows of {case, impl, seconds, rate, ratio} as an aligned text table."""
    header = f"{'case':<40}{'implementation':<34}{'median s':>11}{'rate':>16}{'numtile/peer':>14}"
    print(header)
    print("-" * len(header))
    for row in rows:
        ratio = row.get("ratio")
        ratio_text = f"{ratio:>14.2f}" if ratio is not None else f"{'':>14}"
        print(
            f"{row['case']:<40}{row['impl']:<34}{row['seconds']:>11.4f}{row.get('rate', ''):>16}"
            f"{ratio_text}"
        )
