"""SwiGLU CUDA kernels (twins of ``numtile.ops_cpu.nn.swiglu``): one thread per element,
bfloat16 bits (uint16) widened as they are read and rounded to nearest even as they are
written, floats as they are."""

from __future__ import annotations

import functools
import math

from numba import cuda

from numtile.ops_cuda.launch import DeviceArray, cached_kernel, device_function, launch
from numtile.ops_cuda.nn.loss import _load, _store


@device_function
def _sigmoid(value):
    # exp of a non-positive number only: no overflow for any input
    decay = math.exp(-abs(value))
    return (1.0 if value >= 0 else decay) / (1.0 + decay)


@functools.cache
def _apply(load, store):
    @cached_kernel
    def kernel(gate, up, out):
        for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
            g = load(gate[i])
            out[i] = store(g * _sigmoid(g) * load(up[i]))

    return kernel


@functools.cache
def _backward(load, store):
    @cached_kernel
    def kernel(gate, up, grad, grad_gate, grad_up):
        for i in range(cuda.grid(1), grad.shape[0], cuda.gridsize(1)):
            g, d = load(gate[i]), load(grad[i])
            s = _sigmoid(g)
            grad_gate[i] = store(d * load(up[i]) * s * (1 + g * (1 - s)))
            grad_up[i] = store(d * (g * s))

    return kernel


def swiglu_apply(gate: DeviceArray, up: DeviceArray, out: DeviceArray, *, stream=0) -> None:
    """out = silu(gate) * up, element by element (flat arrays of one dtype)."""
    launch(_apply(_load(gate), _store(out)), out.shape[0], stream, gate, up, out)


def swiglu_backward(
    gate: DeviceArray,
    up: DeviceArray,
    grad: DeviceArray,
    grad_gate: DeviceArray,
    grad_up: DeviceArray,
    *,
    stream=0,
) -> None:
    """grad_gate = grad * up * silu'(gate), grad_up = grad * silu(gate)."""
    kernel = _backward(_load(gate), _store(grad_gate))
    launch(kernel, grad.shape[0], stream, gate, up, grad, grad_gate, grad_up)
