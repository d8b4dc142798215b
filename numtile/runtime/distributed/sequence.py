"""The running checksum of the submission sequence, compared between ranks at each wait.

Every rank must submit the same tasks in the same order (a program that branches on its
rank where it must not breaks that, and its transfers would then wait for each other
forever). Each submission adds a CRC-32 of the task's codelet, access modes and tile shapes
to a running checksum; at each wait every rank sends ``(tasks, checksum)`` to every other
one, through the MPI worker, before waiting for any task. When they differ, the ranks swap
the task descriptions since the last wait that agreed and each raises
``SubmissionMismatchError`` naming the first task that differs, its own and the other
rank's. A rank that does not reach the wait within ``NUMTILE_MPI_CHECK_TIMEOUT`` seconds
(default 300) is reported too, instead of hanging.
"""

from __future__ import annotations

import os
import zlib

_MODES = "?RWXA"  # by Access value: R, W, RW (X), ACCUMULATE (A)
MAX_KEPT = 200_000  # task descriptions kept between two waits (for the report only)


class SubmissionMismatchError(RuntimeError):
    """Ranks submitted different task sequences (the program branched on its rank)."""


def check_timeout() -> float:
    return float(os.environ.get("NUMTILE_MPI_CHECK_TIMEOUT", "300"))


class SubmissionLog:
    """The tasks of the program so far: count, running CRC-32, descriptions since the last
    agreed check."""

    def __init__(self) -> None:
        self.count = 0
        self.crc = 0
        self.agreed = 0  # tasks covered by the last check that agreed
        self.recent: list[str] = []  # descriptions of tasks agreed + 1, agreed + 2, ...

    def record(self, codelet, accesses) -> None:
        key = codelet.name + "".join(f" {_MODES[m]}{h.shape}" for h, m in accesses)
        self.count += 1
        self.crc = zlib.crc32(key.encode(), self.crc)
        if len(self.recent) < MAX_KEPT:
            self.recent.append(key)

    def state(self) -> tuple[int, int]:
        return self.count, self.crc

    def agree(self) -> None:
        self.agreed = self.count
        self.recent = []

    def report(self, rank: int, peers: dict[int, list[str]]) -> SubmissionMismatchError:
        """The error naming the first task where this rank's sequence and each peer's part."""
        lines = []
        for peer, theirs in sorted(peers.items()):
            mine = self.recent
            first = next(
                (i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b),
                min(len(mine), len(theirs)),
            )
            number = self.agreed + first + 1
            here = mine[first] if first < len(mine) else "(no task: this rank waited)"
            there = theirs[first] if first < len(theirs) else "(no task: that rank waited)"
            if first >= MAX_KEPT:
                here = there = f"(beyond the {MAX_KEPT} tasks kept between two waits)"
            lines.append(
                f"task #{number} of the program is {here!r} on rank {rank} but {there!r} "
                f"on rank {peer}"
            )
        return SubmissionMismatchError(
            f"ranks submitted different task sequences (a program must not branch on its "
            f"rank when it submits tasks): {'; '.join(lines)}"
        )
