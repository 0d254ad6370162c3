"""`nccl-bench history`: the results store's commands (add, show, check, nodes, html), and the one
function sweep and doctor call to record a finished run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from nccl_bench.cli import messages
from nccl_bench.cli.params import argument, param, read_given, read_or_default
from nccl_bench.errors import EXIT_OK, EXIT_VERDICT, UserInputError
from nccl_bench.options import (
    AS_JSON,
    FLOOR,
    HISTORY,
    HISTORY_OP,
    HISTORY_PATHS,
    JUNIT,
    MARKDOWN,
    PAGE,
    RESULTS_ROOT,
    WINDOW,
)

app = typer.Typer(help="Every run kept in a results store: add runs, show series, check for regressions.",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def store_address(history: Optional[str], results_root: Optional[Path]):
    """--history, else $NCCL_BENCH_HISTORY, else <results-root>/history.sqlite; parsed once, here."""
    from nccl_bench.history.address import ENV_VAR, AddressError, default_address, parse_address

    given = history if history is not None else os.environ.get(ENV_VAR) or None
    if given is None:
        return default_address(read_or_default(RESULTS_ROOT, results_root))
    try:
        return parse_address(given)
    except AddressError as exc:
        raise UserInputError(HISTORY.name if history is not None else ENV_VAR, str(exc)) from None


def recording_target(history: Optional[str], no_history: bool, results_root: Optional[Path]):
    """Where sweep or doctor will record its run (None: --no-history): a bad URL fails before the run."""
    return None if no_history else store_address(history, results_root)


def record_run(run_dir: Optional[Path], address) -> None:
    """Record a finished run (rank 0, or the process that started local workers). A store that cannot be
    reached loses nothing: the run folder is whole, one line says how to add it later, the exit is unchanged."""
    if address is None or run_dir is None:
        return
    from nccl_bench.history.records import read_record
    from nccl_bench.history.store import open_store

    try:
        record = read_record(run_dir, str(run_dir), _now())
        with open_store(address) as store:
            store.add_run(record)
    except Exception as exc:  # whatever the store or its driver raised, the run is kept
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        messages.say(f"warning: the run was not recorded in the results store ({why}); it is whole in {run_dir}: "
                     f"add it later with `nccl-bench history add {run_dir} {HISTORY.name} URL`")
        return
    messages.plain(f"recorded in the results store {address.shown}")  # where the command wrote, as `wrote csv to`


def _now() -> str:
    import datetime as _dt

    return _dt.datetime.now(_dt.timezone.utc).isoformat()


def _open(history: Optional[str], results_root: Optional[Path], must_exist: bool = True):
    from nccl_bench.history.address import SQLITE
    from nccl_bench.history.store import StoreError, open_store

    address = store_address(history, results_root)
    if must_exist and address.kind == SQLITE and not Path(address.target).is_file():
        raise UserInputError(HISTORY.name, f"{address.target} does not exist; record a run first")
    try:
        return open_store(address)
    except StoreError as exc:
        raise UserInputError(HISTORY.name, str(exc)) from None


@app.command("add")
def add_command(
    paths: list[str] = argument(HISTORY_PATHS),
    history: Optional[str] = param(HISTORY),
    results_root: Optional[Path] = param(RESULTS_ROOT),
) -> None:
    """Add run folders, results.csv files and nccl-tests logs/JSON to the store; a run stored already is kept once."""
    from nccl_bench.history.records import read_record

    records = [read_record(Path(p), p, _now()) for p in paths]  # every input read before the store is touched
    with _open(history, results_root, must_exist=False) as store:
        for path, record in zip(paths, records, strict=True):
            added = store.add_run(record)
            messages.plain(f"{'added' if added else 'already stored'}: {path} (run {record.run_id[:12]})")


@app.command("show")
def show_command(
    op: Optional[str] = param(HISTORY_OP),
    as_json: bool = param(AS_JSON, given_default=True),
    window: Optional[int] = param(WINDOW),
    floor: Optional[str] = param(FLOOR),
    history: Optional[str] = param(HISTORY),
    results_root: Optional[Path] = param(RESULTS_ROOT),
) -> None:
    """Per series: runs, latest, median, min and max busbw, and the latest's change against the window."""
    from nccl_bench.history import series
    from nccl_bench.render import history_text

    chosen, runs, share = read_given(HISTORY_OP, op), read_or_default(WINDOW, window), read_or_default(FLOOR, floor)
    with _open(history, results_root) as store:
        found = series.in_order(series.summaries(store, chosen, runs, share))
        total = store.run_count()
    _print(history_text.show_json(total, found) if as_json else None,
           lambda width: history_text.show_lines(found, width))


@app.command("check")
def check_command(
    window: Optional[int] = param(WINDOW),
    floor: Optional[str] = param(FLOOR),
    op: Optional[str] = param(HISTORY_OP),
    markdown: Optional[str] = param(MARKDOWN),
    junit: Optional[str] = param(JUNIT),
    history: Optional[str] = param(HISTORY),
    results_root: Optional[Path] = param(RESULTS_ROOT),
) -> None:
    """Is the latest run of any series below its history's spread? Exit 0 ok, 1 regression, 2 bad input."""
    from nccl_bench.history import series
    from nccl_bench.history.rule import REGRESSION
    from nccl_bench.render import history_text
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.results.whole_file import write_text_file

    chosen, runs, share = read_given(HISTORY_OP, op), read_or_default(WINDOW, window), read_or_default(FLOOR, floor)
    markdown_path = check_output_file(read_given(MARKDOWN, markdown), MARKDOWN.name)
    junit_path = check_output_file(read_given(JUNIT, junit), JUNIT.name)
    with _open(history, results_root) as store:
        found = series.in_order(series.summaries(store, chosen, runs, share))
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
def nodes_command(
    as_json: bool = param(AS_JSON, given_default=True),
    history: Optional[str] = param(HISTORY),
    results_root: Optional[Path] = param(RESULTS_ROOT),
) -> None:
    """Per host, from the doctor's runs: runs taken part in, times flagged, of which kind, and when last."""
    from nccl_bench.history.hosts import host_records
    from nccl_bench.render import history_text

    with _open(history, results_root) as store:
        hosts = host_records(store)
    _print(history_text.nodes_json(hosts) if as_json else None, lambda width: history_text.nodes_lines(hosts, width))


@app.command("html")
def html_command(
    page: str = argument(PAGE),
    window: Optional[int] = param(WINDOW),
    floor: Optional[str] = param(FLOOR),
    history: Optional[str] = param(HISTORY),
    results_root: Optional[Path] = param(RESULTS_ROOT),
) -> None:
    """One self-contained page: a trend plot per op and size with regressions marked, each host's doctor record."""
    from nccl_bench.history import series
    from nccl_bench.history.hosts import host_records
    from nccl_bench.render.formats import check_output_file
    from nccl_bench.render.history_page import page as history_page
    from nccl_bench.results.whole_file import write_text_file

    runs, share = read_or_default(WINDOW, window), read_or_default(FLOOR, floor)
    path = check_output_file(Path(page), PAGE.name)
    with _open(history, results_root) as store:
        found = series.in_order(series.summaries(store, None, runs, share))
        hosts = host_records(store)
        total = store.run_count()
    write_text_file(path, history_page(found, hosts, total))
    messages.plain(f"wrote the history page to {path}")


def _print(json_text: Optional[str], lines) -> None:
    from nccl_bench.render.live import print_lines_at_width

    if json_text is not None:
        typer.echo(json_text)
    else:
        print_lines_at_width(lines)
