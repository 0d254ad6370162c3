"""nccl-tests text logs read into ResultRows (its `-J` JSON: results/nccltests_json.py).

The text layout is the one nccl-tests' src/util.cu prints (writeResultHeader,
writeBenchmarkLinePreamble/Body, writeResultFooter): per size one line holding the out-of-place
then the in-place half, two header rows (names, then units), an `# Avg bus bandwidth` footer that
is the mean busbw over every half printed. Older nccl-tests releases print fewer leading columns
(no `root`, or no `redop`) and an `error` column instead of `#wrong`; the reader takes the column
names from each table's own header, so all of those read the same way. Writing that layout
lives in render/nccltests_text.py; the rows are assembled as the JSON reader's are
(results/nccltests_rows.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from nccl_bench.errors import UserInputError
from nccl_bench.results.nccltests_names import op_in, op_of_file_name
from nccl_bench.results.nccltests_rows import (
    NCCL_TESTS_AGG,
    NCCL_TESTS_BACKEND,
    TYPE_TO_DTYPE,
    Half,
    SizeLine,
    Table,
    bandwidths,
    ratio_span,
    table_rows,
    world_size_of,
)
from nccl_bench.results.schema import PLACEMENT_IN, PLACEMENT_OUT, ResultRow
from nccl_bench.units import op_table

# nccl_bench's export leaves out the Pid (and the host when the input did not record one).
_RANK_PATTERN = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?(?:on\s+(\S+)\s+)?device")
_ITERS_PATTERN = re.compile(r"(?<!warmup )(?<!agg )iters:\s*(\d+)")
# Lines nccl_bench adds to its nccl-tests export so a round trip keeps backend and aggregation;
# nccl-tests parsers skip them like any other '#' line.
EXPORT_MARK = "nccl_bench export:"
_EXPORT_DEVICE = re.compile(r"nccl_bench (\w+)\s*$")
_EXPORT_AGG = re.compile(re.escape(EXPORT_MARK) + r" ranks' times combined by (\w+)")
_MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
# `srun --label` puts the task number before every line: "0: # nThread ...", " 12:    8388608 ...".
_SRUN_LABEL = re.compile(r"^\s*\d+: ?(?=\s|#|$)")
# Comment lines whose leading '#' was lost (a Markdown paste turns "# ..." into a heading): their
# text alone says what they are.
_BARE_COMMENT = re.compile(
    r"^(?:nThread\b|Using devices|Rank\s+\d+\s|Collective test|Blocking Enabled|out-of-place|"
    r"\(B\)|Out of bounds|Avg bus bandwidth|size\s+count\s|nccl-tests version)"
)
# What a failed run prints (src/common.h: "Test NCCL failure", "Test CUDA failure"; older releases
# "NCCL failure"). NCCL's own warnings explain a run that never printed a row, but a run that did
# may carry harmless ones (a missing libibverbs), so they count only there.
_FAILURE = re.compile(r"(?:Test (?:NCCL|CUDA) failure|NCCL failure|CUDA failure|Segmentation fault)\b.*")
_NCCL_WARNING = re.compile(r"NCCL WARN\b.*")
# The columns of a table whose header rows were cut off: the layout of nccl-tests >= 2.10
# (size count type redop root, then time algbw busbw #wrong per placement).
_CURRENT_PREFIX = ["size", "count", "type", "redop", "root"]
_CURRENT_HALF = ["time", "algbw", "busbw", "#wrong"]
_TIME_NAMES = ("time", "cputime")
# A blank out-of-place half is 32-33 spaces wide; two columns are never more than ~14 apart.
_HALF_GAP = 20


class _Block:
    """What the lines above a data row said: which op, which ranks, which columns."""

    def __init__(self, op: str | None):
        self.op = op
        self.ranks: set[int] = set()
        self.hosts: set[str] = set()
        self.iters: int | None = None
        self.backend = NCCL_TESTS_BACKEND
        self.agg = NCCL_TESTS_AGG
        self.prefix: list[str] = []  # columns before the first time column
        self.half: list[str] = []  # columns of one placement half
        self.rows: list[SizeLine] = []


def _looks_like_current_row(tokens: list[str]) -> bool:
    """A result line of today's layout, met before any header row (a fragment of a log)."""
    return (
        len(tokens) == len(_CURRENT_PREFIX) + 2 * len(_CURRENT_HALF)
        and tokens[0].isdigit() and tokens[1].isdigit() and tokens[2] in TYPE_TO_DTYPE
    )


def unprefixed(raw: str) -> str:
    """A line without the prefix srun --label or mpirun --tag-output put before it."""
    return _SRUN_LABEL.sub("", _MPI_TAG.sub("", raw))


@dataclass
class LogScan:
    """What one pass over a log found: its rows (scan_log), and the first line saying it failed or NCCL warned."""

    rows: list[ResultRow] = field(default_factory=list)
    failure: str | None = None
    nccl_warning: str | None = None


def scan_log(
    lines: Iterable[str], source: str = "nccl-tests log", option: str = "RUN", op: str | None = None,
    ranks: int | None = None,
) -> LogScan:
    """One pass over a log's lines, its rows kept (iter_log gives them one table at a time)."""
    scan = LogScan()
    scan.rows = list(iter_log(lines, scan, source, option, op, ranks))
    return scan


def iter_log(
    lines: Iterable[str], scan: LogScan, source: str = "nccl-tests log", option: str = "RUN",
    op: str | None = None, ranks: int | None = None,
) -> Iterator[ResultRow]:
    """The rows of a log's tables as each table ends, so memory holds one table, never the whole log;
    `scan` learns the first failure and NCCL warning lines.

    Where the log does not say which collective ran or on how many ranks, the file name (e.g.
    all_reduce_perf.log) and the busbw/algbw ratio are asked, then the `op` and `ranks` hints
    (report/compare --op and --ranks); what stays unknown is an error naming the hint to give.
    """
    fallback_op = op_of_file_name(Path(source).name)
    reader = _LogReader()
    for raw in lines:
        reader.feed(raw)
        if scan.failure is None or scan.nccl_warning is None:
            line = unprefixed(raw)
            scan.failure = scan.failure or _first(_FAILURE, line)
            scan.nccl_warning = scan.nccl_warning or _first(_NCCL_WARNING, line)
        while reader.blocks:
            yield from _table_rows(reader.blocks.pop(0), fallback_op, op, source, option, ranks)
    for found in reader.finish():
        yield from _table_rows(found, fallback_op, op, source, option, ranks)


def _table_rows(found: _Block, fallback_op: str | None, op: str | None, source: str, option: str,
                ranks: int | None) -> list[ResultRow]:
    name = found.op or fallback_op or op or _infer_op(found)
    if name is None:
        raise UserInputError(
            option,
            f"{source}: cannot tell which collective ran (no op name in the log or the file name, and "
            "busbw/algbw, redop and root do not say); pass --op",
        )
    return _block_rows(found, name, source, option, ranks)


def _first(pattern: re.Pattern, line: str) -> str | None:
    found = pattern.search(line)
    return found.group(0).strip() if found else None


class _LogReader:
    """Splits a log into blocks (one table each) line by line, reading what each says about its table."""

    def __init__(self) -> None:
        self.blocks: list[_Block] = []
        self.block = _Block(None)

    def feed(self, raw: str) -> None:
        line = unprefixed(raw).rstrip()
        stripped = line.strip()
        if not stripped:
            return
        if _BARE_COMMENT.match(stripped):
            stripped = "# " + stripped
        if stripped.startswith("#"):
            self._comment(stripped)
        elif not self._data(line, stripped):
            self._other(stripped)

    def finish(self) -> list[_Block]:
        if self.block.rows:
            self.blocks.append(self.block)
        return self.blocks

    def _next_block(self, op: str | None) -> None:
        """Close the current table if it has rows: what follows belongs to a new one."""
        if self.block.rows:
            self.blocks.append(self.block)
            self.block = _Block(op)

    def _comment(self, stripped: str) -> None:
        body = stripped.lstrip("#").strip()
        block = self.block
        if body.startswith("Collective test starting") or body.startswith("nThread"):
            self._run_starts(body)
            return
        rank = _RANK_PATTERN.match(stripped)
        if rank:
            block.ranks.add(int(rank.group(1)))
            if rank.group(2):
                block.hosts.add(rank.group(2))
            exported = _EXPORT_DEVICE.search(stripped)
            if exported:
                block.backend = exported.group(1)
            return
        agg = _EXPORT_AGG.search(body)
        if agg:
            block.agg = agg.group(1)
            return
        names = body.split()
        if "size" in names and "count" in names and any(n in _TIME_NAMES for n in names):
            _read_header(block, names)

    def _run_starts(self, body: str) -> None:
        """A binary's start line or its settings line: a new table begins."""
        self._next_block(self.block.op)
        if body.startswith("Collective test starting"):
            self.block.op = op_in(body) or self.block.op
        elif self.block.ranks:
            # a second nThread line with ranks already seen: a new run of the same binary
            self.block = _Block(self.block.op)
        iters = _ITERS_PATTERN.search(body)
        if iters:
            self.block.iters = int(iters.group(1))

    def _data(self, line: str, stripped: str) -> bool:
        """Read a result line into the current table; False when the line is not one."""
        block, tokens = self.block, stripped.split()
        if not block.half and _looks_like_current_row(tokens):
            block.prefix, block.half = list(_CURRENT_PREFIX), list(_CURRENT_HALF)
        if block.half and tokens[0].isdigit() and len(tokens) >= len(block.prefix) + len(block.half):
            row = _read_data(block, line, tokens)
            if row is not None:
                block.rows.append(row)
                return True
        return False

    def _other(self, stripped: str) -> None:
        """A line naming a binary (a command line, a launcher's echo) names the op of what follows."""
        line_op = op_in(stripped)
        if line_op is not None and "NCCL INFO" not in stripped:
            self._next_block(line_op)
            self.block.op = line_op


def _infer_op(block: _Block) -> str | None:
    """The collective a table with no name comes from, when its columns leave one choice.

    busbw/algbw above 1 is only all_reduce's 2(n-1)/n; below 1 the (n-1)/n ops, of which only
    reduce_scatter reduces; exactly 1 with a root: broadcast (no redop) or reduce. all_reduce on 2
    ranks (ratio 1, root -1) cannot be told from sendrecv, nor all_gather from all_to_all.
    """
    first = block.rows[0]
    span = ratio_span(bandwidths(block.rows))
    if span is None:
        return None
    low, high = span
    reduces = first.redop not in ("none", "")
    if low > 1:
        return "all_reduce"
    if high < 1:
        return "reduce_scatter" if reduces else None
    if first.root >= 0:
        return "reduce" if reduces else "broadcast"
    return None


def _read_header(block: _Block, names: list[str]) -> None:
    first_time = next(i for i, n in enumerate(names) if n in _TIME_NAMES)
    later = [i for i, n in enumerate(names) if n in _TIME_NAMES and i > first_time]
    block.prefix = names[:first_time]
    end = later[0] if later else len(names)
    block.half = names[first_time:end]


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _read_data(block: _Block, line: str, tokens: list[str]) -> SizeLine | None:
    prefix = dict(zip(block.prefix, tokens, strict=False))
    spans = [m.span() for m in re.finditer(r"\S+", line)]
    rest = tokens[len(block.prefix):]
    width = len(block.half)
    if len(rest) >= 2 * width:
        halves = {PLACEMENT_OUT: rest[:width], PLACEMENT_IN: rest[width : 2 * width]}
    else:
        # one half only: nccl-tests leaves the out-of-place half blank, so a wide gap means in-place
        gap = spans[len(block.prefix)][0] - spans[len(block.prefix) - 1][1] if block.prefix else 0
        halves = {PLACEMENT_IN if gap > _HALF_GAP else PLACEMENT_OUT: rest[:width]}
    parsed: list[Half] = []
    for placement, values in halves.items():
        named = dict(zip(block.half, values, strict=False))
        time_us = _number(named.get("time", named.get("cputime", "")))
        if time_us is None:
            return None
        parsed.append(Half(
            placement, time_us, _number(named.get("algbw", "")), _number(named.get("busbw", "")),
            _wrong(named.get("#wrong")), (_number(named.get("error") or "") or 0) > 0,
        ))
    try:
        size_bytes, count = int(prefix["size"]), int(prefix["count"])
        root = int(prefix.get("root", "-1"))
    except (KeyError, ValueError):
        return None
    return SizeLine(size_bytes, count, prefix.get("type", "float"), prefix.get("redop", "none"), root, tuple(parsed))


def _wrong(raw: str | None) -> int | None:
    if raw is None or raw == "N/A":
        return None
    value = _number(raw)
    return None if value is None else int(value)


def _block_rows(block: _Block, op: str, source: str, option: str, ranks: int | None = None) -> list[ResultRow]:
    world_size = world_size_of(op, block.ranks, block.rows) or ranks
    if world_size is None and op_table.rank_count_matters(op):
        raise UserInputError(
            option,
            f"{source}: cannot tell how many ranks ran {op} (no '# Rank' lines, and neither size/count nor "
            "busbw/algbw says); pass --ranks",
        )
    table = Table(world_size, max(1, len(block.hosts)), block.iters, block.backend, block.agg)
    return table_rows(op, block.rows, table)
