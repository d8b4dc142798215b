"""The autograd graph links nodes, not tensors: an intermediate tensor's tiles die when the
caller and the saved tensors let it go, before the backward; a graph consumed by one backward
refuses a second one through it instead of dropping gradients."""

import gc
import weakref

import numpy as np
import pytest

import numtile as nt


def test_an_intermediate_dies_before_the_backward_when_nothing_saves_it():
    w = nt.from_numpy(np.arange(6.0).reshape(2, 3), tile_shape=(1, 2)).requires_grad_()
    h = w * 2.0  # its gradient rule saves nothing
    tiles = [weakref.ref(handle) for handle in h.handles]
    y = (h + 1.0).sum()
    del h
    gc.collect()
    nt.wait_all()
    assert all(ref() is None for ref in tiles)  # the graph did not keep h's tiles
    y.backward()
    np.testing.assert_array_equal(w.grad.to_numpy(), np.full((2, 3), 2.0))


def test_a_saved_intermediate_lives_until_its_rule_ran():
    w = nt.from_numpy(np.arange(1.0, 7.0).reshape(2, 3), tile_shape=(1, 2)).requires_grad_()
    h = w * 3.0
    y = (h * h).sum()  # the product saves h for its backward
    ref = weakref.ref(h.handles[0])
    del h
    gc.collect()
    assert ref() is not None
    y.backward()
    np.testing.assert_allclose(w.grad.to_numpy(), 18.0 * np.arange(1.0, 7.0).reshape(2, 3))


def test_a_second_backward_through_a_consumed_graph_raises():
    w = nt.from_numpy(np.ones(4), tile_shape=2).requires_grad_()
    h = w * 2.0
    a, b = (h * 3.0).sum(), (h * 5.0).sum()
    a.backward()
    with pytest.raises(RuntimeError, match="consumed"):
        b.backward()
    np.testing.assert_array_equal(w.grad.to_numpy(), np.full(4, 6.0))
