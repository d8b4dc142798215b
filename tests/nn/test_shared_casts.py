"""``functional.shared_bf16_casts``: under bf16-mixed, layers reading one float32 activation
cast it once (fewer cast tasks), with outputs and gradients equal bit for bit to one cast per
layer."""

from __future__ import annotations

import contextlib

import numpy as np

import numtile as nt
from numtile.nn import functional
from numtile.nn.layers import GatedMLP
from numtile.runtime.codelet import REGISTRY


def _run(mlp, x):
    nt.wait_all()  # no earlier test's tasks still counting
    before = REGISTRY["cast"].calls
    with nt.nn.precision("bf16-mixed"):
        leaf = nt.from_numpy(x, tile_shape=(5, 4)).requires_grad_()
        out = mlp(leaf)
        out.sum().backward()
    results = [out.to_numpy(), leaf.grad.to_numpy()] + [p.grad.to_numpy() for p in mlp.parameters()]
    nt.wait_all()
    for p in mlp.parameters():
        p.grad = None
    return results, REGISTRY["cast"].calls - before


def test_gated_mlp_casts_its_input_once(monkeypatch):
    mlp = GatedMLP(8, 12, tile=(4, 6), seed=3)
    x = np.random.default_rng(0).standard_normal((9, 8)).astype(np.float32)
    shared, shared_casts = _run(mlp, x)
    monkeypatch.setattr(functional, "shared_bf16_casts", contextlib.nullcontext)
    separate, separate_casts = _run(mlp, x)
    assert shared[0].dtype == nt.bfloat16 and shared[1].dtype == np.float32
    for a, b in zip(shared, separate):
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))
    x_tiles = 2 * 2  # (9, 8) in (5, 4) tiles
    assert separate_casts - shared_casts == x_tiles  # up_proj's cast of x is gone
