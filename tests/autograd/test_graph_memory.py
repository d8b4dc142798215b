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


def test_a_later_gradient_waits_for_the_next_reader_or_the_end():
    """A rule's ``Later`` leaf gradient is computed when the tape reaches the leaf's next
    reader (before that rule) or after the last node, and only when leaf gradients are
    consumed during the backward (``on_leaf_done``); otherwise right away. The sums are the
    same either way."""
    from numtile.autograd.tape import Function, Later, backward

    events = []

    class Scale(Function):  # y = w * x, w's gradient left for later when the tape allows it
        @staticmethod
        def forward(ctx, w, x):
            ctx.save_for_backward(w, x)
            return w * x

        @staticmethod
        def backward(ctx, g):
            w, x = ctx.saved
            events.append("scale rule")

            def weight_grad():
                events.append("weight grad")
                return g * x

            return (Later(weight_grad) if ctx.may_defer else weight_grad()), g * w

    names = {}
    for hook in (None, lambda leaf: events.append(f"{names[id(leaf)]} done")):
        w = nt.from_numpy(np.full(3, 2.0), tile_shape=(2,)).requires_grad_()
        x = nt.from_numpy(np.arange(1.0, 4.0), tile_shape=(2,)).requires_grad_()
        names.update({id(w): "w", id(x): "x"})
        events.clear()
        backward((Scale.apply(w, x) * w).sum(), on_leaf_done=hook)  # Scale reads w last
        if hook:  # x is complete after Scale's rule; w after its gradient, at the end
            assert events == ["scale rule", "x done", "weight grad", "w done"]
        else:
            assert events == ["scale rule", "weight grad"]
        np.testing.assert_allclose(w.grad.to_numpy(), 2 * 2.0 * np.arange(1.0, 4.0))
        np.testing.assert_allclose(x.grad.to_numpy(), np.full(3, 4.0))
        events.clear()
        w.grad = x.grad = None
        h = w * x  # read first in the forward: the product's rule comes after Scale's
        backward(Scale.apply(w, h).sum(), on_leaf_done=hook)
        assert events[:2] == ["scale rule", "weight grad"]  # before the product's rule
        if hook:
            assert events[2:] == ["w done", "x done"] or events[2:] == ["x done", "w done"]
        np.testing.assert_allclose(w.grad.to_numpy(), 2 * 2.0 * np.arange(1.0, 4.0))
        np.testing.assert_allclose(x.grad.to_numpy(), np.full(3, 4.0))
