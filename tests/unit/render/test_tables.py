"""The results table's cells and summary: sample lengths, labels shared with compare."""

from __future__ import annotations

from functools import partial

from nccl_bench import comparison as cmp
from nccl_bench.render import compare_exports, labels
from nccl_bench.render.tables import result_columns, sample_span
from tests.helpers.rows import row

_row = partial(row, dtype="float32", spread=0.0, p50_us=None, p99_us=None, busbw=1.0)


def test_sample_span_is_iters_times_the_fastest_trial():
    rows = [_row(size_bytes=1024, iters=500, time_us=400.0), _row(size_bytes=2048, iters=16, time_us=402.0),
            _row(size_bytes=4096, iters=0, time_us=None)]
    shortest_ms, longest_ms, row = sample_span(rows)
    assert (shortest_ms, longest_ms, row.size_bytes) == (16 * 402.0 / 1e3, 500 * 400.0 / 1e3, 2048)
    assert sample_span([_row(size_bytes=4096, iters=0, time_us=None)]) is None


def test_one_label_table_names_every_column_everywhere():
    headings = {f"{c.name} {c.unit}".strip() for c in result_columns()}
    assert {"time (us)", "p50 (us)", "busbw (GB/s)", "%peak", "#wrong", "flags", "placement", "size (B)"} <= headings
    assert compare_exports.comparison_headings()[1] == labels.heading("size_bytes") == "size (B)"
    assert compare_exports._metric_label(cmp.METRIC_BUSBW) == labels.heading("busbw_gbps") == "busbw (GB/s)"
    assert compare_exports._metric_label(cmp.METRIC_TIME) == labels.heading("time_us") == "time (us)"


def test_compare_json_names_the_paths_without_an_option_word(tmp_path):
    from nccl_bench.render.formats import to_csv

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.csv").write_text(to_csv([_row(size_bytes=1 << 20, iters=10, time_us=100.0)]))
    from nccl_bench.results.loader import read_run

    result = cmp.compare_runs(read_run(tmp_path / "a", "BASELINE"), read_run(tmp_path / "b", "CURRENT"))
    data = compare_exports.to_json(result)
    assert (data["baseline"], data["current"]) == (str(tmp_path / "a"), str(tmp_path / "b"))
    assert result.baseline_label == f"BASELINE {tmp_path / 'a'}"  # error messages still name the argument


def test_the_summary_says_each_expected_figure_after_the_averages_and_nothing_without_one():
    from nccl_bench.render.tables import summary_lines
    from nccl_bench.sweep.sweep_report import SweepSummary

    sentence = "all_reduce 1G: 455 GB/s = 97% of the 466.35 GB/s measured on 8xH100 SXM (https://example.org/x)"
    lines = summary_lines(SweepSummary(run_dir=None, rows=[_row(size_bytes=1024, iters=10, time_us=5.0)],
                                       expected=[sentence]))
    assert lines[:2] == ["# Avg bus bandwidth (all_reduce, in): 1.000 GB/s", f"# expected: {sentence}"]
    plain = summary_lines(SweepSummary(run_dir=None, rows=[_row(size_bytes=1024, iters=10, time_us=5.0)]))
    assert not any("expected" in line for line in plain)


def test_the_set_up_line_says_each_cost_the_run_has_in_its_unit():
    from nccl_bench.render.tables import setup_lines

    assert setup_lines({}) == []
    assert setup_lines({"init_s": 0.0123, "first_op_s": 2.5}) == [
        "# set-up (slowest rank): process group 12.3 ms, first collective 2.50 s"]
    assert setup_lines({"init_s": 1.0, "first_op_s": 0.001, "split_s": 0.25})[0].endswith(
        "process group 1.00 s, first collective 1.0 ms, split groups 250.0 ms")


def test_header_lines_keep_names_from_files_and_hosts_inside_their_lines():
    from pathlib import Path

    from nccl_bench.ranks.run_facts import RunFacts
    from nccl_bench.render.tables import header_lines, results_lines
    from nccl_bench.sweep.sweep_report import SweepHeader

    run = RunFacts(backend="gloo", launcher="torchrun", world_size=2, hostnames=("vm\n# forged", "vm2"),
                   devices=("cpu\t1",) * 2, versions={"torch": "2.x"}, run_dir=Path("out\nX"))
    header = SweepHeader(run=run, sizes="1K", iterations="3", warmup=1, trials=1, dtype="float32", reduce_op="sum",
                         agg="max", notes=("a note\u2028beside",))
    lines = header_lines(header)
    assert lines[0] == "# nccl_bench: backend gloo via torchrun, 2 ranks on 2 node(s) (vm\\x0a# forged, vm2)"
    assert lines[1] == "# devices: 2 x cpu\\x091"
    assert lines[-2:] == ["# results: out\\x0aX", "# note: a note\\u2028beside"]
    assert all(line.startswith("#") and len(line.splitlines()) == 1 for line in lines)
    title = results_lines([row()], None, title="run\n# op  forged")[0].plain
    assert title == "# run: run\\x0a# op  forged"
