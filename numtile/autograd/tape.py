"""Reverse-mode autograd on a tape: ``Function`` nodes whose forward and backward submit tiles.

Each differentiable op is a ``Function`` with ``forward(ctx, ...)`` and
``backward(ctx, grad_out)``; ``apply`` runs the forward without recording and, when an
input requires a gradient, hangs a ``Node`` on the output. ``backward`` walks the nodes
in reverse topological order, sums gradients, accumulates into leaves' ``.grad``, and
drops each node's saved tensors as soon as its backward has been submitted, so their
tiles are freed while the rest of the backward runs.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator

from numtile.tiletensor import placement
from numtile.tiletensor.creation import ones_like
from numtile.tiletensor.dtypes import is_bfloat16
from numtile.tiletensor.elementwise import accumulate, add, astype, real
from numtile.tiletensor.manipulation import retile
from numtile.tiletensor.tensor import TileTensor

_state = threading.local()


def is_grad_enabled() -> bool:
    return getattr(_state, "enabled", True)


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Inside the block no op is recorded for backward (inference, optimizer steps).

    >>> import numtile as nt
    >>> w = nt.ones((2,)).requires_grad_()
    >>> with nt.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """
    previous = is_grad_enabled()
    _state.enabled = False
    try:
        yield
    finally:
        _state.enabled = previous


@contextlib.contextmanager
def enable_grad() -> Iterator[None]:
    previous = is_grad_enabled()
    _state.enabled = True
    try:
        yield
    finally:
        _state.enabled = previous


class Context:
    """What a forward keeps for its backward (``save_for_backward`` / ``saved``)."""

    __slots__ = ("saved", "__dict__")

    def __init__(self) -> None:
        self.saved: tuple = ()

    def save_for_backward(self, *tensors) -> None:
        self.saved = tensors


class Node:
    """One recorded op: its function, context, output dtype and inputs. An input that is
    itself a recorded output is kept as the Node that made it, not as the tensor (as
    PyTorch's ``grad_fn`` graph does): the graph holds no tile of an intermediate tensor,
    which dies once the caller and the saved tensors let it go (GPT-2 small: the float32
    layer-norm outputs the linears read as bfloat16 copies, 75 MiB until the backward)."""

    __slots__ = ("function", "ctx", "inputs", "dtype")
    requires_grad = True  # as the tensor it stands for

    def __init__(self, function: type[Function], ctx: Context, inputs: tuple, dtype) -> None:
        self.function = function
        self.ctx = ctx
        self.inputs = tuple(_graph_input(value) for value in inputs)
        self.dtype = dtype


def _graph_input(value):
    """What a node keeps of one input: its producer's Node for a recorded tensor whose graph
    is not consumed yet, else the value itself (a leaf, a constant)."""
    node = getattr(value, "_node", None)
    return node if isinstance(node, Node) and node.ctx is not None else value


def needs_grad(*values) -> bool:
    """Whether grad mode is on and one of ``values`` requires a gradient (called per op)."""
    if not getattr(_state, "enabled", True):
        return False
    for value in values:
        if getattr(value, "requires_grad", False):
            return True
    return False


class Function:
    """A differentiable op: subclass with static ``forward`` and ``backward``.

    ``backward`` returns one gradient (or None) per positional input of ``forward``.
    A rule with ``adds_into_leaves`` finds in ``ctx.leaf_grads`` each input's gradient that
    it may add its own into in place (``_own_grad``), and returns None for those it did:
    no gradient-sized temporary is made (GPT-2's tied embedding: 154 MiB).
    """

    adds_into_leaves = False

    @staticmethod
    def forward(ctx: Context, *inputs, **kwargs) -> TileTensor:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, grad: TileTensor) -> tuple:
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs, **kwargs) -> TileTensor:
        ctx = Context()
        record = needs_grad(*inputs)
        with no_grad():
            out = cls.forward(ctx, *inputs, **kwargs)
        if record:
            if any(out is value for value in inputs):  # an identity (reshape to its own shape)
                out = out.detach()  # a new tensor on the same tiles, so the input keeps its node
            out.requires_grad = True
            out._node = Node(cls, ctx, inputs, out.dtype)
        return out


class Later:
    """A leaf's gradient that a rule leaves to the end of its backward: ``compute()`` submits it
    (returning the gradient, or None when it added into ``ctx.leaf_grads``) when the tape
    reaches the next node that reads the leaf, or after the last node. A rule may return one
    when ``ctx.may_defer`` and holding the gradient now costs memory that the rest of the
    backward needs (GPT-2's tied table, 154 MiB, while every activation is alive)."""

    __slots__ = ("compute",)

    def __init__(self, compute) -> None:
        self.compute = compute


def _topological_order(root: Node) -> list[Node]:
    """The nodes ``root`` depends on, each after every node its output feeds."""
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for value in node.inputs:
            if isinstance(value, Node):
                stack.append((value, False))
    return order


# gradient tensors held in more than one place (a rule's output given to two inputs, the
# caller's own gradient): id -> tensor; a leaf holding one is never accumulated into in place
_shared: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _mark_shared(grads) -> None:
    """Remember the tensors that appear more than once in ``grads``."""
    seen = set()
    for grad in grads:
        if grad is not None:
            if id(grad) in seen:
                _shared[id(grad)] = grad
            seen.add(id(grad))


def _own_grad(value):
    """``value.grad`` when a rule may add its gradient into it in place (a leaf's own
    gradient, held by nothing else, in one process), else None."""
    if not isinstance(value, TileTensor) or value._node is not None or not value.requires_grad:
        return None
    grad = value.grad
    if grad is None or _shared.get(id(grad)) is grad or placement.distributed():
        return None
    return grad


def accumulate_grad(leaf: TileTensor, grad: TileTensor) -> None:
    """``leaf.grad += grad`` tile by tile (commutative accumulate tasks), or set it (the first
    accumulation into a shared gradient held by reference makes a new tensor instead)."""
    if grad.shape != leaf.shape:
        raise ValueError(f"gradient of shape {grad.shape} for a tensor of shape {leaf.shape}")
    if grad.dtype != leaf.dtype:
        grad = astype(grad, leaf.dtype)
    if grad.tile_shape != leaf.tile_shape:
        grad = retile(grad, leaf.tile_shape)
    grad = placement.follow_owners(grad, leaf)  # under MPI: reduced on the leaf's owners
    if leaf.grad is None:
        leaf.grad = grad
    elif _shared.get(id(leaf.grad)) is leaf.grad:
        leaf.grad = add(leaf.grad, grad)
    elif not placement.fold_sums(leaf.grad, grad):  # under MPI: one sum travels, not two
        accumulate(leaf.grad, grad)


def _last_uses(order: list[Node]) -> dict[int, list[TileTensor]]:
    """Position in ``reversed(order)`` of the last node reading each leaf that requires a
    gradient -> those leaves: after that node's rule, no more gradient comes to them."""
    last: dict[int, tuple[int, TileTensor]] = {}
    for position, node in enumerate(reversed(order)):
        for value in node.inputs:
            if isinstance(value, TileTensor) and value.requires_grad:
                last[id(value)] = (position, value)
    done: dict[int, list[TileTensor]] = {}
    for position, leaf in last.values():
        done.setdefault(position, []).append(leaf)
    return done


def backward(root: TileTensor, grad: TileTensor | None = None, *, on_leaf_done=None) -> None:
    """Accumulate d(root)/d(leaf) into every leaf's ``.grad`` that requires a gradient.

    ``on_leaf_done(leaf)`` (optional) is called for each leaf as soon as the rules of every
    node that reads it have been submitted: its ``.grad`` is then complete (as tasks: work on
    it is ordered after them by the runtime) while the rest of the backward goes on. An
    optimizer updates the leaf there and drops its gradient (``Optimizer.step_in_backward``).
    """
    if not root.requires_grad:
        raise RuntimeError("backward() on a tensor that does not require grad")
    if grad is not None:
        _shared[id(grad)] = grad  # the caller's: never accumulated into
    else:
        if root.size != 1:
            raise ValueError(
                f"backward() needs a gradient for a tensor of shape {root.shape}; "
                f"only a single-element output gets an implicit 1"
            )
        grad = ones_like(root)
    root_node, root._node = root._node, None  # the graph is consumed (no retain_graph)
    if root_node is None or root_node.ctx is None:
        with no_grad():
            accumulate_grad(root, grad)
            if on_leaf_done is not None:
                on_leaf_done(root)
        return
    grads: dict[int, TileTensor] = {id(root_node): grad}
    order = _topological_order(root_node)
    leaves_done = _last_uses(order) if on_leaf_done is not None else {}
    later: dict[int, tuple[TileTensor, Later]] = {}  # leaf id -> its deferred gradient
    with no_grad():
        for position, node in enumerate(reversed(order)):
            for value in node.inputs:  # a deferred gradient is due before the leaf's next reader
                if id(value) in later:
                    _deliver(*later.pop(id(value)), grads)
            _run_rule(node, grads, later, defer=on_leaf_done is not None)
            for leaf in leaves_done.get(position, ()):
                if id(leaf) not in later:
                    on_leaf_done(leaf)
        for leaf, gradient in list(later.values()):
            _deliver(leaf, gradient, grads)
            if on_leaf_done is not None:
                on_leaf_done(leaf)


def _run_rule(node: Node, grads: dict[int, TileTensor], later: dict, defer: bool) -> None:
    """Submit ``node``'s backward rule on its gradient (taken from ``grads``) and pass the
    gradients of its inputs on: into ``grads`` for recorded ones, into leaves' ``.grad`` (a
    ``Later`` one of a leaf into ``later``). ``ctx.may_defer`` tells the rule whether leaf
    gradients are consumed during the backward (``on_leaf_done``): only then does leaving one
    to the end spare memory, rather than move the peak to where every gradient is held."""
    g = grads.pop(id(node), None)
    ctx, node.ctx = node.ctx, None  # saved activations are released after this rule
    if g is None:
        return
    if ctx is None:
        raise RuntimeError(
            f"backward() reached the {node.function.__name__} node, whose graph an "
            f"earlier backward() consumed (numtile keeps no graph: no retain_graph)"
        )
    if node.function.adds_into_leaves:
        ctx.leaf_grads = tuple(_own_grad(value) for value in node.inputs)
    ctx.may_defer = defer
    input_grads = node.function.backward(ctx, g)
    del ctx
    if not isinstance(input_grads, tuple):
        input_grads = (input_grads,)
    _mark_shared(input_grads)
    for value, value_grad in zip(node.inputs, input_grads):
        if value_grad is None or not getattr(value, "requires_grad", False):
            continue
        if isinstance(value_grad, Later) and not isinstance(value, Node):  # a leaf's waits
            if id(value) in later:  # one waits per leaf: an earlier one is computed now
                _deliver(*later.pop(id(value)), grads)
            later[id(value)] = (value, value_grad)
        else:
            _deliver(value, value_grad, grads)  # computes a recorded input's Later now


def _deliver(value, value_grad, grads: dict[int, TileTensor]) -> None:
    """Hand one input's gradient on: summed into ``grads`` for a recorded input, accumulated
    into a leaf's ``.grad``; a ``Later`` one computed first."""
    if isinstance(value_grad, Later):
        value_grad = value_grad.compute()
        if value_grad is None:
            return
    if value_grad.dtype.kind == "c" and value.dtype.kind != "c":
        value_grad = real(value_grad)  # PyTorch's convention: a real input
    bf16 = is_bfloat16(value.dtype) or is_bfloat16(value_grad.dtype)
    if bf16 and value_grad.dtype != value.dtype:
        value_grad = astype(value_grad, value.dtype)  # as torch: grads take its dtype
    if not isinstance(value, Node):
        accumulate_grad(value, value_grad)
    elif id(value) in grads:
        grads[id(value)] = add(grads[id(value)], value_grad)
    else:
        grads[id(value)] = value_grad
