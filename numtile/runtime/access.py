"""How a task touches a data handle."""

from __future__ import annotations

import enum


class Access(enum.IntEnum):
    """Access mode of a task on a handle.

    ``R`` reads, ``W`` overwrites (old contents are not needed), ``RW`` reads then writes,
    ``ACCUMULATE`` is a commutative read-modify-write (for example ``grad += partial``):
    accumulating tasks on one handle run one at a time but in any order.

    >>> Access.RW.reads, Access.W.reads, Access.ACCUMULATE.writes
    (True, False, True)
    """

    R = 1
    W = 2
    RW = 3
    ACCUMULATE = 4

    @property
    def reads(self) -> bool:
        return READS[self]

    @property
    def writes(self) -> bool:
        return WRITES[self]


# indexed by mode (a plain tuple index: Enum hashing is too slow for the per-task path)
READS = (False, True, False, True, True)
WRITES = (False, False, True, True, True)
