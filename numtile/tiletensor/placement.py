"""Which rank owns the tiles of the tensors an op makes, and ``redistribute``.

The rule (under MPI; nothing changes on one process): **the new tensors an op makes take
the distribution of its first tensor argument that has one other than ``replicated``**
(positional arguments first, then keywords; a list or tuple of tensors counts, in order;
``replicated`` when every distributed argument is replicated: replicated inputs, such as
the weights of a data-parallel model, do not say where the work runs). A result of the
same layout as that argument has each tile on the rank that owns the argument's tile of the
same index, so element-wise chains never move a tile; ``A @ B`` over a 2-D block-cyclic
``A`` gives a block-cyclic result (tile ``(i, j)`` on the owner the grid gives it), whose tiles its
owners compute. A distribution that cannot place a result (``by_axis(2)`` for a 2-D sum, a
user function that raises or returns something else) leaves it without one: each of its
tiles is then owned by the rank that first computes it (the owner of the first owned tile
that task touches). Tensors made without a distribution (``from_numpy(x)`` alone) are held
by every rank until a task writes them. ``tensor.distribution`` says what a tensor has.

``redistribute(x, distribution, tile_shape=None)`` (``redistribution.py``) copies ``x`` to a
new distribution and tiling.
"""

from __future__ import annotations

import contextlib

from numtile.runtime import Access, get_runtime
from numtile.runtime.distributed.distribution import Replicated, TileTable
from numtile.runtime.distributed.front import ALL, place
from numtile.runtime.distributed.reduce import partial_rank
from numtile.tiletensor.codelets.copy import fill

_CURRENT: list = []  # the distribution each running op gives its new tensors (innermost last)
ACTIVE = [False]  # set once a distributed tensor exists under MPI: ops look for distributions


def activate() -> None:
    ACTIVE[0] = True


def _first_distribution(args, kwargs):
    """The first distribution among the tensors in ``args``/``kwargs`` that is not
    ``replicated`` (replicated inputs do not say where work should run), else replicated."""
    fallback = None
    for value in (*args, *kwargs.values()):
        values = value if isinstance(value, (list, tuple)) else (value,)
        for item in values:
            found = getattr(item, "distribution", None)
            if found is None:
                continue
            if not isinstance(found, Replicated):
                return found
            fallback = fallback or found
    return fallback


def run_placed(function, args, kwargs):
    """Run an op so the tensors it makes take the first distribution among its arguments."""
    distribution = _first_distribution(args, kwargs)
    if distribution is None:
        return function(*args, **kwargs)
    _CURRENT.append(distribution)
    try:
        return function(*args, **kwargs)
    finally:
        _CURRENT.pop()


@contextlib.contextmanager
def placing(distribution):
    """Tensors made inside the ``with`` block take ``distribution``."""
    _CURRENT.append(distribution)
    try:
        yield
    finally:
        _CURRENT.pop()


def inherited():
    """The distribution a tensor made now takes (None outside ops on distributed tensors)."""
    return _CURRENT[-1] if _CURRENT else None


def place_tiles(layout, handles, distribution):
    """Give ``handles`` (new, empty) owners by ``distribution``; False if it cannot place
    them (the tiles stay without an owner)."""
    front = get_runtime().distributed
    nranks = 1 if front is None else front.nranks
    try:
        owners = distribution.owners(list(layout.indices()), nranks)
    except Exception:  # a by_axis axis this tensor lacks, a user function that fails
        return False
    if front is not None:
        for handle, owner in zip(handles, owners):
            place(handle, owner)
    return True


def zero_first(runtime, tile, pairs) -> bool:
    """Under MPI, fill ``tile`` with zeros and return True when some GEMM of the chain about
    to write it (one product per ``(a, b)`` of ``pairs``) runs on another rank than the tile's:
    every GEMM then adds (beta 1), so each rank's products run where their inputs are, into a
    partial reduced on the tile's owner (runtime/distributed/reduce.py), instead of the inputs
    travelling to the owner (a weight gradient's chain over the batch tiles). Otherwise (one
    process, or every product computed where the tile is: activations of one batch tile) False:
    the chain's first GEMM writes the tile, with no pass of zeros over it first (GPT-2 mini's
    logits: 196 MiB a batch tile)."""
    if runtime.distributed is None:
        return False
    owner = getattr(tile, "owner", None)
    homes = [partial_rank(pair) for pair in pairs]
    home = homes[0] if owner is None else owner
    if owner != ALL and all(rank is None or rank == home for rank in homes):
        return False
    runtime.submit(fill, [(tile, Access.W)], (tile.dtype.type(0),))
    return True


def wait_tensors(tensors) -> None:
    """Wait for every tile of ``tensors`` at once: under MPI one collective wait brings them
    all to every rank, so reading each afterwards (``item()``) waits for nothing (a wait per
    tensor posted their transfers one after another: GPT-2 mini's 68 gradient norms).

    >>> import numtile as nt
    >>> wait_tensors([nt.ones(()), nt.zeros(2)])
    """
    get_runtime().wait_handles([handle for tensor in tensors for handle in tensor.handles])


def distributed() -> bool:
    """True when the running runtime spans MPI ranks.

    >>> distributed()
    False
    """
    return get_runtime().distributed is not None


def host_memory_limited() -> bool:
    """True when the running runtime limits host memory (tiles beyond the limit wait in
    spill files, ``NUMTILE_HOST_MEM_LIMIT``).

    >>> import numtile as nt
    >>> host_memory_limited() == (nt.get_runtime().config.host_mem_limit is not None)
    True
    """
    return get_runtime().config.host_mem_limit is not None


def follow_owners(grad, leaf):
    """Under MPI, give ``grad``'s tiles the owners of ``leaf``'s (same layout) where those
    are ranks (a sharded parameter's: ``train_distributed.shard``), and return ``grad``:
    a gradient sum still open is then reduced on the parameter's owner, which runs its
    update, instead of on the batch's rank that made the tile. Leaves without owners
    (single process, replicated or not yet placed parameters) leave ``grad`` as it is."""
    front = get_runtime().distributed
    if front is None or grad.layout != leaf.layout:
        return grad
    owners = [getattr(h, "owner", None) for h in leaf.handles]
    if not all(isinstance(o, int) and o >= 0 for o in owners):
        return grad
    for handle, owner in zip(grad.handles, owners):
        if getattr(handle, "owner", None) != owner:
            front.reductions.reroot(handle, owner)
    grad.distribution = TileTable(dict(zip(grad.layout.indices(), owners)))
    return grad


def fold_sums(total, grad) -> bool:
    """Under MPI, ``total += grad`` without ``grad``'s partial sums travelling, when every
    tile of ``grad`` is a sum still open (a gradient just made from the tiles of several
    ranks) reduced where ``total``'s tile is: each rank adds its partial into ``total``'s
    (runtime/distributed/reduce.py ``fold``), so the two gradients of a tied weight (GPT-2's
    token embedding, read by the embedding and the LM head) reach the owner as one sum. Then
    ``grad`` is consumed (invalidated) and True; else nothing changes and False."""
    front = get_runtime().distributed
    if front is None or total.layout != grad.layout or total.dtype != grad.dtype:
        return False
    pairs = list(zip(grad.handles, total.handles))
    if not all(front.reductions.can_fold(source, target) for source, target in pairs):
        return False
    for source, target in pairs:
        front.reductions.fold(source, target)
    grad.invalidate()
    return True


__all__ = [
    "activate",
    "fold_sums",
    "follow_owners",
    "inherited",
    "place_tiles",
    "placing",
    "run_placed",
    "wait_tensors",
    "zero_first",
]
