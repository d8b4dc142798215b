"""Kinds of worker: what the runtime needs to know to start and feed the workers of one kind.

The runtime knows no backend by name. It is handed a table ``{kind: WorkerKind}`` when it
starts (``numtile.backends.BACKENDS`` unless told otherwise, registered here by
``numtile.backends`` when ``numtile`` is imported) and starts, for each row, the workers the
configuration asks for. A codelet's ``kernel(ops, *tiles, *args)`` receives the row's ops
namespace for the worker running it.

A row whose ``start_node`` is None computes in host RAM: its workers run tasks one after the
other on host buffers. Otherwise ``start_node(index, config)`` returns the memory node of
the kind's ``index``-th worker (a GPU, one day a remote rank), and that node's
``run_worker(runtime, worker)`` is the worker's loop; the runtime gives each such node its
memory node id (``node.id``: 1, 2, ... in start order; 0 is host RAM). Exactly one row is the
``host`` kind: its workers run the runtime's own bookkeeping tasks (``invalidate``,
``wont_use``).

A device node (``runtime/cuda.py``'s ``CudaNode`` is the model) has ``id``, ``name`` and
``capacity`` (bytes, or None for no limit), and what the memory manager calls to move tiles:
``allocate(shape, dtype)``, ``upload(host, device, sync)``, ``download(device, host)`` and
``pinned_array(shape, dtype)`` (host memory it copies into fastest).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from numtile.config import Config


@dataclass(frozen=True)
class WorkerKind:
    """One row of the backends table.

    ``ops(node)`` is the namespace a codelet's kernel receives on a worker of this kind
    (``node`` is the worker's memory node, None for host RAM); ``workers(config, required)``
    how many workers to start (``required``: ``restrict`` names this kind, so none is an
    error the row explains); ``start_node`` as described in the module docstring.
    ``generic``: workers of this kind run a codelet's ``kernel`` (written once for every
    kind); a kind that is not (the MPI node's) runs only codelets naming it.

    >>> import types
    >>> row = WorkerKind(ops=lambda node: types.SimpleNamespace(), workers=lambda c, r: 1)
    >>> row.start_node is None and not row.host
    True
    """

    ops: Callable[[Any], Any]
    workers: Callable[[Config, bool], int]
    start_node: Callable[[int, Config], Any] | None = None
    host: bool = False
    generic: bool = True


Backends = Mapping[str, WorkerKind]

_default: Backends | None = None


def register_default_backends(backends: Backends) -> None:
    """Make ``backends`` the table that runtimes started without one use."""
    global _default
    _default = backends


def default_backends() -> Backends:
    """The registered default table (``numtile.backends.BACKENDS`` once numtile is imported)."""
    if _default is None:
        raise RuntimeError(
            "no backends table is registered: import numtile (which registers "
            "numtile.backends.BACKENDS) or pass backends= to Runtime"
        )
    return _default


def host_kind(backends: Backends) -> str:
    """The one kind marked ``host`` in ``backends``."""
    hosts = [kind for kind, row in backends.items() if row.host]
    if len(hosts) != 1:
        raise ValueError(
            f"a backends table needs exactly one host kind (it runs the runtime's own tasks), "
            f"got {hosts or 'none'} among {sorted(backends)}"
        )
    return hosts[0]
