"""results.csv: what ResultsWriter appends, read_rows reads back unchanged, and its errors name the line."""

from __future__ import annotations

import json
import os
import re
from functools import partial
from pathlib import Path

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.input_lines import ResultsWarning
from nccl_bench.results.run_folder import write_meta
from nccl_bench.results.schema import (
    COLUMNS,
    PLACEMENT_OUT,
    STATUS_UNSUPPORTED,
)
from nccl_bench.results.whole_file import read_small_file, strict_json
from tests.helpers.rows import results_csv, row, write_run

# A gather row whose every kind of cell is there: an empty one, a tiny float, one with all its digits.
_row = partial(row, op="gather", placement=PLACEMENT_OUT, size_bytes=1024, count=128, dtype="float32", redop="none",
               root=0, iters=40, time_us=12.345678901234567, p50_us=1e-05, p99_us=None, algbw_gbps=0.1,
               busbw_gbps=0.05, busbw_factor=0.5, wrong=None, max_time_rank=None)


def test_none_is_an_empty_cell_and_reads_back_as_none(tmp_path):
    row = _row()
    text = results_csv(tmp_path, [row])
    assert text.splitlines()[0] == ",".join(COLUMNS)
    cells = dict(zip(COLUMNS, text.splitlines()[1].split(","), strict=False))
    assert (cells["wrong"], cells["time_min_us"], cells["max_time_rank"], cells["flags"]) == ("", "", "", "")
    assert read_rows(tmp_path) == [row]


def test_quoted_flags_survive_the_round_trip(tmp_path):
    rows = [_row(status=STATUS_UNSUPPORTED, flags='gloo: "gather" lacks, in-place\nsecond line'), _row(size_bytes=2048)]
    write_run(tmp_path, rows)
    assert read_rows(tmp_path) == rows


def test_a_cut_last_line_is_named_and_the_complete_rows_are_read(tmp_path):
    # The first row spans lines 2-3 (a quoted newline) and a blank line follows: the cut row is on line 5.
    rows = [_row(flags="a\nb"), _row(size_bytes=2048)]
    header, first_a, first_b, second, _ = results_csv(tmp_path, rows).split("\n")
    for cut_at in (-20, -3, -2):  # cut mid-row, before the last separator, right after it
        cut = "\n".join([header, first_a, first_b, "", second[:cut_at]])
        (tmp_path / "results.csv").write_text(cut, encoding="utf-8")
        with pytest.warns(ResultsWarning, match=r"line 5 is cut off .*; read the 1 complete row\(s\) before it"):
            assert read_rows(tmp_path) == rows[:1]


def test_a_cut_line_before_the_last_is_refused(tmp_path):
    header, first, second, _ = results_csv(tmp_path, [_row(), _row(size_bytes=2048)]).split("\n")
    (tmp_path / "results.csv").write_text("\n".join([header, first[:-20], second]) + "\n", encoding="utf-8")
    with pytest.raises(UserInputError, match=r"line 2 is incomplete"):
        read_rows(tmp_path)


def test_other_schema_version_and_extra_fields_are_refused(tmp_path):
    text = results_csv(tmp_path, [_row()])
    (tmp_path / "results.csv").write_text(text[: -len("6\n")] + "7\n", encoding="utf-8")
    with pytest.raises(UserInputError, match=r"has results format version 7; this nccl_bench reads versions 1, 2, 3, "
                                             r"4, 5 and 6 \(written by a newer nccl_bench"):
        read_rows(tmp_path)
    (tmp_path / "results.csv").write_text(text[:-1] + ",extra\n", encoding="utf-8")
    with pytest.raises(UserInputError, match=f"line 2 has {len(COLUMNS) + 1} fields, the header {len(COLUMNS)}"):
        read_rows(tmp_path)


def _as_version(text: str, version: int = 1) -> str:
    """A current results.csv rewritten as `version` wrote it: without the columns later versions added,
    renamed columns under their earlier names."""
    import csv
    import io

    from nccl_bench.results.schema import COLUMNS_ADDED, RENAMED

    lines = list(csv.reader(io.StringIO(text)))
    later = {name for added_in, names in COLUMNS_ADDED.items() if added_in > version for name in names}
    lines[0] = [RENAMED[name][1] if name in RENAMED and version < RENAMED[name][0] else name for name in lines[0]]
    keep = [i for i, name in enumerate(lines[0]) if name not in later]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for cells in lines:
        kept = [cells[i] for i in keep]
        writer.writerow(kept if cells is lines[0] else kept[:-1] + [str(version)])
    return out.getvalue()


def test_a_version_1_file_reads_with_the_new_columns_empty(tmp_path):
    row = _row(p95_us=3.5, cycle=2, group="node 1")
    version_1 = _as_version(results_csv(tmp_path, [row]))
    assert "p95_us" not in version_1 and version_1.splitlines()[1].endswith(",1")
    (tmp_path / "results.csv").write_text(version_1, encoding="utf-8")
    assert read_rows(tmp_path) == [_row()]  # p95_us None, cycle None, group "", as the current version


def test_a_version_4_file_reads_its_slowest_rank_as_max_time_rank(tmp_path):
    row = _row(max_time_rank=3, late_rank=2, i_p99_us=9.5)
    version_4 = _as_version(results_csv(tmp_path, [row]), 4)
    assert "slowest_rank" in version_4.splitlines()[0] and "max_time_rank" not in version_4
    (tmp_path / "results.csv").write_text(version_4, encoding="utf-8")
    assert read_rows(tmp_path) == [_row(max_time_rank=3)]  # the late and spike columns empty


def test_a_version_2_file_reads_with_no_variant(tmp_path):
    row = _row(p95_us=3.5, cycle=2, group="node 1", variant="NCCL_ALGO=Ring NCCL_PROTO=LL")
    version_2 = _as_version(results_csv(tmp_path, [row]), 2)
    assert "variant" not in version_2 and "p95_us" in version_2
    (tmp_path / "results.csv").write_text(version_2, encoding="utf-8")
    assert read_rows(tmp_path) == [_row(p95_us=3.5, cycle=2, group="node 1")]


def test_a_variant_reads_back_and_anything_else_in_its_cell_is_refused(tmp_path):
    row = _row(variant="NCCL_ALGO=Ring NCCL_PROTO=LL")
    text = results_csv(tmp_path, [row])
    assert read_rows(tmp_path) == [row]
    (tmp_path / "results.csv").write_text(text.replace("NCCL_ALGO=Ring NCCL_PROTO=LL", "=cmd|calc"), encoding="utf-8")
    with pytest.raises(UserInputError, match=re.escape("variant: '=cmd|calc' is not NCCL_NAME=value pairs")):
        read_rows(tmp_path)


def test_a_version_2_file_lacking_a_version_2_column_is_refused(tmp_path):
    text = results_csv(tmp_path, [_row()])
    header, line = text.splitlines()
    names, cells = header.split(","), line.split(",")
    at = names.index("p95_us")
    del names[at], cells[at]
    (tmp_path / "results.csv").write_text(",".join(names) + "\n" + ",".join(cells) + "\n", encoding="utf-8")
    with pytest.raises(UserInputError, match="lacks columns: p95_us"):
        read_rows(tmp_path)


def test_empty_file_is_one_clear_error(tmp_path):
    (tmp_path / "results.csv").write_text("\n")
    with pytest.raises(UserInputError, match="is empty"):
        read_rows(tmp_path)


def test_a_run_killed_before_its_first_row_has_no_rows_while_an_empty_csv_alone_is_refused(tmp_path):
    """The writer opens results.csv as the run starts and writes the header with the first row: a run
    folder (meta.json) whose file has 0 bytes is a run without rows, as one with no file is (a restarted
    attempt of a torchrun job reads it, and goes on); a 0-byte CSV without its meta.json is no run."""
    from nccl_bench.results.csv_appender import ResultsWriter

    run = tmp_path / "run"
    run.mkdir()
    ResultsWriter(run).close()
    assert (run / "results.csv").stat().st_size == 0
    with pytest.raises(UserInputError, match="is empty"):
        read_rows(run)
    (run / "meta.json").write_text("{}")
    assert read_rows(run) == [] and read_rows(run / "results.csv") == []


def test_load_frame_gives_typed_pandas_columns(tmp_path):
    import math

    from nccl_bench.results.csv_appender import ResultsWriter
    from nccl_bench.results.dataframe import load_frame
    from nccl_bench.results.schema import COLUMNS

    writer = ResultsWriter(tmp_path)
    measured = _row(op="all_reduce", wrong=0)
    unsupported = _row(op="sendrecv", time_us=None, busbw_gbps=None, wrong=None, max_time_rank=None,
                       status="unsupported")
    writer.append(measured)
    writer.append(unsupported)
    writer.close()
    frame = load_frame(tmp_path)
    assert list(frame.columns) == list(COLUMNS)
    assert str(frame["size_bytes"].dtype) == "int64" and str(frame["wrong"].dtype) == "Int64"
    assert str(frame["busbw_gbps"].dtype) == "float64"
    assert frame.loc[0, "busbw_gbps"] == measured.busbw_gbps and frame.loc[0, "wrong"] == 0
    assert math.isnan(frame.loc[1, "busbw_gbps"]) and frame["wrong"].isna().tolist() == [False, True]


def test_strict_json_refuses_a_non_finite_number_naming_where_it_is():
    assert strict_json({"peak": {"gbps": 1.5}}) == '{"peak": {"gbps": 1.5}}'
    for bad, where in (({"peak": {"gbps": float("inf")}}, "$.peak.gbps"), ([1.0, float("nan")], "$[1]")):
        with pytest.raises(ValueError, match=rf"refusing to write non-standard JSON: {re.escape(where)} is not a"):
            strict_json(bad)


def test_meta_json_with_a_non_finite_number_is_refused_and_the_old_one_kept(tmp_path):
    write_meta(tmp_path, {"status": "running"})
    with pytest.raises(ValueError, match=r"\$\.peak_gbps is not a finite number"):
        write_meta(tmp_path, {"status": "complete", "peak_gbps": float("inf")})
    assert json.loads((tmp_path / "meta.json").read_text()) == {"status": "running"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json"]


def test_small_files_are_read_and_anything_else_refused_unread(tmp_path):
    (tmp_path / "small").write_bytes(b"abc")
    assert read_small_file(tmp_path / "small", 3) == b"abc"
    (tmp_path / "large").write_bytes(b"abcd")
    with pytest.raises(OSError, match="4 bytes, more than the 3 it may have"):
        read_small_file(tmp_path / "large", 3)
    os.mkfifo(tmp_path / "fifo")  # opened without a writer: must not block
    for special in (tmp_path / "fifo", Path("/dev/zero")):
        with pytest.raises(OSError, match="not a regular file"):
            read_small_file(special, 1 << 20)


@pytest.mark.parametrize("cell, value, message", [
    ("size_bytes", "inf", "size_bytes: expected a whole number, got 'inf'"),
    ("size_bytes", "-1024", "size_bytes: must be at least 0, got -1024"),
    ("size_bytes", "1.5", "size_bytes: expected a whole number, got '1.5'"),
    ("world_size", "0", "world_size: must be at least 1, got 0"),
    ("busbw_gbps", "inf", "busbw_gbps: expected a finite number of at least 0, got inf"),
    ("time_us", "nan", "time_us: expected a finite number of at least 0, got nan"),
    ("time_us", "-3", "time_us: expected a finite number of at least 0, got -3.0"),
    ("op", "all_reduce|x", "op: 'all_reduce|x' is not a name (letters, digits, '_', '.', '-')"),
    ("backend", "gloo\x1b[2J", "backend: 'gloo\\x1b[2J' is not a name (letters, digits, '_', '.', '-')"),
    ("placement", "<b>in</b>", "placement: '<b>in</b>' is not a name (letters, digits, '_', '.', '-')"),
    ("flags", "=HYPERLINK(1)", "flags: '=HYPERLINK(1)' holds a control character or begins like a spreadsheet formula"),
    ("flags", "noisy\x1b]0;x\x07", "flags: 'noisy\\x1b]0;x\\x07' holds a control character"),
])
def test_cells_read_back_are_held_to_what_a_row_can_hold(tmp_path, cell, value, message):
    write_run(tmp_path, [_row()])
    header, line = (tmp_path / "results.csv").read_text().splitlines()
    cells = dict(zip(header.split(","), line.split(","), strict=True))
    cells[cell] = value
    (tmp_path / "results.csv").write_text(header + "\n" + ",".join(cells.values()) + "\n")
    with pytest.raises(UserInputError, match=re.escape(f"results.csv line 2: {message}")):
        read_rows(tmp_path)


def test_a_repeated_header_line_is_named_as_such(tmp_path):
    text = results_csv(tmp_path, [_row()])
    (tmp_path / "results.csv").write_text(text + text)
    with pytest.raises(UserInputError, match=r"line 3 repeats the header line \(files joined\?\); keep one header"):
        read_rows(tmp_path)


def test_a_device_given_as_the_output_is_written_in_place_never_replaced():
    """`--output /dev/full` (or /dev/null): the write goes to the device; a rename would put a regular
    file where the device node was, for every process on the host."""
    import os
    import stat

    from nccl_bench.errors import WriteFailedError
    from nccl_bench.results.whole_file import replace_whole, write_text_file

    replace_whole(Path("/dev/null"), "x\n")
    with pytest.raises(WriteFailedError, match="no space left on /dev/full"):
        write_text_file(Path("/dev/full"), "x" * 100_000)
    for device in ("/dev/null", "/dev/full"):
        assert stat.S_ISCHR(os.stat(device).st_mode), device


def test_a_link_to_a_processs_own_stdout_is_written_through_never_replaced(tmp_path):
    """`--json /dev/stdout` with stdout redirected to a file: /dev/stdout links to /proc/self/fd/1, a regular
    file then; a rename over it would put a file where the system's link was and leave stdout empty. The
    same link, made in tmp_path, is the case (the host's own /dev/stdout is never put at stake)."""
    import os
    import subprocess
    import sys

    link, captured = tmp_path / "stdout", tmp_path / "captured.txt"
    link.symlink_to("/proc/self/fd/1")
    write = f"from pathlib import Path; from nccl_bench.results.whole_file import replace_whole; " \
            f"replace_whole(Path({str(link)!r}), 'through the link\\n')"
    with open(captured, "w") as stdout:
        subprocess.run([sys.executable, "-c", write], stdout=stdout, check=True)
    assert captured.read_text() == "through the link\n"
    assert os.readlink(link) == "/proc/self/fd/1"


def test_a_link_to_a_file_stays_a_link_and_its_target_is_replaced_whole(tmp_path):
    from nccl_bench.results.whole_file import replace_whole

    target, link = tmp_path / "run.json", tmp_path / "latest.json"
    target.write_text("old\n")
    link.symlink_to(target.name)
    replace_whole(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.json", "run.json"]


def test_ranks_csv_lines_are_one_per_trial_and_rank_and_stay_small(tmp_path):
    from nccl_bench.results.csv_appender import RanksWriter
    from nccl_bench.results.schema import RANK_COLUMNS, rank_lines

    measured = _row(op="reduce_scatter", size_bytes=64 * 1024 ** 2, cycle=12)
    ranks = tuple(range(1020, 1024))
    in_op = ((123456.78, 123400.0, 99999.99, 123456.0), (1.0, 2.0, 3.0, 4.0))
    arrival = ((0.0, 12.34, 45678.91, 1.0), (0.0, 0.0, 0.0, 0.0))
    gaps = ((12.0, 11.0, 20001.24, None), (10.0, 10.0, 10.0, 10.0))
    lines = rank_lines(measured, ranks, in_op, arrival, (0.0, 0.0, 12.5, 12.5), gaps)
    assert len(lines) == 2 * 4 and [line[RANK_COLUMNS.index("rank")] for line in lines[:4]] == list(ranks)
    assert lines[2][RANK_COLUMNS.index("trial"):] == [0, 1022, "100000.0", "45678.9", "20001.2", "12.5", 1]  # to 0.1 us
    assert lines[3][RANK_COLUMNS.index("gap_us")] == ""  # not known (on GPU)
    writer = RanksWriter(tmp_path)
    writer.append_lines(lines)
    writer.close()
    text = (tmp_path / "ranks.csv").read_text()
    assert text.splitlines()[0] == ",".join(RANK_COLUMNS)
    # the longest lines a sweep writes (a 64M point, 4-digit ranks, 6-digit times, a 5-digit gap) stay under
    # 90 bytes: 1,024 ranks x 30 sizes x 1 trial is then under 2.8 MB
    assert max(len(line) + 1 for line in text.splitlines()[1:]) < 90
