"""Data-parallel training under ``mpiexec -n P numtile train ...`` (issue 12).

Every rank runs the same ``Trainer`` with the same seed, so it draws the same batches; the
batch is cut into tiles of ``--batch-tile`` sequences, and tile ``b`` of every tensor the
forward pass makes is owned by rank ``b % P`` (``by_axis(0)``: the ids, and through the
placement rule every activation after them). Each rank so computes the forward and
backward of its own sequences. The parameters start held by every rank; a weight's
gradient sums the contributions of every rank's sequences (accumulations reduced on the
gradient's owner), and the optimizer step of each parameter tile runs on the owner of its
gradient tile, which owns the updated parameter from then on (sharded by owner, as ZeRO-3 /
FSDP; its readers get it once per step, cached until the next update). With
``NUMTILE_MPI_PARAMETERS=replicated`` every parameter tile is owned by every rank instead:
every rank runs every update, reading the gradient reduced on its owner and sent to every
rank (an all-reduce); the same bytes travel, and the updates run once per rank (measured in
bench/compare_mpi.py --train: sharded, the default, was faster). The losses are the
single-process losses up to float32 reduction order.

Checkpoints stay one HDF5 file: the tiles travel to rank 0, the one writer, which writes
them tile by tile; the other ranks wait for it to finish. ``--resume`` reads the file on
every rank, so a run resumes on any number of ranks.
"""

from __future__ import annotations

import os

import numtile as nt
from numtile.io import save_checkpoint
from numtile.runtime.distributed.front import ALL
from numtile.runtime.distributed.sequence import check_timeout
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
        with placement.placing(batches):
            return forward(*args, **kwargs)

    model.forward = distributed_forward


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
    front = nt.get_runtime().distributed
    handles = [handle for tensor in tensors.values() for handle in tensor.handles]
    front.send_to(handles, (WRITER,))  # the ranks agree on what they save
    wrote = front.rank == WRITER
    if wrote:
        with front.local_waits():  # the tiles come to this rank only: no wait is collective
            save_checkpoint(path, tensors, attrs, **options)
    # the others wait for the file (a run that stops after a save finds it complete), and do
    # not run ahead into the next step while the writer writes
    front.node.exchange(("saved", path), check_timeout())
    return wrote


__all__ = ["MODES", "WRITER", "data_parallel", "replicate", "save_distributed_checkpoint"]
