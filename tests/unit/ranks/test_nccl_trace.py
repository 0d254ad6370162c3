"""--nccl-trace's file: NCCL pointed at a file of this rank's own, read from a mark on, removed at the end."""

from __future__ import annotations

import pytest

from nccl_bench.ranks.nccl_trace import TuningTrace, debug_conflict


def test_the_trace_points_nccl_at_its_own_file_and_reads_each_points_lines(tmp_path):
    environ = {}
    trace = TuningTrace.start(3, environ)
    try:
        assert environ == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING", "NCCL_DEBUG_FILE": str(trace.path)}
        assert trace.path.name == "nccl-debug.rank3.log"
        trace.mark()
        assert trace.lines_since_mark() == []  # NCCL has not written yet
        trace.path.write_text("h:1:1 [0] NCCL INFO NCCL version 2.26.2+cuda12.2\n")
        trace.mark()  # a point starts after the version line
        with open(trace.path, "a") as handle:
            handle.write("h:1:1 [0] NCCL INFO AllReduce: 4 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..0}\n")
        assert trace.lines_since_mark() == [
            "h:1:1 [0] NCCL INFO AllReduce: 4 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..0}"]
        assert trace.lines_since_mark() == []  # read once
    finally:
        trace.close()
    assert not trace.path.parent.exists()


def test_a_long_point_is_read_from_its_last_whole_lines(monkeypatch):
    from nccl_bench.ranks import nccl_trace

    monkeypatch.setattr(nccl_trace, "MAX_READ_BYTES", 100)
    trace = TuningTrace.start(0, {})
    try:
        trace.mark()
        trace.path.write_text("".join(f"line {i:03d} of the point's ops\n" for i in range(20)))  # 30 B a line
        lines = trace.lines_since_mark()
        assert lines == ["line 017 of the point's ops", "line 018 of the point's ops", "line 019 of the point's ops"]
    finally:
        trace.close()


def test_nccl_trace_keeps_the_users_debug_level_and_subsystems():
    environ = {"NCCL_DEBUG": "TRACE", "NCCL_DEBUG_SUBSYS": "INIT,TUNING"}
    trace = TuningTrace.start(0, environ)
    trace.close()
    assert (environ["NCCL_DEBUG"], environ["NCCL_DEBUG_SUBSYS"]) == ("TRACE", "INIT,TUNING")
    environ = {"NCCL_DEBUG": "info"}  # NCCL's default subsystems kept beside the trace's
    TuningTrace.start(0, environ).close()
    assert environ["NCCL_DEBUG_SUBSYS"] == "INIT,BOOTSTRAP,ENV,TUNING"


@pytest.mark.parametrize("environ, problem", [
    ({"NCCL_DEBUG": "WARN"}, "needs NCCL_DEBUG=INFO (its tuning lines are INFO lines), and NCCL_DEBUG=WARN is set"),
    ({"NCCL_DEBUG_SUBSYS": "INIT,NET"}, "NCCL_DEBUG_SUBSYS=INIT,NET leaves it out"),
    ({"NCCL_DEBUG_SUBSYS": "^TUNING"}, "NCCL_DEBUG_SUBSYS=^TUNING leaves it out"),
    ({"NCCL_DEBUG_FILE": "/tmp/nccl.%h.%p"}, "NCCL_DEBUG_FILE=/tmp/nccl.%h.%p is set; unset it"),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "^NET"}, None),
    ({"NCCL_DEBUG": "ABORT", "NCCL_DEBUG_SUBSYS": "ALL"}, None),
    ({}, None),
])
def test_nccl_trace_refuses_debug_settings_it_cannot_keep(environ, problem):
    found = debug_conflict(environ)
    assert found == problem if problem is None else problem in found


def test_nccl_trace_keeps_rank_0s_log_in_the_run_folder_never_a_deleted_path(tmp_path):
    environ = {}
    trace = TuningTrace.start(0, environ)
    trace.path.write_text("h:1:1 [0] NCCL WARN NET/Socket : no interface found\n")
    trace.keep(tmp_path, environ)
    trace.close()
    kept = tmp_path / "nccl-debug.rank0.log"
    assert environ["NCCL_DEBUG_FILE"] == str(kept) and "NCCL WARN" in kept.read_text()
