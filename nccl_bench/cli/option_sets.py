"""The dataclasses of the options that are no part of a run's config, one per group a command takes
(workers, recording, the history's place, each command's own): with the configs, every command's
parameters are dataclass fields (cli/params.py's command_of). Here, not in nccl_bench/options.py, as
their defaults come from the layers that act on them (the local launcher's, the history's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nccl_bench.history.address import DEFAULT_WAIT_S
from nccl_bench.option_types import Option, PerDevice, argument, number, option, path, switch, text, whole
from nccl_bench.options import (
    ACCEPT_RUN,
    ALLOW_MISMATCH,
    AS_JSON,
    BASELINE_RUN,
    CURRENT_RUN,
    DIFF_AFTER,
    DIFF_BEFORE,
    FLOOR,
    FORMAT,
    HISTORY_OP,
    HISTORY_PATHS,
    HISTORY_SYSTEM,
    HTML,
    JSON_FILE,
    JUDGE_RUN,
    JUNIT,
    LATENCY_BELOW,
    LOG_OP,
    LOG_RANKS,
    MARKDOWN,
    OUTPUT,
    PAGE,
    PLOT,
    REASON,
    RESULTS_ROOT,
    RUNS,
    TOLERANCE,
    WINDOW,
)
from nccl_bench.ranks.layout import CPU_DEFAULT_WORKERS

WORKERS = Option("workers", ("--workers",), whole(1),
                 "Without a launcher: start this many local ranks (default: {default}).",
                 default=PerDevice("one per GPU", CPU_DEFAULT_WORKERS), show=lambda workers: f"{workers.gpu}, or "
                 f"{workers.cpu} on CPU")

HISTORY = Option("history", ("--history",), text,
                 "The history: a file, sqlite:///PATH or postgresql://user@host:port/db (default: "
                 "$NCCL_BENCH_HISTORY, else <results-root>/history.sqlite).", metavar="URL")

# How long a command waits for the history (a lock, a server's answer) before it gives up; a run that
# waited is kept whole, to be added later (history/store.py, history/address.py's DEFAULT_WAIT_S).
HISTORY_WAIT = Option("history_wait_s", ("--history-wait",), number(),
                      "Seconds to wait for a locked or silent history before giving up (default {default}).",
                      default=DEFAULT_WAIT_S, metavar="SECONDS")


# Rank 0 draws its run's figure beside the files: about a second of a core (matplotlib's import, then the
# drawing), which a loop of many runs (burn-in, CI) may rather not spend.
NO_PLOT = Option("no_plot", ("--no-plot",), switch, "Do not draw {what}.", default=False)


@dataclass(frozen=True)
class SweepPlot:
    no_plot: bool = option(NO_PLOT, what="busbw.png (`nccl-bench report RUN --plot busbw.png` draws it later)",
                           given_default=True)


@dataclass(frozen=True)
class DoctorPlot:
    no_plot: bool = option(NO_PLOT, what="pairs.png (doctor.csv and doctor.json hold its numbers)", given_default=True)


@dataclass(frozen=True)
class Workers:
    """Without a launcher, how many local ranks to start (None: one per GPU, or 2 on CPU)."""

    workers: int | None = option(WORKERS)


@dataclass(frozen=True)
class Recording:
    """What a command that records its run takes (sweep, doctor, replay): where, how long to wait, or not at all."""

    history: str | None = option(HISTORY)
    history_wait_s: float = option(HISTORY_WAIT)
    no_history: bool = option(("--no-history",), switch, "Do not record this run in the history.", default=False,
                              given_default=True)


@dataclass(frozen=True)
class DoctorJson:
    json_file: Path | None = option(JSON_FILE, what="the verdicts (doctor.json's schema)")


@dataclass(frozen=True)
class ReplayOutputs:
    envelope: Path | None = option(
        ("--envelope",), path, "After a replay, put each collective beside this sweep's busbw at its size (a run "
        "folder, results.csv or nccl-tests log of the same fabric).", metavar="RUN")
    json_file: Path | None = option(JSON_FILE, what="the profile, with the replayed times after a replay")


@dataclass(frozen=True)
class CompareArgs:
    baseline: Path = argument(BASELINE_RUN)
    current: Path = argument(CURRENT_RUN)
    tolerance: float = option(TOLERANCE, given_default=True)
    min_bytes: int = option(LATENCY_BELOW, given_default=True)
    allow_mismatch: bool = option(ALLOW_MISMATCH, given_default=True)
    markdown: Path | None = option(MARKDOWN)
    junit: Path | None = option(JUNIT)
    json_file: Path | None = option(JSON_FILE, what="the comparison as JSON")
    op: str | None = option(LOG_OP)
    ranks: int | None = option(LOG_RANKS)


@dataclass(frozen=True)
class ReportArgs:
    runs: list[Path] = argument(RUNS)
    plot: Path | None = option(PLOT)
    fmt: str = option(FORMAT, given_default=True)
    output: Path | None = option(OUTPUT)
    op: str | None = option(LOG_OP)
    ranks: int | None = option(LOG_RANKS)
    html_file: Path | None = option(HTML)


@dataclass(frozen=True)
class LimitsArgs:
    as_json: bool = option(AS_JSON, given_default=True)
    multi_node: bool = option(("--multi-node",), switch, "Include the network: min(intra-node peak, NIC per rank).",
                              default=False, given_default=True)


@dataclass(frozen=True)
class HistoryAt:
    """The history --history (or --results-root) names, and how long to wait for it."""

    history: str | None = option(HISTORY)
    results_root: Path = option(RESULTS_ROOT)
    history_wait_s: float = option(HISTORY_WAIT)


@dataclass(frozen=True)
class AddArgs:
    paths: list[str] = argument(HISTORY_PATHS)


@dataclass(frozen=True)
class ShowArgs:
    op: str | None = option(HISTORY_OP)
    system: str | None = option(HISTORY_SYSTEM)
    as_json: bool = option(AS_JSON, given_default=True)
    window: int = option(WINDOW)
    floor: float = option(FLOOR)


@dataclass(frozen=True)
class CheckArgs:
    run: str | None = option(JUDGE_RUN)
    system: str | None = option(HISTORY_SYSTEM)
    op: str | None = option(HISTORY_OP)
    window: int = option(WINDOW)
    floor: float = option(FLOOR)
    markdown: Path | None = option(MARKDOWN)
    junit: Path | None = option(JUNIT)
    as_json: bool = option(AS_JSON, given_default=True)


@dataclass(frozen=True)
class AcceptArgs:
    run: str = argument(ACCEPT_RUN)
    reason: str | None = option(REASON)
    op: str | None = option(HISTORY_OP)


@dataclass(frozen=True)
class DiffArgs:
    before: str = argument(DIFF_BEFORE)
    after: str = argument(DIFF_AFTER)
    op: str | None = option(HISTORY_OP)
    as_json: bool = option(AS_JSON, given_default=True)


@dataclass(frozen=True)
class NodesArgs:
    as_json: bool = option(AS_JSON, given_default=True)


@dataclass(frozen=True)
class HtmlArgs:
    page: Path = argument(PAGE)
    window: int = option(WINDOW)
    floor: float = option(FLOOR)
