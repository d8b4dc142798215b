"""CUDA twins of ``ops_cpu.scan``: the in-tile scan of ``cumulative_sum`` (one thread per
(p, q) column, walking the scanned axis), the carries between tiles, and the scan of a tile
that starts from its carry."""

from __future__ import annotations

from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, launch

__all__ = ["cumulative_sum", "cumulative_sum_from", "scan_carry"]


@cuda.jit
def _cumulative_sum_kernel(x, out, pre, n, post):
    for k in range(cuda.grid(1), pre * post, cuda.gridsize(1)):
        p, q = k // post, k % post
        at = p * n * post + q
        if n > 0:
            out[at] = x[at]
        for _ in range(1, n):
            at += post
            out[at] = out[at - post] + x[at]


@cuda.jit
def _scan_carry_kernel(scanned, carry_in, carry_out, pre, n, post):
    for k in range(cuda.grid(1), pre * post, cuda.gridsize(1)):
        p, q = k // post, k % post
        carry_out[k] = carry_in[k] + scanned[(p * n + n - 1) * post + q]


@cuda.jit
def _cumulative_sum_from_kernel(x, carry, out, pre, n, post):
    for k in range(cuda.grid(1), pre * post, cuda.gridsize(1)):
        p, q = k // post, k % post
        at = p * n * post + q
        total = carry[k]
        for _ in range(n):
            total += x[at]
            out[at] = total
            at += post


def cumulative_sum(x: DeviceArray, out: DeviceArray, pre, n, post, *, stream=0) -> None:
    """out[p, j, q] = sum over k <= j of x[p, k, q]."""
    pre, n, post = int(pre), int(n), int(post)
    launch(_cumulative_sum_kernel, pre * post, stream, x, out, pre, n, post)


def scan_carry(scanned, carry_in, carry_out, pre, n, post, *, stream=0) -> None:
    """carry_out[p, q] = carry_in[p, q] + scanned[p, n - 1, q]."""
    pre, n, post = int(pre), int(n), int(post)
    launch(_scan_carry_kernel, pre * post, stream, scanned, carry_in, carry_out, pre, n, post)


def cumulative_sum_from(x, carry, out, pre, n, post, *, stream=0) -> None:
    """out[p, j, q] = carry[p, q] + sum over k <= j of x[p, k, q]."""
    pre, n, post = int(pre), int(n), int(post)
    launch(_cumulative_sum_from_kernel, pre * post, stream, x, carry, out, pre, n, post)
