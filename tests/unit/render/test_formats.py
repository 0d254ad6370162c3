"""--format renderers, the JSON results schema and its version check, and load_rows dispatch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nccl_bench.errors import OptionError, UserInputError
from nccl_bench.render import formats as render_formats
from nccl_bench.results import loader
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.schema import (
    COLUMNS,
    PLACEMENT_IN,
    SCHEMA_VERSION,
    ResultRow,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"


def _rows() -> list[ResultRow]:
    common = dict(
        count=256, dtype="float32", redop="sum", root=-1, world_size=2, nodes=1, backend="gloo", iters=100, trials=3,
        time_min_us=None, time_max_us=None, p99_us=None, busbw_factor=1.0, max_time_rank=1, agg="max",
    )
    return [
        ResultRow(op="all_reduce", placement=PLACEMENT_IN, size_bytes=1024, time_us=1363.6171875, p50_us=585.4,
                  algbw_gbps=0.000750929, busbw_gbps=0.000750929, wrong=0, **common),
        ResultRow(op="all_reduce", placement=PLACEMENT_IN, size_bytes=1048576, time_us=2274.876, p50_us=None,
                  algbw_gbps=0.46093681, busbw_gbps=0.46093681, wrong=None, peak_gbps=25.0, pct_of_peak=1.84374724,
                  flags="noisy", **common),
    ]


def test_csv_is_the_results_csv_contract(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text(render_formats.to_csv(_rows()))
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    assert read_rows(path) == _rows()


def test_json_round_trip_keeps_every_value():
    document = json.loads(render_formats.to_json(_rows()))
    assert document["format"] == "nccl_bench.results" and document["schema_version"] == SCHEMA_VERSION
    assert document["columns"] == list(COLUMNS)
    assert document["rows"][1]["p50_us"] is None
    assert loader.rows_from_json(document, "x.json", "RUN") == _rows()


@pytest.mark.parametrize("version, words", [(SCHEMA_VERSION + 1, "newer nccl_bench"), (0, "older nccl_bench")])
def test_json_of_another_version_says_which(tmp_path, version, words):
    document = json.loads(render_formats.to_json(_rows()))
    document["schema_version"] = version
    path = tmp_path / "old.json"
    path.write_text(json.dumps(document))
    with pytest.raises(UserInputError) as caught:
        loader.load_rows(path)
    message = str(caught.value)
    readable = f"this nccl_bench reads versions 1, 2, 3, 4, 5 and {SCHEMA_VERSION}"
    assert f"has results format version {version}; {readable}" in message
    assert words in message and caught.value.option == "RUN"


def test_json_row_missing_a_column(tmp_path):
    document = json.loads(render_formats.to_json(_rows()))
    del document["rows"][0]["busbw_gbps"]
    with pytest.raises(UserInputError, match="row 0 lacks columns: busbw_gbps"):
        loader.rows_from_json(document, "x.json", "RUN")


def test_markdown_table_has_the_terminal_tables_columns_p50_and_iters_included():
    text = render_formats.to_markdown(_rows())
    lines = text.splitlines()
    assert lines[0] == ("| op | placement | size (B) | count (elements) | type | redop | root | iters | time (us)"
                        " | p50 (us) | p95 (us) | p99 (us)"
                        " | algbw (GB/s) | busbw (GB/s) | %peak | #wrong | flags |")
    assert len(lines) == 4 and text.endswith("\n")
    assert lines[3] == (
        "| all_reduce | in | 1,048,576 | 256 | float32 | sum | -1 | 100 | 2,274.9"
        " | - | - | - | 0.46 | 0.46 | 1.8 | N/A | noisy |"
    )


def test_unknown_format_is_named_by_its_key():
    """Below cli/ an option is known by its key; `report --format xml` names the flag (tests/cli)."""
    with pytest.raises(OptionError, match="fmt: unknown format 'xml'") as refused:
        render_formats.check_format("xml")
    assert refused.value.key == "fmt"


def test_load_rows_tells_inputs_apart(tmp_path):
    run = tmp_path / "run1"
    run.mkdir()
    (run / "results.csv").write_text(render_formats.to_csv(_rows()))
    (tmp_path / "export.json").write_text(render_formats.to_json(_rows()))
    assert loader.load_rows(run) == _rows()
    assert loader.load_rows(run / "results.csv") == _rows()
    assert loader.load_rows(tmp_path / "export.json") == _rows()
    # nccl-tests text and -J JSON, whatever their file names
    shutil.copy(FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt", tmp_path / "anything.out")
    shutil.copy(FIXTURES / "constructed_v3_all_reduce_perf.json", tmp_path / "nccl.json")
    assert len(loader.load_rows(tmp_path / "anything.out")) == 8
    assert len(loader.load_rows(tmp_path / "nccl.json")) == 4


def test_load_rows_errors_name_the_option(tmp_path):
    with pytest.raises(UserInputError, match="no results found"):
        loader.load_rows(tmp_path / "missing", "BASELINE")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserInputError, match="is not valid JSON"):
        loader.load_rows(bad)
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(UserInputError, match="neither an nccl_bench JSON export nor nccl-tests -J output"):
        loader.load_rows(other)


def test_run_labels_are_unique(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name / "x").mkdir(parents=True)
        (tmp_path / name / "x" / "results.csv").write_text(render_formats.to_csv(_rows()))
    runs = loader.load_runs([tmp_path / "a" / "x", tmp_path / "b" / "x" / "results.csv"])
    assert [label for label, _ in runs] == ["x", "x (2)"]


def test_output_paths_fail_up_front(tmp_path):
    assert render_formats.check_output_file(None, "--plot") is None
    with pytest.raises(UserInputError, match="--plot: .* should end in .png"):
        render_formats.check_output_file(tmp_path / "p.jpg", "--plot", suffix=".png")
    with pytest.raises(UserInputError, match="does not exist"):
        render_formats.check_output_file(tmp_path / "no" / "p.png", "--plot", suffix=".png")
    with pytest.raises(UserInputError) as info:
        render_formats.check_output_file(tmp_path / "missing" / "r.xml", "--junit")
    assert info.value.option == "--junit"
    with pytest.raises(UserInputError, match="is a directory"):
        render_formats.check_output_file(tmp_path, "--json")
    assert render_formats.check_output_file(tmp_path / "ok.md", "--markdown") == tmp_path / "ok.md"


def test_a_version_1_json_export_reads_with_the_new_columns_empty():
    from nccl_bench.results.schema import COLUMNS_ADDED

    document = json.loads(render_formats.to_json(_rows()))
    document["schema_version"] = 1
    later = [name for version in (2, 3, 4, 5) for name in COLUMNS_ADDED[version]]
    document["columns"] = ["slowest_rank" if c == "max_time_rank" else c for c in document["columns"] if c not in later]
    for record in document["rows"]:
        for name in later:
            del record[name]
        record["slowest_rank"] = record.pop("max_time_rank")
        record["schema_version"] = 1
    assert loader.rows_from_json(document, "x.json", "RUN") == _rows()
