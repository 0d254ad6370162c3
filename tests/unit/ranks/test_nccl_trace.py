"""--nccl-trace's file: NCCL pointed at a file of this rank's own, read from a mark on, removed at the end."""

from __future__ import annotations

from nccl_bench.ranks.nccl_trace import TuningTrace


def test_the_trace_points_nccl_at_its_own_file_and_reads_each_points_lines(tmp_path):
    environ = {"NCCL_DEBUG": "WARN"}
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
