"""Data-parallel training under ``mpiexec -n P numtile train ...`` (issue 12).

Every rank runs the same ``Trainer`` with the same seed, so it draws the same batches; the
batch is cut into tiles of ``--batch-tile`` sequences, and tile ``b`` of every tensor the
forward pass makes is owned by rank ``b % P`` (``by_axis(0)``: the ids, and through the
placement rule every activation after them). Each rank so computes the forward and
backward of its own sequences. The parameters are sharded by owner, as ZeRO-3 / FSDP:
``shard`` gives each parameter tile an owner so that every rank owns about the same bytes
(largest tiles first, each to the rank owning the fewest bytes so far: every rank computes
the same table). A weight's gradient sums the contributions of every rank's sequences; its
tiles take their parameter's owners (``placement.follow_owners``), so each sum is reduced
on the parameter's owner, which runs the AdamW update and holds the moments; its readers
get the updated tile once per step, cached until the next update. With
``NUMTILE_MPI_PARAMETERS=replicated`` every parameter tile is owned by every rank instead:
every rank runs every update, reading the gradient reduced on its owner and sent to every
rank (an all-reduce). The losses are the single-process losses up to float32 reduction
order.

Checkpoints stay one HDF5 file: the tiles travel to rank 0, the one writer, which writes
them tile by tile; the other ranks wait for it to finish. ``--resume`` reads the file on
every rank, so a run resumes on any number of ranks.
"""

from __future__ import annotations

import os

import numtile as nt
from numtile.io import save_checkpoint
from numtile.runtime.distributed import one_writer
from numtile.runtime.distributed.front import ALL
from numtile.tiletensor import placement

WRITER = 0  # the rank that writes checkpoints
MODES = ("sharded", "replicated")  # where parameters live (NUMTILE_MPI_PARAMETERS)


def parameters_mode() -> str:
    """``NUMTILE_MPI_PARAMETERS``: ``sharded`` (the default) or ``replicated``."""
    mode = os.environ.get("NUMTILE_MPI_PARAMETERS", "sharded")
    if mode not in MODES:
        raise ValueError(f"NUMTILE_MPI_PARAMETERS must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def data_parallel(model, parameters: str | None = None) -> None:
    """Make ``model``'s forward passes place batch tile ``b`` on rank ``b % nranks``; with
    ``parameters="replicated"`` every rank also holds and updates every parameter."""
    parameters = parameters_mode() if parameters is None else parameters
    if parameters not in MODES:
        raise ValueError(f"parameters must be one of {', '.join(MODES)}, got {parameters!r}")
    forward = model.forward
    batches = nt.distribution.by_axis(0)

    def distributed_forward(*args, **kwargs):
        if parameters == "replicated":
            replicate(model.parameters())
        else:
            shard(model.parameters())
        with placement.placing(batches):
            return forward(*args, **kwargs)

    model.forward = distributed_forward


def balanced_owners(sizes, nranks: int) -> list[int]:
    """An owner rank for each item of ``sizes`` (bytes) so that the ranks' totals are
    balanced: the largest first, each to the rank with the fewest bytes so far (the lowest
    rank on a tie; a stable order on equal sizes). Deterministic, so every rank computes
    the same; the totals differ by at most the largest item.

    >>> balanced_owners([10, 40, 30, 20, 5], 2)
    [0, 0, 1, 1, 0]
    """
    loads = [0] * nranks
    owners = [0] * len(sizes)
    for item in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        rank = min(range(nranks), key=loads.__getitem__)
        owners[item] = rank
        loads[rank] += sizes[item]
    return owners


def shard(tensors) -> None:
    """Give every tile of ``tensors`` (the parameters, in the model's order) an owner rank,
    balanced by bytes (``balanced_owners``). Tiles that have an owner keep it; the others
    (all of them before the first step, and a resumed run's new ones) are held by every
    rank until their owner's first update, so the first forward moves no parameter."""
    handles = [h for t in tensors for h in t.handles]
    new = [h for h in handles if getattr(h, "owner", None) is None]
    if not new:
        return
    front = nt.get_runtime().distributed
    owners = balanced_owners([h.nbytes for h in handles], front.nranks)
    for handle, owner in zip(handles, owners):
        if getattr(handle, "owner", None) is None:
            handle.owner = owner


def replicate(tensors) -> None:
    """Make every tile of ``tensors`` replicated (owner ``ALL``): the tasks that write it
    (the optimizer's) run on every rank, which so reads the gradient everywhere (reduced on
    its owner, then sent to every rank: an all-reduce). Tiles already replicated are left
    as they are; the others (new ones: a resumed run's) first come to every rank."""
    front = nt.get_runtime().distributed
    new = [h for t in tensors for h in t.handles if getattr(h, "owner", None) != ALL]
    if new:
        front.send_to(new, front.everyone)
    for handle in new:
        handle.owner = ALL
        handle.ranks = None


def save_distributed_checkpoint(path, tensors, attrs, **options) -> bool:
    """``save_checkpoint`` under MPI, on every rank: the tiles travel to rank 0 (``WRITER``),
    which writes the file; True on the rank that wrote it."""
    handles = [handle for tensor in tensors.values() for handle in tensor.handles]
    with one_writer(nt.get_runtime(), handles, WRITER) as writing:
        if writing:
            save_checkpoint(path, tensors, attrs, **options)
    return writing


__all__ = [
    "MODES",
    "WRITER",
    "balanced_owners",
    "data_parallel",
    "replicate",
    "save_distributed_checkpoint",
    "shard",
]
