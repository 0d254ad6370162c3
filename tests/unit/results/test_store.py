"""results.csv: what ResultsWriter appends, read_rows reads back unchanged, and its errors name the line."""

from __future__ import annotations

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.results.schema import (
    COLUMNS,
    PLACEMENT_OUT,
    STATUS_UNSUPPORTED,
    ResultRow,
)
from nccl_bench.results.store import ResultsWarning, ResultsWriter, read_rows


def _row(**changes) -> ResultRow:
    values = dict(
        op="gather", placement=PLACEMENT_OUT, size_bytes=1024, count=128, dtype="float32", redop="none", root=0,
        world_size=2, nodes=1, backend="gloo", iters=40, trials=1, time_us=12.345678901234567, time_min_us=None,
        time_max_us=None, p50_us=1e-05, p99_us=None, algbw_gbps=0.1, busbw_gbps=0.05, busbw_factor=0.5, wrong=None,
        slowest_rank=None, agg="max",
    )
    values.update(changes)
    return ResultRow(**values)


def _write(run_dir, rows) -> str:
    writer = ResultsWriter(run_dir)
    for row in rows:
        writer.append(row)
    writer.close()
    return (run_dir / "results.csv").read_text(encoding="utf-8")


def test_none_is_an_empty_cell_and_reads_back_as_none(tmp_path):
    row = _row()
    text = _write(tmp_path, [row])
    assert text.splitlines()[0] == ",".join(COLUMNS)
    cells = dict(zip(COLUMNS, text.splitlines()[1].split(","), strict=False))
    assert (cells["wrong"], cells["time_min_us"], cells["slowest_rank"], cells["flags"]) == ("", "", "", "")
    assert read_rows(tmp_path) == [row]


def test_quoted_flags_survive_the_round_trip(tmp_path):
    rows = [_row(status=STATUS_UNSUPPORTED, flags='gloo: "gather" lacks, in-place\nsecond line'), _row(size_bytes=2048)]
    _write(tmp_path, rows)
    assert read_rows(tmp_path) == rows


def test_a_cut_last_line_is_named_and_the_complete_rows_are_read(tmp_path):
    # The first row spans lines 2-3 (a quoted newline) and a blank line follows: the cut row is on line 5.
    rows = [_row(flags="a\nb"), _row(size_bytes=2048)]
    header, first_a, first_b, second, _ = _write(tmp_path, rows).split("\n")
    for cut_at in (-20, -3, -2):  # cut mid-row, before the last separator, right after it
        cut = "\n".join([header, first_a, first_b, "", second[:cut_at]])
        (tmp_path / "results.csv").write_text(cut, encoding="utf-8")
        with pytest.warns(ResultsWarning, match=r"line 5 is cut off .*; read the 1 complete row\(s\) before it"):
            assert read_rows(tmp_path) == rows[:1]


def test_a_cut_line_before_the_last_is_refused(tmp_path):
    header, first, second, _ = _write(tmp_path, [_row(), _row(size_bytes=2048)]).split("\n")
    (tmp_path / "results.csv").write_text("\n".join([header, first[:-20], second]) + "\n", encoding="utf-8")
    with pytest.raises(UserInputError, match=r"line 2 is incomplete"):
        read_rows(tmp_path)


def test_other_schema_version_and_extra_fields_are_refused(tmp_path):
    text = _write(tmp_path, [_row()])
    (tmp_path / "results.csv").write_text(text[: -len("2\n")] + "3\n", encoding="utf-8")
    with pytest.raises(UserInputError, match=r"has results format version 3; this nccl_bench reads versions 1 and 2 "
                                             r"\(written by a newer nccl_bench"):
        read_rows(tmp_path)
    (tmp_path / "results.csv").write_text(text[:-1] + ",extra\n", encoding="utf-8")
    with pytest.raises(UserInputError, match=f"line 2 has {len(COLUMNS) + 1} fields, the header {len(COLUMNS)}"):
        read_rows(tmp_path)


def _as_version_1(text: str) -> str:
    """A version-2 results.csv rewritten as version 1 wrote it: without the columns version 2 added."""
    import csv
    import io

    from nccl_bench.results.schema import COLUMNS_ADDED

    lines = list(csv.reader(io.StringIO(text)))
    keep = [i for i, name in enumerate(lines[0]) if name not in COLUMNS_ADDED[2]]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for cells in lines:
        kept = [cells[i] for i in keep]
        writer.writerow(kept if cells is lines[0] else kept[:-1] + ["1"])
    return out.getvalue()


def test_a_version_1_file_reads_with_the_new_columns_empty(tmp_path):
    row = _row(p95_us=3.5, cycle=2, group="node 1")
    version_1 = _as_version_1(_write(tmp_path, [row]))
    assert "p95_us" not in version_1 and version_1.splitlines()[1].endswith(",1")
    (tmp_path / "results.csv").write_text(version_1, encoding="utf-8")
    assert read_rows(tmp_path) == [_row()]  # p95_us None, cycle None, group "", as the current version


def test_a_version_2_file_lacking_a_version_2_column_is_refused(tmp_path):
    text = _write(tmp_path, [_row()])
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


def test_load_frame_gives_typed_pandas_columns(tmp_path):
    import math

    from nccl_bench.results.schema import COLUMNS
    from nccl_bench.results.store import ResultsWriter, load_frame

    writer = ResultsWriter(tmp_path)
    measured = _row(op="all_reduce", wrong=0)
    unsupported = _row(op="sendrecv", time_us=None, busbw_gbps=None, wrong=None, slowest_rank=None,
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
