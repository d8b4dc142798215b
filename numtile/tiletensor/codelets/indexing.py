"""Codelets of indexing: copies between listed positions (gather, scatter, scatter-add),
counting and compacting flagged elements, and the group starts and counts of ``unique``."""

from __future__ import annotations

from numtile.runtime import Codelet


def _take(ops, src, dst, pre, src_n, post, dst_n, src_positions, dst_positions, accumulate):
    ops.take_positions(
        src.reshape(-1),
        dst.reshape(-1),
        pre,
        src_n,
        post,
        dst_n,
        src_positions,
        dst_positions,
        accumulate,
    )


def _count_nonzero(ops, x, out):
    ops.count_nonzero(x.reshape(-1), out.reshape(-1))


def _compact(ops, x, flags, out, skip, dst_begin, count):
    ops.compact(x.reshape(-1), flags.reshape(-1), out.reshape(-1), skip, dst_begin, count)


def _compact_positions(ops, flags, out, skip, dst_begin, count, first):
    ops.compact_positions(flags.reshape(-1), out.reshape(-1), skip, dst_begin, count, first)


def _group_starts(ops, values, previous, flags, first_tile):
    ops.group_starts(values.reshape(-1), previous.reshape(-1), flags.reshape(-1), first_tile)


def _running_count(ops, flags, out, offset):
    ops.running_count(flags.reshape(-1), out.reshape(-1), offset)


take = Codelet("take", kernel=_take)
count_nonzero = Codelet("count_nonzero", kernel=_count_nonzero)
compact = Codelet("compact", kernel=_compact)
compact_positions = Codelet("compact_positions", kernel=_compact_positions)
group_starts = Codelet("group_starts", kernel=_group_starts)
running_count = Codelet("running_count", kernel=_running_count)
