"""`nccl-bench history`: the history's commands (add, show, check, accept, diff, nodes, html). Recording a
finished sweep or doctor run is history/recording.py's."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Optional

import typer

from nccl_bench import options
from nccl_bench.cli import messages
from nccl_bench.cli.option_sets import (
    HISTORY,
    AcceptArgs,
    AddArgs,
    CheckArgs,
    DiffArgs,
    HistoryAt,
    HtmlArgs,
    NodesArgs,
    ShowArgs,
)
from nccl_bench.cli.params import command_of
from nccl_bench.cli.verdict_files import (
    VerdictFiles,
    judged_or_said,
    outputs_refused,
    verdict_refused,
    written_or_removed,
)
from nccl_bench.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED, EXIT_VERDICT, OptionError, UserInputError
from nccl_bench.history.recording import store_address
from nccl_bench.history.store_schema import SERIES_COLUMNS
from nccl_bench.options import (
    ACCEPT_RUN,
    DIFF_AFTER,
    DIFF_BEFORE,
    HISTORY_PATHS,
    JUDGE_RUN,
    JUNIT,
    MARKDOWN,
    PAGE,
    REASON,
)
from nccl_bench.units.clock import utc_now_iso

CHECK_SUITE = "nccl-bench history check"  # the JUnit suite and Markdown title of `history check`'s files

app = typer.Typer(help="Every run kept in the history: add runs, show series, check for regressions.",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def _open(at: HistoryAt, must_exist: bool = True, whole_store: bool = True):
    """The history --history (or --results-root) names; one that must hold runs already must exist (and is
    only read). Every failure of the store is a StoreError, which the CLI's edge says in one line; a
    Ctrl-C or SIGTERM while it keeps the command waiting ends the command at once. whole_store: the
    command reads the whole store anyway, so the values it skips are counted over it here (check counts
    those of the runs it reads: its cost follows the series asked)."""
    from nccl_bench.history.address import SQLITE
    from nccl_bench.history.store import open_store

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _end_interrupted)
    address = store_address(at.history, at.results_root, at.history_wait_s)
    if must_exist and address.kind == SQLITE and not Path(address.target).exists():
        raise UserInputError(HISTORY.name, f"{address.target} does not exist; record a run first")
    store = open_store(address, messages.say_naming_history, reading=must_exist)
    if must_exist and whole_store:
        _note_skipped(store.unusable_values(), address.shown)
    return store


def _note_skipped(skipped: int, shown: str) -> None:
    if skipped:
        messages.notes([f"{skipped} stored value(s) of {shown} are not finite, non-negative measurements; skipped"])


def _end_interrupted(signum, frame) -> None:
    """Ctrl-C or SIGTERM, also while the history keeps the command waiting: one line, exit 130, at once
    (raised here: typer would turn a KeyboardInterrupt into a silent exit)."""
    messages.fail(f"interrupted by {signal.Signals(signum).name}", EXIT_INTERRUPTED)


@app.command("add")
@command_of
def add_command(args: AddArgs, at: HistoryAt) -> None:
    """Add run folders, results.csv files and nccl-tests logs/JSON to the history; a run in it already is kept once."""
    from nccl_bench.history.records import read_record
    from nccl_bench.history.stored_values import refuse_bad_values

    paths = args.paths
    runs = []
    for path in paths:  # every input read before the store is touched; one that is no run is skipped
        try:
            record = read_record(Path(path), path, utc_now_iso())
            refuse_bad_values(record)
        except UserInputError as exc:
            if len(paths) == 1:
                raise
            messages.say(f"skipped {exc}")
            continue
        runs.append((path, record))
    if not runs:
        raise UserInputError(HISTORY_PATHS.name, f"none of the {len(paths)} inputs is a run; nothing added")
    with _open(at, must_exist=False) as store:
        for path, record in runs:
            added = store.add_run(record)
            messages.plain(f"{'added' if added else 'already stored'}: {path} (run {record.run_id[:12]})")


@app.command("show")
@command_of
def show_command(args: ShowArgs, at: HistoryAt) -> None:
    """Per series: runs, latest, median, min and max busbw, and the latest's change against its reference."""
    from nccl_bench.history import series
    from nccl_bench.render import history_text

    asked = series.Asked(args.op, args.system, args.window, args.floor, None)
    with _open(at) as store:
        found = series.in_order(series.summaries(store, asked, aggregates=True))
        total = store.run_count()
    _print(history_text.show_json(total, found) if args.as_json else None,
           lambda width: history_text.show_lines(found, width))


@app.command("check")
@command_of(refused=lambda given, exc: verdict_refused(
    VerdictFiles(CHECK_SUITE, given.get(JUNIT.key), given.get(MARKDOWN.key)), exc))
def check_command(args: CheckArgs, at: HistoryAt) -> None:
    """Is a run below what its series' own noise allows? Each series' latest run, or --run's. Exit 0 ok,
    1 regression, 2 bad input, 3 the --run is not in the history (or did not complete)."""
    from nccl_bench.history import series
    from nccl_bench.render.formats import check_output_file

    asked = series.Asked(args.op, args.system, args.window, args.floor, args.run)
    markdown_path = check_output_file(args.markdown, MARKDOWN.name)
    junit_path = check_output_file(args.junit, JUNIT.name)
    with judged_or_said(VerdictFiles(CHECK_SUITE, junit_path, markdown_path)):
        _check(asked, at, markdown_path, junit_path, args.as_json)


def _check(asked, at: HistoryAt, markdown_path: Optional[Path], junit_path: Optional[Path], as_json: bool) -> None:
    from nccl_bench.history import series
    from nccl_bench.history.rule import REGRESSION
    from nccl_bench.render import history_text
    from nccl_bench.results.whole_file import write_text_file

    with _open(at, whole_store=False) as store:
        if asked.run_id is not None:
            asked = _judging(store, asked)
        found = series.with_changes(store, series.in_order(series.summaries(store, asked)))
        _note_skipped(sum(summary.skipped for summary in found), store.address.shown)
        stored = None if found or asked.run_id is not None else f"{store.address.shown}; it holds {_stored_text(store)}"
    if stored is not None:  # a gate that judged nothing must not pass: a typo in a CI job would switch it off
        key = "system" if asked.system is not None else "op" if asked.op is not None else "history"
        raise OptionError(key, f"no series{_narrowed(asked)} to judge in {stored}")
    if asked.run_id is not None and not found:
        messages.fail(f"{JUDGE_RUN.name}: run {asked.run_id[:12]} has no series{_narrowed(asked)} to judge "
                      "(a doctor run, or every row failed)", EXIT_RUN_FAILED)
    failed = [summary for summary in found if summary.verdict.status == REGRESSION]
    now = utc_now_iso()
    if as_json:
        typer.echo(history_text.check_json(found, now))
    for summary in failed:
        messages.error(f"regression: {series.describe(summary)}")
    lines = history_text.check_lines(found, now)
    if as_json:  # stdout is the JSON; the report's lines go beside the errors
        for line in lines:
            messages.plain(line)
    else:
        _print(None, lambda width: lines)
    if markdown_path is not None:
        write_text_file(markdown_path, history_text.check_markdown(found, now))
    if junit_path is not None:
        write_text_file(junit_path, history_text.check_junit(found))
    raise typer.Exit(EXIT_VERDICT if failed else EXIT_OK)


def _stored_text(store) -> str:
    """What a history holds, for a selection that named nothing in it: its systems and ops."""
    from nccl_bench.render.escape import terminal_text

    keys = list(store.series_keys(None, None))
    if not keys:
        return "no series yet (nccl-bench history add RUN, or a sweep records itself)"
    index = {name: position for position, name in enumerate(SERIES_COLUMNS, 1)}
    systems = sorted({str(key[index["system"]]) for key in keys})
    ops = sorted({str(key[index["op"]]) for key in keys})
    return terminal_text(f"{len(keys)} series of system(s) {', '.join(systems)} and op(s) {', '.join(ops)}")


@app.command("accept")
@command_of
def accept_command(args: AcceptArgs, at: HistoryAt) -> None:
    """Make a run the new normal of its series (a slower driver by design): check judges the runs after it
    against it, and the page marks it with the reason."""
    reason = " ".join(str(args.reason or "").split())
    if not reason:
        raise UserInputError(REASON.name, "say why this run is the new normal (--reason TEXT); it is shown with it")
    run_id, op = options.run_id(args.run, ACCEPT_RUN.name), args.op
    _must_exist(at)
    with _open(at, must_exist=False) as store:
        run_id, started, _, _ = _find_run(store, run_id, ACCEPT_RUN.name)
        names = [name for name, *values in store.run_series(run_id) if op is None or values[0] == op]
        if not names:
            messages.fail(f"{ACCEPT_RUN.name}: run {run_id[:12]} has no series{f' of {op}' if op else ''} to "
                          "accept", EXIT_RUN_FAILED)
        earlier = store.other_reasons(run_id, names, reason)
        if earlier:
            raise UserInputError(REASON.name, f"run {run_id[:12]} is the new normal already, accepted "
                                 f"{earlier[0][1]} with the reason {earlier[0][0]!r}; that reason is kept (an "
                                 "accept is a record: a later run accepted says the new reason)")
        added = store.add_accepts(run_id, started, names, reason)
    messages.plain(f"accepted run {run_id[:12]} ({started}) as the new normal of {len(names)} series"
                   f"{f' ({len(names) - added} already were)' if added < len(names) else ''}: {reason}")


@app.command("diff")
@command_of
def diff_command(args: DiffArgs, at: HistoryAt) -> None:
    """Two runs side by side: each series' busbw change from RUN_A to RUN_B, and what changed between them."""
    from nccl_bench.history.changes import differences
    from nccl_bench.history.store_schema import SERIES_COLUMNS
    from nccl_bench.render import history_text

    wanted, op = [args.before, args.after], args.op
    with _open(at) as store:
        runs = [_find_run(store, run_id, arg.name) for run_id, arg in zip(wanted, (DIFF_BEFORE, DIFF_AFTER),
                                                                           strict=True)]
        keys = {name: dict(zip(SERIES_COLUMNS, values, strict=True))
                for run in runs for name, *values in store.run_series(run[0])}
        values = [store.run_values(run[0]) for run in runs]
        metas = store.run_metas([run[0] for run in runs])
    changed = differences(metas.get(runs[1][0], {}), [metas.get(runs[0][0], {})])
    rows = history_text.diff_rows(keys, values[0], values[1], op)
    if args.as_json:
        typer.echo(history_text.diff_json(runs, rows, changed))
    else:
        _print(None, lambda width: history_text.diff_lines(runs, rows, changed, width))


@app.command("nodes")
@command_of
def nodes_command(args: NodesArgs, at: HistoryAt) -> None:
    """Per host, from the doctor's runs: runs taken part in, times flagged, of which kind, and when last."""
    from nccl_bench.history.hosts import host_records
    from nccl_bench.render import history_text

    with _open(at) as store:
        hosts = host_records(store)
    _print(history_text.nodes_json(hosts) if args.as_json else None,
           lambda width: history_text.nodes_lines(hosts, width))


@app.command("html")
@command_of(refused=lambda given, exc: outputs_refused([given.get(PAGE.key)]))
def html_command(args: HtmlArgs, at: HistoryAt) -> None:
    """One self-contained page: a trend plot per op and size with regressions marked, each host's doctor record."""
    from nccl_bench.history import series
    from nccl_bench.history.hosts import host_records
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.render.history_page import page as history_page
    from nccl_bench.results.whole_file import write_text_file

    asked = series.Asked(None, None, args.window, args.floor, None)
    path = check_output_file(args.page, PAGE.name)
    with written_or_removed((path,)):
        with _open(at) as store:
            found = series.with_changes(store, series.in_order(series.summaries(store, asked, aggregates=True)))
            found = [summary.newest(2 * asked.window + 1) for summary in found]  # its size: series x window
            metas = store.run_metas(sorted({p.run_id for s in found for p in s.window}))
            hosts = host_records(store)
            total = store.run_count()
        write_text_file(path, history_page(found, hosts, total, metas, utc_now_iso()))
    messages.plain(f"wrote the history page to {path}")


def _narrowed(asked) -> str:
    return "".join(f" {label} {value}" for label, value in (("of", asked.op), ("on", asked.system)) if value)


def _find_run(store, prefix: str, option: str) -> tuple[str, str, str, str]:
    """(run_id, started_utc, recorded_utc, status) of the one run whose id starts with `prefix`; a run the
    history does not hold fails with exit 3 (a CI job judging a run that was never recorded must not pass)."""
    found = store.find_runs(prefix)
    if not found:
        messages.fail(f"{option}: no run {prefix} in the history {store.address.shown} (was it recorded? the "
                      "sweep says `recorded run ID in the history ...`)", EXIT_RUN_FAILED)
    if len(found) > 1:
        raise UserInputError(option, f"{prefix} names more than one run ({found[0][0][:16]}, {found[1][0][:16]}); "
                                     "give more of its characters")
    run_id, started, recorded, status, _ = found[0]
    return str(run_id), str(started), str(recorded), str(status)


def _judging(store, asked):
    """--run resolved to the one run it names, which must have completed: the series are judged as of it."""
    from dataclasses import replace

    run_id, started, _, status = _find_run(store, asked.run_id, JUDGE_RUN.name)
    if status != "complete":
        messages.fail(f"{JUDGE_RUN.name}: run {run_id[:12]} ({started}) ended {status}; a run that did not "
                      "complete is never judged", EXIT_RUN_FAILED)
    return replace(asked, run_id=run_id, until=(started, run_id))


def _must_exist(at: HistoryAt) -> None:
    """A command that writes into a history that must hold runs already (accept): a missing SQLite file
    is said, never made."""
    from nccl_bench.history.address import SQLITE

    address = store_address(at.history, at.results_root, at.history_wait_s)
    if address.kind == SQLITE and not Path(address.target).exists():
        raise UserInputError(HISTORY.name, f"{address.target} does not exist; record a run first")


def _print(json_text: Optional[str], lines) -> None:
    from nccl_bench.render.live import print_lines_at_width

    if json_text is not None:
        typer.echo(json_text)
    else:
        print_lines_at_width(lines)
