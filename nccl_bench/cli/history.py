"""`nccl-bench history`: the history's commands (add, show, check, nodes, html). Recording a finished
sweep or doctor run is history/recording.py's."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, Optional

import typer

from nccl_bench.cli import messages
from nccl_bench.cli.params import read_given, read_or_default, takes, use
from nccl_bench.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_VERDICT, UserInputError
from nccl_bench.history.recording import store_address
from nccl_bench.options import (
    AS_JSON,
    FLOOR,
    HISTORY,
    HISTORY_OP,
    HISTORY_PATHS,
    HISTORY_WAIT,
    JUNIT,
    MARKDOWN,
    PAGE,
    RESULTS_ROOT,
    WINDOW,
)
from nccl_bench.units.clock import utc_now_iso

app = typer.Typer(help="Every run kept in the history: add runs, show series, check for regressions.",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def _open(given: dict[str, Any], must_exist: bool = True):
    """The history --history (or --results-root) names; one that must hold runs already must exist (and is
    only read). Every failure of the store is a StoreError, which the CLI's edge says in one line; a
    Ctrl-C or SIGTERM while it keeps the command waiting ends the command at once."""
    from nccl_bench.history.address import SQLITE
    from nccl_bench.history.store import open_store

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _end_interrupted)
    address = store_address(given[HISTORY.key], given[RESULTS_ROOT.key],
                            read_or_default(HISTORY_WAIT, given.get(HISTORY_WAIT.key)))
    if must_exist and address.kind == SQLITE and not Path(address.target).exists():
        raise UserInputError(HISTORY.name, f"{address.target} does not exist; record a run first")
    store = open_store(address, messages.say, reading=must_exist)
    if must_exist:
        skipped = store.unusable_values()
        if skipped:
            messages.notes([f"{skipped} stored value(s) of {address.shown} are not finite, non-negative "
                            "measurements; skipped"])
    return store


def _end_interrupted(signum, frame) -> None:
    """Ctrl-C or SIGTERM, also while the history keeps the command waiting: one line, exit 130, at once
    (raised here: typer would turn a KeyboardInterrupt into a silent exit)."""
    messages.fail(f"interrupted by {signal.Signals(signum).name}", EXIT_INTERRUPTED)


@app.command("add")
@takes(HISTORY_PATHS, HISTORY, RESULTS_ROOT, HISTORY_WAIT)
def add_command(**given: Any) -> None:
    """Add run folders, results.csv files and nccl-tests logs/JSON to the history; a run in it already is kept once."""
    from nccl_bench.history.records import read_record
    from nccl_bench.history.store import refuse_bad_values

    paths = given[HISTORY_PATHS.key]
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
    with _open(given, must_exist=False) as store:
        for path, record in runs:
            added = store.add_run(record)
            messages.plain(f"{'added' if added else 'already stored'}: {path} (run {record.run_id[:12]})")


@app.command("show")
@takes(HISTORY_OP, AS_JSON, WINDOW, FLOOR, HISTORY, RESULTS_ROOT, HISTORY_WAIT, as_json=use(given_default=True))
def show_command(**given: Any) -> None:
    """Per series: runs, latest, median, min and max busbw, and the latest's change against the window."""
    from nccl_bench.history import series
    from nccl_bench.render import history_text

    asked = _series_asked(given)
    with _open(given) as store:
        found = series.in_order(series.summaries(store, *asked))
        total = store.run_count()
    _print(history_text.show_json(total, found) if given[AS_JSON.key] else None,
           lambda width: history_text.show_lines(found, width))


@app.command("check")
@takes(WINDOW, FLOOR, HISTORY_OP, MARKDOWN, JUNIT, HISTORY, RESULTS_ROOT, HISTORY_WAIT)
def check_command(**given: Any) -> None:
    """Is the latest run of any series below its history's spread? Exit 0 ok, 1 regression, 2 bad input."""
    from nccl_bench.history import series
    from nccl_bench.history.rule import REGRESSION
    from nccl_bench.render import history_text
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.results.whole_file import write_text_file

    asked = _series_asked(given)
    markdown_path = check_output_file(read_given(MARKDOWN, given[MARKDOWN.key]), MARKDOWN.name)
    junit_path = check_output_file(read_given(JUNIT, given[JUNIT.key]), JUNIT.name)
    with _open(given) as store:
        found = series.in_order(series.summaries(store, *asked))
    failed = [summary for summary in found if summary.verdict.status == REGRESSION]
    for summary in failed:
        messages.error(f"regression: {series.describe(summary)}")
    judged = sum(1 for summary in found if summary.verdict.status != "too_few")
    messages.plain(f"{len(failed)} regression(s) in {len(found)} series ({judged} with enough history to judge)")
    if markdown_path is not None:
        write_text_file(markdown_path, history_text.check_markdown(found))
    if junit_path is not None:
        write_text_file(junit_path, history_text.check_junit(found))
    raise typer.Exit(EXIT_VERDICT if failed else EXIT_OK)


@app.command("nodes")
@takes(AS_JSON, HISTORY, RESULTS_ROOT, HISTORY_WAIT, as_json=use(given_default=True))
def nodes_command(**given: Any) -> None:
    """Per host, from the doctor's runs: runs taken part in, times flagged, of which kind, and when last."""
    from nccl_bench.history.hosts import host_records
    from nccl_bench.render import history_text

    with _open(given) as store:
        hosts = host_records(store)
    _print(history_text.nodes_json(hosts) if given[AS_JSON.key] else None,
           lambda width: history_text.nodes_lines(hosts, width))


@app.command("html")
@takes(PAGE, WINDOW, FLOOR, HISTORY, RESULTS_ROOT, HISTORY_WAIT)
def html_command(**given: Any) -> None:
    """One self-contained page: a trend plot per op and size with regressions marked, each host's doctor record."""
    from nccl_bench.history import series
    from nccl_bench.history.hosts import host_records
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.render.history_page import page as history_page
    from nccl_bench.results.whole_file import write_text_file

    _, runs, share = _series_asked(given)
    path = check_output_file(Path(given[PAGE.key]), PAGE.name)
    with _open(given) as store:
        found = series.in_order(series.summaries(store, None, runs, share))
        hosts = host_records(store)
        total = store.run_count()
    write_text_file(path, history_page(found, hosts, total))
    messages.plain(f"wrote the history page to {path}")


def _series_asked(given: dict[str, Any]) -> tuple[Optional[str], int, float]:
    """--op (None: every op's series), --window and --floor, read by their declarations."""
    return (read_given(HISTORY_OP, given.get(HISTORY_OP.key)), read_or_default(WINDOW, given.get(WINDOW.key)),
            read_or_default(FLOOR, given.get(FLOOR.key)))


def _print(json_text: Optional[str], lines) -> None:
    from nccl_bench.render.live import print_lines_at_width

    if json_text is not None:
        typer.echo(json_text)
    else:
        print_lines_at_width(lines)
