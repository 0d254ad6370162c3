"""nccl-tests text logs read into rows (real logs from public bug reports: tests/fixtures/nccl_tests/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.results import nccltests_names, nccltests_rows
from nccl_bench.results.input_lines import ResultsWarning
from nccl_bench.results.loader import LogHints, load_rows
from nccl_bench.results.schema import PLACEMENT_IN, PLACEMENT_OUT
from tests.helpers.rows import log_rows, row_at

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"


def test_v2_20_all_reduce_log():
    rows = load_rows(FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt")
    assert len(rows) == 8
    assert {r.op for r in rows} == {"all_reduce"}
    assert {(r.world_size, r.nodes, r.iters, r.dtype, r.redop, r.root) for r in rows} == {
        (2, 2, 100, "float32", "sum", -1)
    }
    first_out = row_at(rows, 8192, PLACEMENT_OUT)
    assert (first_out.count, first_out.time_us, first_out.algbw_gbps, first_out.busbw_gbps) == (2048, 35.15, 0.23, 0.23)
    last_in = row_at(rows, 65536, PLACEMENT_IN)
    assert (last_in.time_us, last_in.busbw_gbps, last_in.wrong) == (64.71, 1.01, 0)
    assert last_in.busbw_factor == 1.0  # 2(n-1)/n with n = 2
    assert last_in.agg == "avg" and last_in.backend == "nccl"


def test_v2_17_all_gather_log_single_huge_size():
    rows = load_rows(FIXTURES / "v2.17.6_all_gather_perf_2ranks.txt")
    out, inp = row_at(rows, 17179869184, PLACEMENT_OUT), row_at(rows, 17179869184, PLACEMENT_IN)
    assert out.op == "all_gather" and out.redop == "none" and out.count == 2147483648
    assert (out.time_us, out.algbw_gbps, out.busbw_gbps) == (453650.0, 37.87, 18.94)
    assert (inp.time_us, inp.algbw_gbps, inp.busbw_gbps) == (410049.0, 41.90, 20.95)
    assert out.world_size == 2 and out.nodes == 2 and out.iters == 20
    assert out.busbw_factor == 0.5


def test_v2_19_one_gpu_logs_from_this_project_s_h100():
    """nccl-tests 2.19.6 with NCCL 2.28.9, -b 8 -e 64M -f 4 -g 1 on one H100 (benchmarks/gpu/): one rank,
    so all_gather's first size rounds down to 0 B and busbw is 0; sendrecv to itself has no in-place check."""
    rows = load_rows(FIXTURES / "v2.19.6_all_gather_perf_1gpu_h100.txt")
    assert len(rows) == 24 and {(r.op, r.world_size, r.nodes, r.iters) for r in rows} == {("all_gather", 1, 1, 20)}
    first = row_at(rows, 0, PLACEMENT_OUT)
    assert (first.count, first.time_us, first.algbw_gbps) == (0, 0.88, 0.0)
    out = row_at(rows, 33554432, PLACEMENT_OUT)
    assert (out.count, out.time_us, out.algbw_gbps) == (8388608, 26.05, 1288.2)
    assert (out.busbw_gbps, out.busbw_factor) == (0.0, 0.0)
    sendrecv = load_rows(FIXTURES / "v2.19.6_sendrecv_perf_1gpu_h100.txt")
    assert {(r.op, r.world_size) for r in sendrecv} == {("sendrecv", 1)}
    inp = row_at(sendrecv, 33554432, PLACEMENT_IN)
    assert (inp.time_us, inp.busbw_gbps, inp.wrong, inp.status) == (2.52, 13328.0, None, "ok")
    assert row_at(sendrecv, 33554432, PLACEMENT_OUT).wrong == 0


def test_old_layout_broadcast_without_redop_and_unchecked():
    """nccl 2.9-era broadcast_perf: no redop column, 'error' instead of '#wrong', N/A with -c 0."""
    rows = load_rows(FIXTURES / "nccl2.9.6_broadcast_perf_2ranks_c0.txt")
    assert len(rows) == 2
    out = row_at(rows, 8, PLACEMENT_OUT)
    assert (out.op, out.redop, out.root, out.count, out.dtype) == ("broadcast", "none", 0, 2, "float32")
    assert out.time_us == 45.82 and row_at(rows, 8, PLACEMENT_IN).time_us == 38.17
    assert out.wrong is None and out.status == "ok"
    assert out.world_size == 2 and out.nodes == 2 and out.iters == 100


def test_wrong_elements_and_elided_rows():
    """Header-only excerpt (no Rank lines, '...' in the middle): op from the file name, ranks from busbw/algbw."""
    rows = load_rows(FIXTURES / "all_reduce_perf_nccl2.18.3_wrong.txt")
    assert [r.size_bytes for r in rows] == [8, 8, 262144, 262144, 524288, 524288]
    bad = row_at(rows, 524288, PLACEMENT_OUT)
    assert (bad.time_us, bad.busbw_gbps, bad.wrong, bad.status) == (663.1, 0.79, 237858, "wrong")
    assert row_at(rows, 524288, PLACEMENT_IN).wrong == 238038
    assert row_at(rows, 262144, PLACEMENT_OUT).status == "ok"
    assert {r.op for r in rows} == {"all_reduce"} and {r.world_size for r in rows} == {2}


def test_bfloat16_all_gather_world_size_from_bandwidth_ratio():
    rows = load_rows(FIXTURES / "all_gather_perf_bfloat16_2gpus.txt")
    assert len(rows) == 14
    row = row_at(rows, 117440512, PLACEMENT_IN)
    assert (row.dtype, row.count, row.time_us, row.algbw_gbps, row.busbw_gbps) == (
        "bfloat16", 29360128, 418.7, 280.48, 140.24,
    )
    assert row.world_size == 2


def test_infer_world_size():
    assert nccltests_rows.infer_world_size("all_reduce", [(100.0, 175.0)]) == 8
    assert nccltests_rows.infer_world_size("all_gather", [(100.0, 75.0)]) == 4
    assert nccltests_rows.infer_world_size("broadcast", [(100.0, 100.0)]) is None
    assert nccltests_rows.infer_world_size("all_reduce", [(0.0, 0.0)]) is None


def test_binary_names_in_a_log_map_to_our_ops():
    text = "mpirun -np 2 /opt/nccl-tests/build/alltoall_perf_mpi -b 8 -e 1M\n" + _table_lines()
    assert {r.op for r in log_rows(text)} == {"all_to_all"}


def _table_lines() -> str:
    lines = (FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt").read_text().splitlines()
    return "\n".join(line for line in lines if "Collective test" not in line) + "\n"


def test_mpirun_output_tags_are_stripped():
    log = (FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt").read_text()
    tagged = "\n".join(f"[1,0]<stdout>:{line}" for line in log.splitlines())
    rows = log_rows(tagged)
    assert len(rows) == 8 and row_at(rows, 32768, PLACEMENT_OUT).time_us == 39.56


def test_concatenated_logs_keep_each_op():
    text = (FIXTURES / "v2.17.6_all_gather_perf_2ranks.txt").read_text() + (
        FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt"
    ).read_text()
    rows = log_rows(text)
    assert [r.op for r in rows].count("all_gather") == 2 and [r.op for r in rows].count("all_reduce") == 8


def test_text_without_results_is_a_user_error(tmp_path):
    path = tmp_path / "empty.log"
    path.write_text("# nThread 1 nGpus 1\nNCCL INFO nothing here\n")
    with pytest.raises(UserInputError, match="no nccl-tests result lines"):
        load_rows(path)


def _without_rank_lines(name: str) -> str:
    return "\n".join(line for line in (FIXTURES / name).read_text().splitlines() if "Rank" not in line)


def test_a_world_size_no_number_depends_on_is_left_unknown():
    """broadcast and sendrecv: busbw = algbw whatever the rank count, so a log without Rank lines is read
    as it is, its world size unknown, rather than asking for --ranks."""
    rows = log_rows(_without_rank_lines("nccl2.9.6_broadcast_perf_2ranks_c0.txt"), source="b.log")
    with_ranks = load_rows(FIXTURES / "nccl2.9.6_broadcast_perf_2ranks_c0.txt")
    assert {r.world_size for r in rows} == {None} and {r.world_size for r in with_ranks} == {2}
    assert [(r.busbw_gbps, r.busbw_factor) for r in rows] == [(r.busbw_gbps, r.busbw_factor) for r in with_ranks]
    sendrecv = load_rows(FIXTURES / "sendrecv_perf_8gpus_no_ranks.txt")
    assert len(sendrecv) == 8 and {(r.op, r.world_size, r.busbw_factor) for r in sendrecv} == {("sendrecv", None, 1.0)}
    assert row_at(sendrecv, 1073741824, PLACEMENT_IN).busbw_gbps == 195.56
    assert {r.world_size for r in load_rows(FIXTURES / "sendrecv_perf_8gpus_no_ranks.txt", hints=LogHints(ranks=8))} \
        == {8}


@pytest.mark.parametrize("name, ranks", [("v2.17.6_all_gather_perf_2ranks.txt", 2),
                                         ("all_gather_perf_bfloat16_2gpus.txt", 2)])
def test_all_gather_without_rank_lines_counts_its_ranks_from_size_and_count(name, ranks):
    """nccl-tests prints all_gather's per-rank count and the gathered size: size = count x type size x n."""
    rows = log_rows(_without_rank_lines(name), source=name)
    assert {r.world_size for r in rows} == {ranks}
    assert [r.busbw_gbps for r in rows] == [r.busbw_gbps for r in load_rows(FIXTURES / name)]


def test_counted_world_size_needs_every_line_to_agree():
    line = nccltests_rows.SizeLine(4096, 256, "float", "none", -1, ())
    assert nccltests_rows.counted_world_size("all_gather", [line]) == 4
    assert nccltests_rows.counted_world_size("reduce_scatter", [line]) == 4
    assert nccltests_rows.counted_world_size("all_reduce", [line]) is None  # its count is the whole buffer
    other = nccltests_rows.SizeLine(8192, 256, "float", "none", -1, ())
    assert nccltests_rows.counted_world_size("all_gather", [line, other]) is None
    odd = nccltests_rows.SizeLine(4096, 300, "float", "none", -1, ())
    assert nccltests_rows.counted_world_size("all_gather", [odd]) is None


def test_a_world_size_that_changes_busbw_and_cannot_be_known_is_asked_for():
    """all_reduce's factor is 2(n-1)/n: without Rank lines and with busbw/algbw too coarse, --ranks is asked."""
    with pytest.raises(UserInputError, match="cannot tell how many ranks ran all_reduce .*; pass --ranks$"):
        load_rows(FIXTURES / "tag_output_p5_fragment_no_ranks.txt", hints=LogHints(op="all_reduce"))


# ---- logs as they are shared: scheduler prefixes, lost '#', fragments, failed runs ----


def test_srun_label_prefixes_are_stripped():
    rows = load_rows(FIXTURES / "srun_label_all_reduce_perf_16ranks_2nodes.txt")
    assert len(rows) == 22
    assert {(r.op, r.world_size, r.nodes, r.iters, r.wrong) for r in rows} == {("all_reduce", 16, 2, 200, None)}
    assert row_at(rows, 8388608, PLACEMENT_OUT).busbw_gbps == 73.04
    assert row_at(rows, 8589934592, PLACEMENT_IN).time_us == 103538


def test_comment_lines_that_lost_their_hash_read_the_same():
    text = (FIXTURES / "srun_label_all_reduce_perf_16ranks_2nodes.txt").read_text()
    bare = "\n".join(line.replace(" 0: #", "", 1).strip() for line in text.splitlines())
    assert "# " not in bare and log_rows(bare, source="all_reduce_perf.log") == load_rows(
        FIXTURES / "srun_label_all_reduce_perf_16ranks_2nodes.txt"
    )


def test_a_fragment_without_op_name_is_read_from_busbw_over_algbw():
    rows = load_rows(FIXTURES / "gb200_nvl72_fragment_no_op_name.txt")
    assert len(rows) == 10
    assert {(r.op, r.world_size, r.busbw_factor) for r in rows} == {("all_reduce", 72, 2 * 71 / 72)}
    assert row_at(rows, 536870912, PLACEMENT_OUT).busbw_gbps == 586.06


def test_rows_before_a_failure_are_kept_with_a_warning_and_hints_fill_the_gaps():
    path = FIXTURES / "failed_after_rows_no_header_names.txt"
    # no header names, no Rank lines; busbw/algbw says all_reduce but allows many rank counts
    with pytest.raises(UserInputError, match=r"cannot tell how many ranks ran all_reduce .*; pass --ranks"):
        load_rows(path)
    failed = r"the run failed after 10 row\(s\); the log says: Test NCCL failure common.cu:1204"
    with pytest.warns(ResultsWarning, match=failed):
        rows = load_rows(path, hints=LogHints(ranks=256))
    assert {(r.op, r.world_size) for r in rows} == {("all_reduce", 256)}
    assert row_at(rows, 17179869184, PLACEMENT_IN).busbw_gbps == 367.44


def test_a_failed_run_without_rows_says_what_the_log_says():
    said = r"no result lines; the log says: Test NCCL failure common.cu:777 'unhandled system error'$"
    with pytest.raises(UserInputError, match=said):
        load_rows(FIXTURES / "nccl2.8.4_failed_before_rows.txt")


def test_tag_output_fragment_needs_op_and_ranks_hints():
    path = FIXTURES / "tag_output_p5_fragment_no_ranks.txt"
    with pytest.raises(UserInputError, match="pass --op$"):
        load_rows(path)
    rows = load_rows(path, hints=LogHints(op="all_reduce", ranks=16))
    first_two = [(r.size_bytes, r.placement, r.time_us) for r in rows][:2]
    assert first_two == [(8, PLACEMENT_OUT, 12.90), (8, PLACEMENT_IN, 12.87)]
    assert len(rows) == 6 and {r.world_size for r in rows} == {16}  # the cut last line is not a row


@pytest.mark.parametrize(
    "redop, root, algbw, busbw, expected",
    [
        ("sum", -1, 100.0, 175.0, "all_reduce"),
        ("sum", -1, 100.0, 75.0, "reduce_scatter"),
        ("none", -1, 100.0, 75.0, None),  # all_gather or all_to_all
        ("none", 0, 100.0, 100.0, "broadcast"),
        ("sum", 0, 100.0, 100.0, "reduce"),
        ("sum", -1, 100.0, 100.0, None),  # all_reduce on 2 ranks or sendrecv
    ],
)
def test_op_inferred_only_where_the_columns_leave_one_choice(redop, root, algbw, busbw, expected):
    half = f"    10.00  {algbw:6.2f}  {busbw:6.2f}      0"
    line = f"     1048576        262144     float  {redop:>6}  {root:>6}{half}{half}"
    if expected is None:
        with pytest.raises(UserInputError, match="pass --op"):
            log_rows(line)
    else:
        assert {r.op for r in log_rows(line, ranks=8)} == {expected}


def test_a_large_world_is_not_guessed_from_two_decimals():
    # 367.29 / 183.83 fits every all_reduce world from ~970 to ~1020 ranks
    assert nccltests_rows.infer_world_size("all_reduce", [(183.83, 367.29)]) is None
    assert nccltests_rows.infer_world_size("all_reduce", [(297.16, 586.06)]) == 72


def test_the_file_name_names_the_op_anywhere_in_it():
    line = "     1048576        262144     float     sum      -1" + "    10.00  100.00  100.00      0" * 2
    rows = log_rows(line, source="run3_reduce_scatter_perf_2nodes.log", ranks=2)
    assert {r.op for r in rows} == {"reduce_scatter"}


@pytest.mark.parametrize("file_name, op", [
    ("allreduce_16nodes.txt", "all_reduce"),
    ("sendrecv_8xa100.log", "sendrecv"),
    ("reducescatter-dgx2.txt", "reduce_scatter"),
    ("ALL-GATHER_h100.LOG", "all_gather"),
    ("AllToAllV-moe.txt", "all_to_allv"),
    ("all_to_all_64.log", "all_to_all"),
    ("alltoall.txt", "all_to_all"),
    ("nightly-Broadcast.log", "broadcast"),
    ("reduce_2.log", "reduce"),
])
def test_the_op_is_read_from_file_names_as_people_write_them(file_name, op):
    line = "     1048576        262144     float     sum      -1" + "    10.00  100.00  100.00      0" * 2
    assert {r.op for r in log_rows(line, source=f"/logs/{file_name}", ranks=2)} == {op}


@pytest.mark.parametrize("file_name", ["gathered_stats.txt", "prescatter.log", "run.log"])
def test_an_op_name_inside_a_longer_word_names_nothing(file_name):
    assert nccltests_names.op_of_file_name(file_name) is None


def test_the_log_s_own_op_name_wins_over_the_file_name():
    text = "# Collective test starting: all_gather_perf\n" + (
        "     1048576        262144     float    none      -1" + "    10.00  100.00  100.00      0" * 2)
    assert {r.op for r in log_rows(text, source="allreduce_16nodes.txt", ranks=2)} == {"all_gather"}
