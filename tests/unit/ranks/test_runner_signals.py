"""SIGTERM/SIGINT during a sweep: a row lands whole, and the run always ends with a final meta.json."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import pytest

from nccl_bench.config import SweepConfig
from nccl_bench.ranks import faults, sweep
from nccl_bench.results.store import read_meta


def _sigterm_self(*_args) -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before this call returns


class _Observer:
    def __init__(self, on_started=None):
        self.rows, self.finished_with, self._on_started = [], None, on_started

    def started(self, header, total_points):
        if self._on_started:
            self._on_started()

    def row_done(self, row):
        self.rows.append(row)

    def finished(self, summary):
        self.finished_with = summary.status


def test_a_signal_while_a_row_is_recorded_is_raised_after_the_table_shows_it():
    summary, observer, row = sweep.SweepSummary(run_dir=None), _Observer(), object()
    writer = SimpleNamespace(append=_sigterm_self)
    with faults.signals_raise_interrupted():
        with pytest.raises(faults.Interrupted, match="SIGTERM"):
            sweep._record(row, summary, writer, observer)
    assert summary.rows == [row] and observer.rows == [row]


def _run_rank0(tmp_path, monkeypatch, observer, writer_close=lambda: None):
    """sweep._run on rank 0 with no process group: header, peak and measurement stubbed out."""
    header = sweep.RunHeader(
        backend="gloo", launcher="torchrun", world_size=1, nodes=1, hostnames=("h",), devices=("cpu",),
        versions={}, sizes="1K", iterations="2", warmup=0, trials=1, dtype="float32", reduce_op="sum",
        agg="max", run_dir=tmp_path,
    )
    monkeypatch.setattr(sweep, "_collect_header", lambda *a: (header, {"hostnames": ["h"], "devices": ["cpu"]}))
    monkeypatch.setattr(sweep, "_reference_peak", lambda *a: (None, None))
    monkeypatch.setattr(sweep, "_measure_all", lambda *a: None)
    monkeypatch.setattr(sweep, "ResultsWriter", lambda run_dir: SimpleNamespace(close=writer_close))
    monkeypatch.setattr(faults.dist, "mark_leaving", lambda ctx: None)  # no store here, and no peers
    monkeypatch.setattr(faults.dist, "local_peer_states", lambda ctx: {})
    summary = sweep.SweepSummary(run_dir=tmp_path)
    ctx = SimpleNamespace(rank=0, world_size=1)
    with faults.signals_raise_interrupted():
        sweep._run(SweepConfig(ops=("all_reduce",)), ctx, None, [], summary, observer, ["nccl-bench"])
    return summary


def test_a_signal_after_the_last_row_still_leaves_a_complete_run(tmp_path, monkeypatch):
    observer = _Observer()
    summary = _run_rank0(tmp_path, monkeypatch, observer, writer_close=_sigterm_self)
    assert summary.status == "complete" and read_meta(tmp_path)["status"] == "complete"
    assert observer.finished_with == "complete"


def test_a_signal_right_after_the_first_meta_json_ends_it_as_interrupted(tmp_path, monkeypatch):
    observer = _Observer(on_started=_sigterm_self)
    with pytest.raises(faults.Interrupted):
        _run_rank0(tmp_path, monkeypatch, observer)
    assert read_meta(tmp_path)["status"] == "interrupted"
    assert observer.finished_with == "interrupted"
