"""Data-parallel training under ``mpiexec -n P numtile train ...`` (issue 12).

Every rank runs the same ``Trainer`` with the same seed, so it draws the same batches; the
batch is cut into tiles of ``--batch-tile`` sequences, and tile ``b`` of every tensor the
forward pass makes is owned by rank ``b % P`` (``by_axis(0)``: the ids, and through the
placement rule every activation after them). Each rank so computes the forward and
backward of its own sequences. The parameters start held by every rank; a weight's
gradient sums the contributions of every rank's sequences (accumulations reduced on the
gradient's owner), and the optimizer step of each parameter tile runs on the owner of its
gradient tile, which owns the updated parameter from then on (sharded by owner, as ZeRO-3 /
FSDP; its readers get it once per step, cached until the next update). The losses are the
single-process losses up to float32 reduction order.

Checkpoints stay one HDF5 file: the tiles travel to rank 0, the one writer, which writes
them tile by tile; the other ranks wait for it to finish. ``--resume`` reads the file on
every rank, so a run resumes on any number of ranks.
"""

from __future__ import annotations

import numtile as nt
from numtile.io import save_checkpoint
from numtile.runtime.distributed.sequence import check_timeout
from numtile.tiletensor import placement

WRITER = 0  # the rank that writes checkpoints


def data_parallel(model) -> None:
    """Make ``model``'s forward passes place batch tile ``b`` on rank ``b % nranks``."""
    forward = model.forward
    batches = nt.distribution.by_axis(0)

    def distributed_forward(*args, **kwargs):
        with placement.placing(batches):
            return forward(*args, **kwargs)

    model.forward = distributed_forward


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


__all__ = ["WRITER", "data_parallel", "save_distributed_checkpoint"]
