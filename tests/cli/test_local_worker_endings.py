"""cli/local_workers: what the command says when its workers end, checked against meta.json.

A signal or a worker's death after the run's ending does not turn a complete run into an
interrupted or failed one: meta.json, stdout and the exit code agree.
"""

from __future__ import annotations

import pytest

from nccl_bench.cli import local_workers
from nccl_bench.errors import EXIT_INTERRUPTED, EXIT_RUN_FAILED, RunFailedError
from nccl_bench.ranks.faults import Interrupted
from nccl_bench.ranks.launch import VARIANT_ENV
from nccl_bench.results.run_folder import write_meta

KILLED = "1 of 2 local worker(s) ended without a report (killed by SIGKILL)"


def _ending(monkeypatch, status: str | None, raised: BaseException) -> None:
    def run_local_workers(workers, args, claimant, env=None):
        out = args[args.index("--out") + 1]
        if status is not None:
            write_meta(out, {"status": status, "rows": 2})
        raise raised

    monkeypatch.setattr(local_workers, "run_local_workers", run_local_workers)


def _run(tmp_path):
    return local_workers._run("sweep", 2, None, ["sweep", "--out", str(tmp_path / "run")], tmp_path / "run",
                              tmp_path / "run", [], ((),))


def test_a_signal_after_the_run_completed_leaves_it_complete(monkeypatch, tmp_path, capsys):
    _ending(monkeypatch, "complete", Interrupted("SIGTERM"))
    assert _run(tmp_path) == tmp_path / "run"
    assert capsys.readouterr().err == (
        "nccl-bench: note: SIGTERM arrived after the sweep had completed; nothing was lost\n")


def test_a_worker_killed_after_the_run_completed_is_a_note(monkeypatch, tmp_path, capsys):
    _ending(monkeypatch, "complete", RunFailedError(KILLED))
    assert _run(tmp_path) == tmp_path / "run"
    assert capsys.readouterr().err == ("nccl-bench: note: 1 of 2 local worker(s) ended without a report "
                                       "(killed by SIGKILL) after the sweep had completed; its results are whole\n")


@pytest.mark.parametrize("status, raised, code", [
    ("interrupted", Interrupted("SIGTERM"), EXIT_INTERRUPTED),
    ("running", RunFailedError(KILLED), EXIT_RUN_FAILED),
    ("complete", RunFailedError("", 1, quiet=True), 1),  # a rank's negative verdict, said by the rank
])
def test_an_ending_before_completion_keeps_its_code(monkeypatch, tmp_path, status, raised, code):
    _ending(monkeypatch, status, raised)
    with pytest.raises((SystemExit, RunFailedError)) as info:
        _run(tmp_path)
    assert getattr(info.value, "code", getattr(info.value, "exit_code", None)) == code


def test_a_complete_earlier_variant_does_not_make_a_killed_later_one_complete(monkeypatch, tmp_path, capsys):
    started = []

    def run_local_workers(workers, args, claimant, env=None):
        started.append(env)
        out = args[args.index("--out") + 1]
        if len(started) == 1:  # the first variant ends whole, as its ranks record it
            write_meta(out, {"status": "complete", "rows": 2, "variant": "NCCL_ALGO=Ring"})
            return
        raise RunFailedError(KILLED)  # the second one's workers are killed before meta.json changes

    monkeypatch.setattr(local_workers, "run_local_workers", run_local_workers)
    with pytest.raises(RunFailedError, match="killed by SIGKILL"):
        local_workers._run("sweep", 2, None, ["sweep", "--out", str(tmp_path / "run")], tmp_path / "run",
                           tmp_path / "run", [], [(("NCCL_ALGO", "Ring"),), (("NCCL_ALGO", "Tree"),)])
    assert started == [{"NCCL_ALGO": "Ring", VARIANT_ENV: "1/2"},
                       {"NCCL_ALGO": "Tree", VARIANT_ENV: "2/2"}]
    assert "completed" not in capsys.readouterr().err
