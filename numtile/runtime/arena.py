"""A limited host's tile buffers cut from one mapping, so freed memory serves tiles of any size.

Under ``NUMTILE_HOST_MEM_LIMIT`` every tile of ``MMAP_THRESHOLD`` bytes or more used to be a
mapping of its own, and the pool kept freed ones for later tiles of the same byte size only.
A training step frees and asks for other sizes at each phase (bfloat16 activations in the
forward, float32 gradients in the backward, the moments' reads), and at the limit the pool
gave back buffers of one size to make room for another: gpt2-small in bf16-mixed under a
limit it never reached mapped 1,680 fresh buffers (1.26 GB) a step, 0.6 GB of page faults.

``HostArena`` reserves the address space of twice the limit once (``MAP_NORESERVE``: nothing
is resident until touched), its 2 MiB chunks marked for transparent huge pages. A tile takes
the smallest free range that holds it (page aligned; ranges coalesce when freed), preferring
one whose chunks are resident already, so the memory of a freed tile is used again, without
page faults, by the next tile of any size. Its accounting, in 4 KiB pages: ``touched`` pages
may be resident (a range's first touch counts the whole 2 MiB chunks around it, as a huge
page faults in whole); their bytes not held by a tile are ``pooled`` (counted against the
limit like tiles, as the pool's buffers were), and ``release`` gives the pages of a free
range back (``MADV_DONTNEED``) when the memory manager needs the room. A tile's buffer
returns to the arena when the manager drops it (``free``) or, if something else still views
it then (``disown``: counted as pooled meanwhile), when that view dies (a weak reference's
callback queues the range, freed at the next call). A training step asks for the same sizes
over and over, so a buffer the manager drops whole is kept as it is, by byte size (``keep``),
and the next tile of that size takes it back (``reuse``) without searching or cutting ranges;
these kept buffers count as pooled. A tile of a size none is kept of, where no free range
holds it in resident pages, is cut from the start of the smallest kept buffer that holds it
(the rest left a free range); where none does, kept buffers go back to the free ranges one
at a time, the largest first, until merged ranges hold it, as they do before ``release``
gives pages back. Each free range's touched pages are counted as ranges are cut, merged and touched
(``dirty``), so ``release`` finds the one with the most without counting them. Limits under
256 MiB (``memory.ARENA_MIN``) keep the pool of same-size buffers: there the 2 MiB chunk a
small tile leaves partly used would be a large share of the limit.
"""

from __future__ import annotations

import bisect
import collections
import mmap
import platform
import weakref

import numpy as np

from numtile.runtime.host_malloc import HUGE_PAGE, TileMapping

CHUNK = HUGE_PAGE
PAGE = 4096
# Linux's mman-common.h (not in Python's mmap module; other systems number it otherwise)
_MAP_NORESERVE = 0x4000 if platform.system() == "Linux" else 0
_UINT8 = np.dtype(np.uint8)
_SEARCH = 32  # free ranges looked at for resident pages before taking fresh ones


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def _owner(array: np.ndarray) -> np.ndarray:
    """The array ``allocate`` made that ``array`` is or views (NumPy makes a view's ``base``
    the array that the viewed one views, if any)."""
    return array.base if type(array.base) is np.ndarray else array


def _length(nbytes: int) -> int:
    """The whole pages a buffer of ``nbytes`` takes (one for an empty one)."""
    return -(-nbytes // PAGE) * PAGE or PAGE  # _round_up's, inline: called on every reuse


class HostArena:
    """Free ranges of one reserved mapping, handed out as uint8 arrays (module notes).

    >>> arena = HostArena(8 << 20)
    >>> a = arena.allocate(3 << 20); b = arena.allocate(1 << 20)
    >>> arena.used, arena.touched_bytes
    (4194304, 4194304)
    >>> arena.free(a); c = arena.allocate(2 << 20)  # in a's resident pages, no fault
    >>> c.ctypes.data == a.ctypes.data, arena.pooled
    (True, 1048576)
    """

    def __init__(self, capacity: int) -> None:
        self.size = _round_up(2 * capacity, CHUNK)
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE
        self.mapping = TileMapping(-1, self.size + CHUNK, flags=flags)
        address = np.frombuffer(self.mapping, np.uint8, count=1).ctypes.data
        self.origin = -address % CHUNK  # offset 0 of the arena: a chunk boundary
        self.base = address + self.origin
        if hasattr(mmap, "MADV_HUGEPAGE"):
            self.mapping.madvise(mmap.MADV_HUGEPAGE, self.origin, self.size)
        self.starts = [0]  # sorted starts of the free ranges
        self.lengths = {0: self.size}  # free range start -> length
        self.ends = {self.size: 0}  # free range end -> start
        self.by_size = [(self.size, 0)]  # sorted (length, start) of the free ranges
        # free range start -> its touched pages, for the ranges with any (kept exact: a count
        # of every range at each ``release`` cost llama-mini ~137 us a call)
        self.dirty: dict[int, int] = {}
        self.touched = bytearray(self.size // PAGE)  # 1: the page may be resident
        self.touched_bytes = 0
        self.used = 0
        # start -> (length, a weak reference to its array, that array's id)
        self.live: dict[int, tuple[int, weakref.ref, int]] = {}
        # id of an array ``allocate`` gave -> its start (an array that views one has it as its
        # ``base``): ``.ctypes.data`` runs NumPy's Python code, ~12 us with the caches cold,
        # as a kernel leaves them
        self.starts_by_id: dict[int, int] = {}
        self.orphans: collections.deque = collections.deque()  # (start, length) to free
        self.disowned: set[int] = set()  # starts of ranges dropped while still viewed
        self.kept: dict[int, list[np.ndarray]] = {}  # nbytes -> whole arrays dropped (keep)
        self.kept_sizes: list[int] = []  # sorted keys of ``kept``

    @property
    def pooled(self) -> int:
        """Resident bytes no tile holds."""
        return self.touched_bytes - self.used

    def owns(self, array: np.ndarray) -> bool:
        """Whether ``array`` is (a view of the whole of) an array ``allocate`` gave."""
        start = array.ctypes.data - self.base
        return 0 <= start < self.size and start in self.live

    # -- handing out ------------------------------------------------------------------------

    def _resident(self, start: int, length: int) -> bool:
        return self.touched.find(0, start // PAGE, (start + length) // PAGE) < 0

    def _place(self, length: int, resident: bool) -> int | None:
        """Where a range of ``length`` goes: in the smallest free range that holds it (with
        ``resident``, the smallest of the first ``_SEARCH`` that hold it in resident pages,
        at either end)."""
        index = bisect.bisect_left(self.by_size, (length, -1))
        if not resident:
            return self.by_size[index][1] if index < len(self.by_size) else None
        dirty, pages = self.dirty, length // PAGE
        for size, start in self.by_size[index : index + _SEARCH]:
            touched = dirty.get(start, 0)
            if touched < pages:  # fewer of its pages touched (since released) than it needs
                continue
            if touched == size // PAGE or self._resident(start, length):
                return start
            if self._resident(start + size - length, length):
                return start + size - length
        return None

    def fits(self, nbytes: int) -> bool:
        """Whether a kept buffer or a free range holds ``nbytes`` in resident chunks."""
        if nbytes in self.kept:
            return True
        self.collect()
        length = _length(nbytes)
        if self._best_kept(length) is not None or self._place(length, True) is not None:
            return True
        return self._place_resident(length) is not None

    def _best_kept(self, length: int) -> int | None:
        """The byte size of the smallest kept buffer of ``length`` or more, or None."""
        sizes = self.kept_sizes
        index = bisect.bisect_left(sizes, length - PAGE + 1)  # _length(n) >= length from here
        return sizes[index] if index < len(sizes) else None

    def _place_resident(self, length: int) -> int | None:
        """``_place`` in resident pages, else at the start of the smallest kept buffer that
        holds ``length`` (returned to the free ranges, the rest of it left there), else
        returning kept buffers (the largest first) until ranges merged of them hold it."""
        start = self._place(length, True)
        if start is not None:
            return start
        best = self._best_kept(length)
        if best is not None:
            return self._return_kept(best)
        while start is None:
            returned = self._return_one()
            if returned is None:
                return None
            merged = self.starts[bisect.bisect_right(self.starts, returned) - 1]
            if self.lengths[merged] >= length:  # else no range of ``length`` or more changed
                start = self._place(length, True)
        return start

    def plan(self, nbytes: int) -> tuple[int, int] | None:
        """Where ``allocate(nbytes)`` would put the range and how many bytes it would make
        resident (0 in resident pages), or None where no free range holds it."""
        self.collect()
        length = _length(nbytes)
        start = self._place_resident(length)  # kept buffers of other sizes: resident pages
        if start is not None:
            return start, 0
        start = self._place(length, False)
        if start is None:
            return None
        return start, self._growth(start, length)

    def _growth(self, start: int, length: int) -> int:
        """The bytes using [start, start + length) makes resident: none in resident pages,
        else every untouched page of the 2 MiB chunks around it (a first touch faults a
        whole huge page)."""
        if self._resident(start, length):
            return 0
        first, last = self._chunk_pages(start, length)
        return self.touched.count(0, first, last) * PAGE

    @staticmethod
    def _chunk_pages(start: int, length: int) -> tuple[int, int]:
        """The pages of the 2 MiB chunks around [start, start + length)."""
        per_chunk = CHUNK // PAGE
        return start // CHUNK * per_chunk, -(-(start + length) // CHUNK) * per_chunk

    def allocate(
        self, nbytes: int, plan: tuple[int, int] | None = None, dtype: np.dtype = _UINT8
    ) -> np.ndarray | None:
        """A 1-d array of ``nbytes`` (of ``dtype``, whose items they must hold whole) from
        the arena, where ``plan`` (``plan(nbytes)``'s answer, nothing changed since) or else
        ``plan`` puts it; None where no free range holds it."""
        if plan is None:
            plan = self.plan(nbytes)
            if plan is None:
                return None
        start, grows = plan
        length = _length(nbytes)
        self._take(start, length)
        if grows:
            first, last = self._chunk_pages(start, length)
            # the chunks may reach into free ranges around it: count their pages touched now
            index = max(bisect.bisect_right(self.starts, first * PAGE) - 1, 0)
            while index < len(self.starts) and self.starts[index] < last * PAGE:
                other = self.starts[index]
                low = max(other // PAGE, first)
                high = min((other + self.lengths[other]) // PAGE, last)
                if high > low:
                    fresh = self.touched.count(0, low, high)
                    if fresh:
                        self.dirty[other] = self.dirty.get(other, 0) + fresh
                index += 1
            self.touched[first:last] = b"\x01" * (last - first)
            self.touched_bytes += grows
        self.used += length
        count = nbytes // dtype.itemsize  # of its dtype: no view made to retype it
        array = np.frombuffer(self.mapping, dtype, count=count, offset=self.origin + start)
        # a weak reference's callback, not weakref.finalize (a Python class: 5 us an array
        # made and freed); dropped from ``live`` by ``_free``, it calls back no more
        orphan, span = self.orphans.append, (start, length)
        self.live[start] = (length, weakref.ref(array, lambda _: orphan(span)), id(array))
        self.starts_by_id[id(array)] = start
        return array

    def _take(self, start: int, length: int) -> None:
        """Cut [start, start + length) out of the free range that holds it."""
        owner = self.starts[bisect.bisect_right(self.starts, start) - 1]
        touched = self.dirty.get(owner, 0)
        size = self._remove(owner)
        before, after = start - owner, owner + size - start - length
        if not touched or touched == size // PAGE:  # none or all touched: so are the pieces
            low, high = (before // PAGE, after // PAGE) if touched else (0, 0)
        else:  # count the smaller piece and the tile's pages; the other piece is the rest
            taken = self.touched.count(1, start // PAGE, (start + length) // PAGE)
            if before <= after:
                low = self.touched.count(1, owner // PAGE, start // PAGE)
                high = touched - taken - low
            else:
                high = self.touched.count(1, (start + length) // PAGE, (owner + size) // PAGE)
                low = touched - taken - high
        if before:
            self._add(owner, before, low)
        if after:
            self._add(start + length, after, high)

    def _add(self, start: int, length: int, touched: int) -> None:
        """A free range with ``touched`` pages that may be resident."""
        if touched:
            self.dirty[start] = touched
        bisect.insort(self.starts, start)
        bisect.insort(self.by_size, (length, start))
        self.lengths[start] = length
        self.ends[start + length] = start

    def _remove(self, start: int) -> int:
        """Forget the free range at ``start``; its length (its touched pages: ``dirty``'s)."""
        self.dirty.pop(start, None)
        length = self.lengths.pop(start)
        del self.ends[start + length]
        del self.starts[bisect.bisect_left(self.starts, start)]
        del self.by_size[bisect.bisect_left(self.by_size, (length, start))]
        return length

    def reuse(self, nbytes: int, dtype=np.uint8, shape=None) -> np.ndarray | None:
        """A buffer of exactly ``nbytes`` that ``keep`` holds (resident), viewed as ``dtype``
        and ``shape`` (1-d by default), or None."""
        if nbytes not in self.kept:
            return None
        array = self._unkeep(nbytes)
        shape = (nbytes // np.dtype(dtype).itemsize,) if shape is None else shape
        if array.dtype != dtype or array.shape != shape:  # a tile's of another kind
            array = _owner(array).view(dtype).reshape(shape)
        return array

    # -- taking back ------------------------------------------------------------------------

    def keep(self, array: np.ndarray) -> None:
        """Hold ``array`` (an array ``allocate`` gave, or its only view: a tile's, handed back
        as it is to a tile of the same shape and dtype) for ``reuse`` by a tile of its byte
        size; its pages count as pooled meanwhile."""
        self.used -= _length(array.nbytes)
        arrays = self.kept.get(array.nbytes)
        if arrays is None:
            arrays = self.kept[array.nbytes] = []
            bisect.insort(self.kept_sizes, array.nbytes)
        arrays.append(array)

    def _unkeep(self, nbytes: int) -> np.ndarray:
        """Take a kept buffer of ``nbytes`` out of ``kept`` (used again)."""
        arrays = self.kept[nbytes]
        array = arrays.pop()
        if not arrays:
            del self.kept[nbytes]
            del self.kept_sizes[bisect.bisect_left(self.kept_sizes, nbytes)]
        self.used += _length(nbytes)
        return array

    def _return_kept(self, nbytes: int) -> int:
        """Return a kept buffer of ``nbytes`` to the free ranges; where it started."""
        return self._free_array(self._unkeep(nbytes))

    def _return_one(self, avoid: int | None = None) -> int | None:
        """Return one kept buffer (of the largest size kept, not ``avoid`` bytes if another
        is) to the free ranges; where it started, None when none is kept."""
        sizes = self.kept_sizes
        if not sizes:
            return None
        nbytes = sizes[-2] if sizes[-1] == avoid and len(sizes) > 1 else sizes[-1]
        return self._return_kept(nbytes)

    def holds(self, array: np.ndarray) -> bool:
        """Whether ``array`` is an array ``allocate`` gave (not a view of one): a cheap
        ``owns`` for the manager's recycling."""
        base = array.base
        return type(base) is memoryview and base.obj is self.mapping

    def free(self, array: np.ndarray) -> None:
        """Return the range of ``array`` (an array ``allocate`` gave, or its only view)."""
        self._free_array(array)

    def _free_array(self, array: np.ndarray) -> int:
        """``free``; where the range started."""
        start = self.starts_by_id[id(_owner(array))]
        self._free(start, self.live[start][0])
        return start

    def disown(self, array: np.ndarray) -> None:
        """The tile ``array`` holds is gone but something still views it: its range counts
        as resident and free (``pooled``) until that view dies and the range is freed."""
        start = array.ctypes.data - self.base
        if start in self.live and start not in self.disowned:
            self.disowned.add(start)
            self.used -= self.live[start][0]

    def _free(self, start: int, length: int) -> None:
        key = self.live.pop(start)[2]
        if self.starts_by_id.get(key) == start:  # not an id a newer array took since it died
            del self.starts_by_id[key]
        if start in self.disowned:
            self.disowned.remove(start)
        else:
            self.used -= length
        touched = length // PAGE  # a tile's pages: all touched since it was cut
        before = self.ends.get(start)  # a free range ending where this one starts
        if before is not None:
            touched += self.dirty.get(before, 0)
            length += self._remove(before)
            start = before
        after = start + length  # one starting where this one ends
        if after in self.lengths:
            touched += self.dirty.get(after, 0)
            length += self._remove(after)
        self._add(start, length, touched)

    def collect(self) -> None:
        """Free the ranges whose arrays died outside ``free``."""
        while self.orphans:
            start, length = self.orphans.popleft()
            if self.live.get(start, (None,))[0] == length:
                self._free(start, length)

    def release(self, keep: int | None = None) -> int:
        """Give back the resident pages of one free range (the one with the most), a kept
        buffer returned to the ranges first (not one of ``keep`` bytes if another is kept);
        the bytes released, 0 where no free range has any. Pages inside a huge page split it."""
        self.collect()
        self._return_one(avoid=keep)
        if not self.dirty:
            return 0
        best = max(self.dirty, key=self.dirty.__getitem__)
        most = self.dirty.pop(best)
        length = self.lengths[best]
        self.mapping.madvise(mmap.MADV_DONTNEED, self.origin + best, length)
        self.touched[best // PAGE : (best + length) // PAGE] = bytes(length // PAGE)
        self.touched_bytes -= most * PAGE
        return most * PAGE


def host_arena(capacity: int) -> HostArena | None:
    """An arena for a host limited to ``capacity`` bytes, or None where the system refuses
    the reservation (strict overcommit ignores ``MAP_NORESERVE``): the pool serves then."""
    try:
        return HostArena(capacity)
    except (OSError, ValueError):
        return None
