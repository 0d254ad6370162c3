"""Inputs read as a stream: rows come as the file is read, so memory does not grow with the file."""

from __future__ import annotations

import dataclasses

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.render.formats import stream_csv, to_csv, to_json, to_markdown
from nccl_bench.render.nccltests_text import format_text
from nccl_bench.results import nccltests_log
from nccl_bench.results.loader import load_rows, stream_rows
from nccl_bench.results.schema import COLUMNS, PLACEMENT_IN, PLACEMENT_OUT
from tests.helpers.rows import row, write_run


def _rows(count: int):
    return [row(size_bytes=1024 * (i + 1)) for i in range(count)]


def test_a_results_csv_is_read_lazily_up_to_the_line_at_fault(tmp_path):
    write_run(tmp_path / "run", _rows(3))
    csv_path = tmp_path / "run" / "results.csv"
    header, *lines = csv_path.read_text().splitlines()
    csv_path.write_text("\n".join([header, lines[0], lines[1].replace(",in_place,", ",<b>,"), lines[2]]) + "\n")
    rows = stream_rows(tmp_path / "run")
    assert next(rows).size_bytes == 1024  # the first row is given before the second line is read
    with pytest.raises(UserInputError, match="results.csv line 3: placement: '<b>' is not a name"):
        next(rows)


def test_streamed_rows_are_the_loaded_rows(tmp_path):
    write_run(tmp_path / "run", _rows(5))
    assert list(stream_rows(tmp_path / "run")) == load_rows(tmp_path / "run")
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(format_text(_log_rows(4)) * 3)
    assert list(stream_rows(log)) == load_rows(log) and len(load_rows(log)) == 24


def test_an_input_without_rows_is_refused_before_anything_is_streamed(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.csv").write_text(",".join(COLUMNS) + "\n")
    with pytest.raises(UserInputError, match="has no result rows"):
        stream_rows(tmp_path / "run")


def _log_rows(count: int):
    return [dataclasses.replace(r, placement=placement, backend="nccl", agg="avg")
            for r in _rows(count) for placement in (PLACEMENT_OUT, PLACEMENT_IN)]


def test_a_log_gives_each_table_rows_before_the_next_table_is_read():
    table = format_text(_log_rows(2)).splitlines()
    read = []

    def lines():
        for number, line in enumerate(table * 3):
            read.append(number)
            yield line

    rows = nccltests_log.iter_log(lines(), nccltests_log.LogScan(), "all_reduce_perf.log")
    first = [next(rows) for _ in range(4)]
    assert [r.size_bytes for r in first] == [1024, 1024, 2048, 2048]
    assert max(read) < 2 * len(table)  # the third table not yet read
    assert len(list(rows)) == 8


def test_streamed_formats_are_the_whole_documents():
    rows = _rows(3)
    assert "".join(stream_csv(iter(rows))) == to_csv(rows)
    assert to_csv([]).splitlines() == [to_csv(rows).splitlines()[0]]
    import json

    assert [r["size_bytes"] for r in json.loads(to_json(rows))["rows"]] == [1024, 2048, 3072]
    assert json.loads(to_json([]))["rows"] == []
    assert len(to_markdown(rows).splitlines()) == 5


def test_markdown_escapes_free_text_from_files():
    flagged = row(flags="see <img src=x onerror=alert(1)> | [link](http://x) `code`")
    line = to_markdown([flagged]).splitlines()[2]
    assert "<img" not in line and "&lt;img src=x onerror=alert(1)&gt;" in line
    assert "\\| \\[link\\](http://x) \\`code\\`" in line
    assert line.count(" | ") == len(to_markdown([]).splitlines()[0].split(" | ")) - 1  # no extra cell


@pytest.mark.parametrize("width", [None, 200, 80, 50])
def test_the_two_pass_table_is_the_whole_table(width):
    from nccl_bench.render.tables import results_lines, results_lines_streamed

    rows = _rows(4) + [row(size_bytes=1 << 40, flags="noisy;below_timer_resolution", pct_of_peak=12.5, peak_gbps=8.0)]
    reads = []

    def read():
        reads.append(1)
        return iter(rows)

    streamed = [line.plain for line in results_lines_streamed(read, width, title="run")]
    assert streamed == [line.plain for line in results_lines(rows, width, title="run")] and len(reads) == 2
