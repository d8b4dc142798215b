"""Many processes, one task flow (StarPU-MPI's model): ranks, and the MPI node.

Under ``mpiexec -n P`` (P > 1; or ``numtile.init(distributed=True)``) every rank runs the
same program and submits the same tasks. The backends table's ``mpi`` row starts one
``MpiNode`` (``runtime/distributed/node.py``): its worker posts the non-blocking sends and
receives that move tiles between ranks, and it puts a ``Distributed`` front
(``runtime/distributed/front.py``) before ``Runtime.submit`` that decides, from each tile's
owner, which rank runs a task and which tiles travel. Nothing here imports mpi4py unless a
distributed runtime starts.
"""

from __future__ import annotations

import contextlib
import operator
import os

# variables the launchers set: MPICH/Hydra (and Intel MPI), Open MPI, Slurm's srun
_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "SLURM_NTASKS")


def launched_by_mpi() -> bool:
    """True when this process is one of several that an MPI launcher started.

    >>> import os
    >>> launched_by_mpi() == any(int(os.environ.get(v, "1")) > 1 for v in _SIZE_VARIABLES)
    True
    """
    for variable in _SIZE_VARIABLES:
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > 1:
            return True
    return False


def rank() -> int:
    """This process's rank (0 when not distributed).

    >>> import numtile as nt
    >>> nt.rank() in range(nt.nranks())
    True
    """
    from numtile.runtime.session import get_runtime

    front = get_runtime().distributed
    return 0 if front is None else front.rank


def nranks() -> int:
    """How many ranks run this program (1 when not distributed).

    >>> import numtile as nt
    >>> nt.nranks() >= 1
    True
    """
    from numtile.runtime.session import get_runtime

    front = get_runtime().distributed
    return 1 if front is None else front.nranks


def gather_on(runtime, handles, root: int) -> bool:
    """Wait for ``handles`` on rank ``root`` only, the others sending it the tiles they hold
    (every rank calls it): True on ``root``. ``ValueError`` for a rank that does not run.

    >>> from numtile.runtime.session import get_runtime
    >>> gather_on(get_runtime(), [], 0)
    True
    """
    front = runtime.distributed
    count = 1 if front is None else front.nranks
    try:
        rank = operator.index(root)
    except TypeError:
        rank = -1
    if isinstance(root, bool) or not 0 <= rank < count:
        raise ValueError(f"root must be a rank in 0 .. {count - 1}, got {root!r}")
    if front is None:
        runtime.wait_handles(handles)
        return True
    return front.gather(handles, rank)


@contextlib.contextmanager
def one_writer(runtime, handles, root: int = 0):
    """Every rank enters the block with the tiles it writes to a file: they travel to rank
    ``root``, which alone runs the block (its waits its own) and gets True; the others get
    False and leave once ``root`` has, so no rank reads the file before it is complete and
    only one process writes it. If the block raises on ``root``, the others raise
    ``RuntimeError`` with its text. Without MPI: a plain block, True.

    >>> from numtile.runtime.session import get_runtime
    >>> with one_writer(get_runtime(), []) as writing:
    ...     writing
    True
    """
    front = runtime.distributed
    if front is None:
        yield True
        return
    from numtile.runtime.distributed.sequence import check_timeout

    front.send_to(list(handles), (root,))
    if front.rank != root:
        try:
            yield False
        finally:
            failure = front.node.exchange(None, check_timeout())[root]
        if failure is not None:
            raise RuntimeError(f"rank {root} failed to write: {failure}")
        return
    failure = None
    try:
        with front.local_waits():  # the tiles come to this rank only: no wait is collective
            yield True
    except BaseException as error:
        failure = f"{type(error).__name__}: {error}"
        raise
    finally:  # the others wait for the file (and do not run ahead while it is written)
        front.node.exchange(failure, check_timeout())


__all__ = ["gather_on", "launched_by_mpi", "nranks", "one_writer", "rank"]
