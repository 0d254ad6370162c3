"""What `nccl-bench replay` shows: the job's communication profile as a table (the costliest first), the
notes on it, and after a replay one sentence per collective putting the job's time beside the time
alone here, and beside a sweep's busbw when one is given.

Functions return lines; cli/replay.py prints them through render/live.py (control characters in
file names escaped). Names in the table are the trace vocabulary's own (ops, dtypes, NCCL's
algorithms and protocols), never text copied from the trace.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable, Sequence

from rich.text import Text

from nccl_bench.ranks.split import brief_ranks_text
from nccl_bench.render.escape import one_line
from nccl_bench.render.fit import Column, fit
from nccl_bench.render.tables import call_bound_note, no_bandwidth_warnings
from nccl_bench.replay.exposure import WindowProjection
from nccl_bench.replay.profile import Profile, ProfileRow, envelope_row
from nccl_bench.replay.replay_config import ALONE_CUDA_GRAPH, ALONE_LAUNCH_PATH
from nccl_bench.results.schema import ResultRow
from nccl_bench.sweep.rows import CALL_BOUND_FACTOR, FLAG_CALL_BOUND
from nccl_bench.sweep.sweep_config import option_name
from nccl_bench.units.sizes import decimal_size

_COLUMNS = (
    Column("op", align="left"),
    Column("size", align="right"),
    Column("dtype", align="left", priority=3),
    Column("ranks", align="right"),
    Column("group", align="left", priority=3),
    Column("calls", align="right"),
    Column("total", "(ms)"),
    Column("per call", "(us)"),
    Column("busbw", "(GB/s)", priority=1),
    Column("algo", align="left", priority=4),
    Column("proto", align="left", priority=4),
    Column("window", "(%)", priority=2),
)
_REPLAY_COLUMNS = (
    Column("alone here", "(us)"),
    Column("busbw here", "(GB/s)", priority=1),
    Column("alone/job", "(%)"),
)
# with --cuda-graph, where "alone here" is kernel time: the same collective through torch's launch path
_LAUNCH_PATH = Column("launch path", "(us)", priority=1)
_FLAGS = Column("flags", align="left", priority=1)  # the replayed rows' flags, as a sweep's table shows them
# each row's kernels beside compute (replay/exposure.py): with a trace that times kernels
_OVERLAP_COLUMNS = (
    Column("comm", "(ms)", priority=2),
    Column("overlapped", "(ms)", priority=2),
    Column("exposed", "(ms)", priority=1),
    Column("overlap", "(%)", priority=1),
)
_EXPOSED_HERE = Column("exposed here", "(ms)", priority=1)  # at the replayed speed
_EXPOSED_SWEPT = Column("exposed swept", "(ms)", priority=1)  # at the speed the --envelope sweep's busbw means


def profile_lines(profile: Profile, paths: Sequence[Path], width: int | None) -> list[Text | str]:
    """The header, the table (with the replayed columns once replayed) and the notes."""
    replayed = any(row.replay_time_us is not None for row in profile.rows)
    flagged = any(row.replay_flags for row in profile.rows)
    launch_path = any(row.replay_launch_path_us is not None for row in profile.rows)
    extra = _overlap_columns(profile)
    columns = (_COLUMNS + (_REPLAY_COLUMNS if replayed else ()) + ((_LAUNCH_PATH,) if launch_path else ())
               + ((_FLAGS,) if flagged else ()) + tuple(column for column, _ in extra))
    cells = [_cells(row, replayed) + ([_number(row.replay_launch_path_us, 1)] if launch_path else [])
             + ([", ".join(row.replay_flags) or "-"] if flagged else [])
             + [cell(row) for _, cell in extra] for row in profile.rows]
    layout = fit(columns, cells, width)
    lines: list[Text | str] = [*_header(profile, paths), *layout.header_lines()]
    for row_cells in cells:
        lines += layout.row_lines(row_cells)
    if layout.left_out:
        lines.append(f"# left out for the width: {', '.join(layout.left_out)}")
    return lines + [f"note: {note}" for note in profile_notes(profile)]


def profile_notes(profile: Profile) -> list[str]:
    """Rows whose count differs between ranks' traces (the count shown is the most any rank made); replayed
    rows at the per-call floor, and replayed rows given no bandwidth (one rank in place, an empty CUDA graph),
    in the sweep's words."""
    notes = []
    for mismatch in profile.count_mismatches:
        op, size_bytes, _, group_size, group_ranks = mismatch.key
        group = f"ranks {brief_ranks_text(group_ranks)}" if group_ranks else f"{group_size} ranks"
        counts = ", ".join(f"rank {'?' if rank is None else rank}: {count}" for rank, count in mismatch.counts)
        notes.append(f"{op} {_size(size_bytes)} on {group} was called a different number of times by "
                     f"the ranks read ({counts}): a shorter traced window, or another sub-group")
    bound = [row for row in profile.rows if FLAG_CALL_BOUND in row.replay_flags]
    if bound and profile.alone_here == ALONE_CUDA_GRAPH:  # kernel time already: NCCL's latency, not the launch
        notes.append(f"{len(bound)} row(s) are call_bound: in CUDA graphs their median call is within "
                     f"{CALL_BOUND_FACTOR}x of the same op's smallest message, so they measure NCCL's latency, "
                     "not bandwidth")
    elif bound:
        notes.append(call_bound_note(len(bound), f"replay with {option_name('cuda_graph')} N"))
    return notes + no_bandwidth_warnings([";".join(row.replay_flags) for row in profile.rows])


def replay_lines(profile: Profile) -> list[str]:
    """One sentence per replayed collective, the costliest first: its time in the job beside its time alone."""
    return [_replay_sentence(row, _head(row, profile)) for row in profile.rows if row.replay_time_us is not None]


def envelope_lines(profile: Profile, sweep_rows: Sequence[ResultRow] | None, option: str) -> list[str]:
    """Each collective beside the sweep's busbw at its size; one line saying how when no sweep was given."""
    if sweep_rows is None:
        return [f"no sweep envelope given ({option} RUN puts each collective beside a sweep of this fabric)"]
    lines = []
    for row in profile.rows:
        if row.size_bytes is None or (row.job_busbw_gbps is None and row.replay_busbw_gbps is None):
            continue
        swept = envelope_row(row, sweep_rows)
        head = _head(row, profile)
        if swept is None:
            lines.append(f"{head}: the sweep has no {row.op} of {row.dtype} on {row.group_size} ranks")
            continue
        reached = [f"{what} {busbw:.3g} GB/s ({busbw / swept.busbw_gbps:.0%})"
                   for what, busbw in (("in the job", row.job_busbw_gbps), ("alone here", row.replay_busbw_gbps))
                   if busbw is not None and swept.busbw_gbps > 0]
        lines.append(f"{head}: the sweep measured {swept.busbw_gbps:.3g} GB/s busbw at {_size(swept.size_bytes)}; "
                     + ", ".join(reached))
    return lines


def _head(row: ProfileRow, profile: Profile) -> str:
    """The op and size, and the group's ranks where it is a sub-group the trace names (groups of one
    size are rows apart)."""
    head = f"{row.op} {_size(row.size_bytes)}"
    if row.group_ranks and len(row.group_ranks) != profile.world_size:
        head += f" on ranks {row.group_text}"
    return head


def _replay_sentence(row: ProfileRow, head: str) -> str:
    head = f"{head}, {row.count} call{'s' if row.count != 1 else ''}"
    alone = f"{duration(row.replay_time_us)} alone here"
    if row.job_time_us is None:
        return f"{head}: no time in the trace; {alone}"
    lost = row.job_time_us - row.replay_time_us
    said = f"{head}: {duration(row.job_time_us)} in the job, {alone} ({row.efficiency:.0%})"
    if lost >= 0:
        return f"{said}: the job loses {duration(lost)} per call to overlap or placement"
    return f"{said}: the job ran it {duration(-lost)} per call faster than this launch does alone"


def duration(time_us: float) -> str:
    """A time as people read it: '850 us', '2.1 ms', '1.25 s' (three significant digits)."""
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3g} s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3g} ms"
    return f"{time_us:.3g} us"


def _header(profile: Profile, paths: Sequence[Path]) -> list[str]:
    ranks = ", ".join("?" if rank is None else str(rank) for rank in profile.ranks_read)
    facts = [f"backend {profile.backend or 'unknown'}", f"{profile.world_size or '?'} ranks"]
    if profile.nccl_version:
        facts.append(f"NCCL {profile.nccl_version}")
    lines = [f"# communication profile of {len(paths)} trace(s) ({', '.join(map(str, paths))}): "
             f"{', '.join(facts)}; rank(s) read: {ranks}"]
    if profile.window_us:
        share = "" if profile.collective_share is None else (
            f"; collectives took {profile.collective_share:.1%} of it" + (
                " (above 100%: they overlap)" if profile.collective_share > 1 else ""))
        lines.append(f"# traced window {duration(profile.window_us)}{share}; the costliest first")
    lines += _window_overlap(profile) + _window_projection(profile) + _alone_here(profile)
    return [one_line(line) for line in lines]


def _alone_here(profile: Profile) -> list[str]:
    """Once replayed: what the "alone here" column times, beside what the trace's job times are."""
    if profile.alone_here == ALONE_CUDA_GRAPH:
        lines = [f"# alone here: kernel time, {profile.replay_cuda_graph} calls captured in a CUDA graph and its "
                 "replays timed with CUDA events: on NCCL comparable with the trace's kernel durations"]
        if any(row.replay_launch_path_us is not None for row in profile.rows):
            lines.append("# launch path: the same collective call by call through torch's launch path, timed in a "
                         f"loop (as a replay without {option_name('cuda_graph')}): kernel time and what each call "
                         "costs to launch")
        return lines
    if profile.alone_here == ALONE_LAUNCH_PATH:
        return ["# alone here: each call through torch's launch path, timed in a loop: on NCCL it holds the launch "
                "cost (tens of us) that the trace's kernel durations do not; replay with "
                f"{option_name('cuda_graph')} N for kernel time"]
    return []


def _window_overlap(profile: Profile) -> list[str]:
    """The traced window's communication beside compute (HTA's figure), of the most exposed rank read."""
    found = [(overlap.exposed_us, index) for index, overlap in enumerate(profile.overlaps) if overlap is not None]
    if not found:
        return []
    _, index = max(found, key=lambda pair: (pair[0], -pair[1]))
    overlap, rank = profile.overlaps[index], profile.ranks_read[index]
    which = f"rank {'?' if rank is None else rank}" + (", the most exposed of the ranks read" if len(found) > 1 else "")
    return [f"# communication beside compute over the traced window ({which}): {duration(overlap.communication_us)} "
            f"of NCCL kernels, {duration(overlap.overlapped_us)} overlapped by compute ({overlap.overlap_pct:.1f}%), "
            f"{duration(overlap.exposed_us)} exposed"]


def _window_projection(profile: Profile) -> list[str]:
    """The rows' exposed time at the replayed speed and at the sweep's busbw, each row's own projection summed
    (replay/exposure.window_projection), beside the same rows' exposed time in the job."""
    parts = [_projected(projection, where) for projection, where in (
        (profile.exposed_at_replay, "at the replayed speed"), (profile.exposed_at_envelope, "at the sweep's busbw"))
        if projection is not None]
    if not parts:
        return []
    job_us = (profile.exposed_at_replay or profile.exposed_at_envelope).job_us
    return [f"# exposed at other speeds, each collective's projection summed (each call keeps the share compute hid; "
            f"a row without one at its job value): the rows' {duration(job_us)} exposed in the job would be "
            + ", ".join(parts)]


def _projected(projection: WindowProjection, where: str) -> str:
    return (f"{duration(projection.projected_us)} {where} ({projection.projected_rows} of {projection.rows} "
            f"row{'s' if projection.rows != 1 else ''} projected)")


def _overlap_columns(profile: Profile) -> list[tuple[Column, Callable[[ProfileRow], str]]]:
    """The overlap columns a profile has figures for, each with its cell."""
    rows = profile.rows
    if not any(row.overlap is not None for row in rows):
        return []
    columns = [(column, functools.partial(_overlap_cell, key)) for column, key in zip(
        _OVERLAP_COLUMNS, ("communication_us", "overlapped_us", "exposed_us", "overlap_pct"), strict=True)]
    if any(row.exposed_at_replay_us is not None for row in rows):
        columns.append((_EXPOSED_HERE, lambda row: _ms(row.exposed_at_replay_us)))
    if any(row.exposed_at_envelope_us is not None for row in rows):
        columns.append((_EXPOSED_SWEPT, lambda row: _ms(row.exposed_at_envelope_us)))
    return columns


def _overlap_cell(key: str, row: ProfileRow) -> str:
    if row.overlap is None:
        return "-"
    value = getattr(row.overlap, key)
    return _number(value, 1) if key == "overlap_pct" else _ms(value)


def _ms(time_us: float | None) -> str:
    return _number(None if time_us is None else time_us / 1e3, 3)


def _cells(row: ProfileRow, replayed: bool) -> list[str]:
    cells = [
        row.op, _size(row.size_bytes), row.dtype or "-", str(row.group_size or "-"), row.group_text, str(row.count),
        _number(None if row.total_time_us is None else row.total_time_us / 1e3, 3),
        _number(row.job_time_us, 1), _number(row.job_busbw_gbps, 2), row.algo or "-", row.proto or "-",
        _number(None if row.share_of_window is None else 100 * row.share_of_window, 2),
    ]
    if replayed:
        cells += [_number(row.replay_time_us, 1), _number(row.replay_busbw_gbps, 2),
                  _number(None if row.efficiency is None else 100 * row.efficiency, 0)]
    return cells


def _size(size_bytes: int | None) -> str:
    return "?" if size_bytes is None else decimal_size(size_bytes)


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"
