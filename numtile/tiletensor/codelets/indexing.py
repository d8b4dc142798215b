"""Codelets of indexing: copies between listed positions (gather, scatter, scatter-add),
counting and compacting flagged elements, copies of runs, the group starts and counts of
``unique``, and a value assigned through a boolean mask (``where`` writing the target's own
tiles)."""

from __future__ import annotations

from numtile.runtime import Codelet
from numtile.tiletensor.codelets import narrow


def _take(ops, src, dst, pre, src_n, post, dst_n, src_positions, dst_positions, accumulate):
    if accumulate and narrow.is_narrow(dst):  # a bfloat16 scatter-add sums in float32
        _take_wide(ops, src, dst, pre, src_n, post, dst_n, src_positions, dst_positions, True)
        return
    ops.take_positions(
        narrow.bits(src.reshape(-1)),
        narrow.bits(dst.reshape(-1)),
        pre,
        src_n,
        post,
        dst_n,
        src_positions,
        dst_positions,
        accumulate,
    )


_take_wide = narrow.through_float32(updates=(1,))(_take)


@narrow.through_float32()
def _count_nonzero(ops, x, out):
    ops.count_nonzero(x.reshape(-1), out.reshape(-1))


def _compact(ops, x, flags, out, skip, dst_begin, count):
    x, out = narrow.bits(x.reshape(-1)), narrow.bits(out.reshape(-1))
    ops.compact(x, flags.reshape(-1), out, skip, dst_begin, count)


def _compact_positions(ops, flags, out, skip, dst_begin, count, first):
    ops.compact_positions(flags.reshape(-1), out.reshape(-1), skip, dst_begin, count, first)


def _copy_runs(ops, out, *sources_then_runs):
    """out[dst : dst + length] = source[src : src + length] for every run of every source tile
    (the last argument: one (src_starts, dst_starts, lengths) per source)."""
    *sources, runs = sources_then_runs
    flat = narrow.bits(out.reshape(-1))
    for source, (src_starts, dst_starts, lengths) in zip(sources, runs):
        ops.copy_runs(narrow.bits(source.reshape(-1)), flat, src_starts, dst_starts, lengths)


@narrow.through_float32()
def _group_starts(ops, values, previous, flags, first_tile):
    ops.group_starts(values.reshape(-1), previous.reshape(-1), flags.reshape(-1), first_tile)


def _assign_where(ops, condition, value, target, c_strides, value_strides, shape):
    """target = value where condition, else target (``x[mask] = value``, in place); value has
    target's dtype, so 16-bit floats move as their bits (no float32 copies)."""
    condition = condition.reshape(-1)
    value, flat = narrow.bits(value.reshape(-1)), narrow.bits(target.reshape(-1))
    ops.assign_where(condition, c_strides, value, value_strides, flat, shape)


def _running_count(ops, flags, out, offset):
    ops.running_count(flags.reshape(-1), out.reshape(-1), offset)


take = Codelet("take", kernel=_take)
count_nonzero = Codelet("count_nonzero", kernel=_count_nonzero)
compact = Codelet("compact", kernel=_compact)
compact_positions = Codelet("compact_positions", kernel=_compact_positions)
copy_runs = Codelet("copy_runs", kernel=_copy_runs)
group_starts = Codelet("group_starts", kernel=_group_starts)
running_count = Codelet("running_count", kernel=_running_count)
assign_where = Codelet("assign_where", kernel=_assign_where)
