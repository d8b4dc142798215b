"""Accumulate-mode writes from several ranks into one tile, reduced on its owner.

A gradient tile ``g`` owned by rank 0 that tasks on ranks 1 and 2 accumulate into
(``g += f(x_r)`` with ``x_r`` their own batch tiles) would, by owner-computes alone, bring
every ``x_r`` to rank 0. For a codelet whose accumulation is a sum (``ADDITIVE``), the task
runs instead where its first owned input lives, into a zero-filled *partial* tile of that
rank; the contributions of the owner itself go straight into ``g``. The group ends at the
next access to ``g`` that is not such an accumulation (a read, a write, a wait): each
contributing rank then sends its partial to the owner, which adds it into ``g`` (accumulate
mode again, so the additions run in any order). A replicated tile (owner ``ALL``) is reduced
on the first rank that contributed, and read from there, like any tile with one holder.

Every rank keeps the same record (which ranks contributed to which tile) from the task
sequence alone, so the sends and receives match without a message.
"""

from __future__ import annotations

import numpy as np

from numtile.runtime.access import WRITES, Access
from numtile.runtime.codelet import Codelet
from numtile.runtime.handle import DataHandle

R, W, ACC = Access.R, Access.W, Access.ACCUMULATE
ALL = -1

# the codelets whose accumulate-mode outputs are sums (``out += f(inputs)``), so that a
# zero-filled partial per rank, summed afterwards, gives the same result; ``register_additive``
# adds others (by name: codelets are redefined by tests and notebooks)
ADDITIVE = {
    "axpy",  # gradient sums (autograd's accumulate)
    "reduce:sum",
    "reduce:sum_columns",  # a float sum over an axis that is not innermost
    "reduce:sumsq",  # a gradient norm over tiles on several ranks (clip_grad_norm)
    "embedding_scatter",
    "layer_norm_param_grad",
    "rms_norm_param_grad",
}


def _beta_one(args) -> bool:
    return len(args) >= 4 and args[3] == 1.0


# codelets whose read-write output is updated by a sum when their arguments say so: a GEMM
# with beta 1 (``out += alpha * a @ b``); a chain of them into one tile, over inputs of
# several ranks, is the sum of each rank's own chain into a partial (the chain's tasks keep
# their order on each rank: the sums stay deterministic)
ADDITIVE_UPDATES = {"gemm": _beta_one, "gemm_rows": _beta_one}


def accumulates(codelet: Codelet, mode: Access, args) -> bool:
    """True if the task adds into the tile it accesses with ``mode`` (a sum reducible on
    the owner)."""
    if mode is ACC:
        return codelet.name in ADDITIVE
    test = ADDITIVE_UPDATES.get(codelet.name) if mode is Access.RW else None
    return test is not None and test(args)


def register_additive(*names: str) -> None:
    """Declare codelets (by name) whose accumulate-mode outputs are plain sums."""
    ADDITIVE.update(names)


def add_codelet(kind: str) -> Codelet:
    """``out += partial`` on the host kind ``kind``: what the owner runs per received partial."""
    return Codelet(
        "mpi_reduce_add",
        implementations={kind: lambda ops, partial, out: np.add(out, partial, out=out)},
    )


def copy_codelet(kind: str) -> Codelet:
    """``out = partial`` on the host kind ``kind``: a new reducing rank's start (``reroot``)."""
    return Codelet(
        "mpi_reduce_copy",
        implementations={kind: lambda ops, partial, out: np.copyto(out, partial)},
    )


def zero_codelet(kind: str) -> Codelet:
    """``out = 0`` on the host kind ``kind``: a new reducing rank's start without a partial."""
    return Codelet("mpi_reduce_zero", implementations={kind: lambda ops, out: out.fill(0)})


def _holds(handle: DataHandle, rank: int) -> bool:
    """True if ``rank`` holds ``handle``'s current value."""
    ranks = getattr(handle, "ranks", None)
    return ranks is None or rank in ranks


class Reduction:
    """One tile's open group of accumulations: its reducing rank and the partials."""

    __slots__ = ("handle", "root", "partials")

    def __init__(self, handle: DataHandle, root: int) -> None:
        self.handle = handle
        self.root = root
        self.partials: dict[int, DataHandle | None] = {}  # rank -> its partial (here only)


def partial_rank(inputs) -> int | None:
    """The rank where an accumulation reading ``inputs`` computes its partial sum: the owner
    of the first input owned by one rank (None when every input is replicated or unowned)."""
    for handle in inputs:
        owner = getattr(handle, "owner", None)
        if owner is not None and owner != ALL:
            return owner
    return None


class Reductions:
    """The open reductions of a ``Distributed`` front, keyed by handle id."""

    def __init__(self, front) -> None:
        self.front = front
        self.open: dict[int, Reduction] = {}
        kind = front.runtime.host_kind
        self.add, self.copy, self.zero = add_codelet(kind), copy_codelet(kind), zero_codelet(kind)

    def contributor(self, codelet: Codelet, accesses, args) -> int | None:
        """The rank that computes this accumulation locally, or None (owner computes)."""
        if codelet.name not in ADDITIVE and codelet.name not in ADDITIVE_UPDATES:
            return None
        targets = []
        for handle, mode in accesses:
            if WRITES[mode]:
                if not accumulates(codelet, mode, args):
                    return None
                owner = getattr(handle, "owner", None)
                if owner is None:
                    return None
                targets.append(owner)
        rank = partial_rank(handle for handle, mode in accesses if not WRITES[mode])
        if rank is None or all(owner == rank for owner in targets):
            return None
        if codelet.name in ADDITIVE_UPDATES:
            inputs = [handle for handle, mode in accesses if not WRITES[mode]]
            if not all(_holds(handle, rank) for handle in inputs):
                return None  # a GEMM's inputs would travel anyway: to the owner (SUMMA's volume)
            # ... as they do when the owner already holds one that is not everywhere: another
            # of its tasks brought it (a Cholesky update on a 1 x P grid, whose SYRK brought
            # one panel tile; as partial sums on the panel's rank, every update of a panel ran
            # there: 55% of the work on one of 2 ranks, and no fewer bytes)
            (target,) = targets
            if any(getattr(h, "ranks", None) is not None and _holds(h, target) for h in inputs):
                return None
        return rank

    def contribute(self, rank: int, codelet, accesses, args, priority, name):
        """Submit an accumulation that ``rank`` computes into its partials (or the tile)."""
        front = self.front
        local = []
        for handle, mode in accesses:
            if not WRITES[mode]:
                front.bring(handle, (rank,))
                local.append((handle, mode))
                continue
            reduction = self.open.get(handle.id)
            if reduction is None:
                root = rank if handle.owner == ALL else handle.owner
                reduction = self.open[handle.id] = Reduction(handle, root)
            if rank == reduction.root:
                front.bring(handle, (rank,))
                local.append((handle, mode))
                continue
            partial = reduction.partials.get(rank)
            if partial is None and front.rank == rank:
                zeros = np.zeros(handle.shape, handle.dtype)
                partial = DataHandle(handle.shape, handle.dtype, zeros)
            reduction.partials[rank] = partial
            local.append((partial, mode))
        if front.rank == rank:
            return front._submit(codelet, local, args, priority, name)
        return None

    def reroot(self, handle: DataHandle, owner: int) -> None:
        """Make rank ``owner`` the owner of ``handle`` (a tile written on another rank: a
        gradient made on its batch's rank, given to its parameter's owner). An open group
        is then reduced on ``owner``: the old reducing rank's sum so far becomes its partial
        (it travels once, as the new owner's partial would have), the new one's partial, if
        any, becomes the tile there. Every rank calls it, at the same point of the program.
        Without an open group only the owner changes: the value travels when read."""
        reduction = self.open.get(handle.id)
        if reduction is not None and reduction.root != owner:
            front = self.front
            old = reduction.root
            partial = reduction.partials.pop(owner, None)
            if front.rank == owner:
                if partial is not None:
                    front._submit(self.copy, [(partial, R), (handle, W)])
                else:
                    front._submit(self.zero, [(handle, W)])
            reduction.partials[old] = handle  # (its tile on rank ``old``)
            reduction.root = owner
            handle.ranks = frozenset((owner,))
            handle.holder = owner
        handle.owner = owner

    def can_fold(self, source: DataHandle, target: DataHandle) -> bool:
        """True if ``fold(source, target)`` applies: ``source``'s sum is still open and
        ``target``'s is open on the same reducing rank, or ``target`` is owned there."""
        reduction = self.open.get(source.id)
        if reduction is None or source.shape != target.shape or source.dtype != target.dtype:
            return False
        other = self.open.get(target.id)
        if other is not None:
            return other.root == reduction.root
        return getattr(target, "owner", None) == reduction.root

    def fold(self, source: DataHandle, target: DataHandle) -> None:
        """``target += source`` where ``source`` is a sum still open (``can_fold``): each
        rank's partial of ``source`` joins its partial of ``target`` (added into it there,
        or taken as it is), and the reducing rank adds its own share, so ``source``'s
        partials never travel: ``target``'s group carries them to the owner in its sum.
        ``source`` is consumed: its value is the reducing rank's share only (the caller
        invalidates it). Every rank calls it, at the same point of the program."""
        front = self.front
        reduction = self.open.pop(source.id)
        root = reduction.root
        into = self.open.get(target.id)
        if into is None:
            into = self.open[target.id] = Reduction(target, root)
        for rank, partial in reduction.partials.items():
            if rank not in into.partials:
                into.partials[rank] = partial  # (None on the other ranks)
            elif front.rank == rank:
                front._submit(self.add, [(partial, R), (into.partials[rank], ACC)])
        front.bring(source, (root,))
        front.bring(target, (root,))
        if front.rank == root:
            front._submit(self.add, [(source, R), (target, ACC)])

    def pending(self, handle: DataHandle) -> bool:
        return handle.id in self.open

    def flush(self, handle: DataHandle) -> None:
        """End ``handle``'s group: the partials travel to the reducing rank and are added."""
        reduction = self.open.pop(handle.id)
        front = self.front
        root = reduction.root
        front.bring(handle, (root,))
        for rank in sorted(reduction.partials):
            tag, _ = front.node.tags(next(front.transfers))
            if front.rank == rank:
                front._submit(
                    front.node.send,
                    [(reduction.partials[rank], R)],
                    (root, tag),
                    name=f"send partial sum to rank {root}",
                )
            elif front.rank == root:
                received = DataHandle(handle.shape, handle.dtype)
                front._submit(
                    front.node.receive,
                    [(received, W)],
                    (rank, tag),
                    name=f"receive partial sum from {rank}",
                )
                front._submit(self.add, [(received, R), (handle, ACC)])
        handle.ranks = frozenset((root,))
        handle.holder = root
