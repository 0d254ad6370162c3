"""A run folder is claimed atomically: of runs started at once on one folder exactly one gets it, a
default name is numbered instead of shared, and a run's own later processes take the folder it claimed."""

from __future__ import annotations

import datetime as _dt
import multiprocessing
import os
import socket
import warnings

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.results.run_folder import (
    CLAIM_FILE,
    ClaimWarning,
    claim_holder,
    claim_run_dir,
    find_claimed,
    new_run_dir,
    process_start,
    release_run_dir,
)
from tests.helpers.processes import dead_pid
from tests.helpers.races import race

RACERS = 8


def test_of_threads_racing_on_one_named_folder_exactly_one_gets_it(tmp_path):
    target = tmp_path / "out"
    outcomes = race(RACERS, lambda i: claim_run_dir(target, "--out", f"run {i}"))
    won = [o for o in outcomes if not isinstance(o, UserInputError)]
    refused = [o for o in outcomes if isinstance(o, UserInputError)]
    assert won == [target] and len(refused) == RACERS - 1
    assert {exc.option for exc in refused} == {"--out"}
    assert all("is taken by another run" in exc.problem for exc in refused)
    assert claim_holder(target) == f"run {outcomes.index(target)}"


def test_threads_racing_on_one_default_name_each_get_their_own_folder(tmp_path):
    base = new_run_dir(tmp_path / "results", ["all_reduce"], _dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=_dt.timezone.utc))
    outcomes = race(RACERS, lambda i: claim_run_dir(base, "--results-root", f"run {i}", numbered=True))
    assert len(set(outcomes)) == RACERS
    assert sorted(p.name for p in outcomes) == sorted(
        [base.name] + [f"{base.name}-{n}" for n in range(2, RACERS + 1)])
    assert {claim_holder(p) for p in outcomes} == {f"run {i}" for i in range(RACERS)}


def _claim_in_process(target, i, queue, done):
    try:
        claim_run_dir(target, "--out", f"process {i}")
        queue.put("won")
    except UserInputError as exc:
        queue.put(exc.problem)
    done.wait(60)  # alive until every racer answered: a claim whose process is gone may be taken over


def test_of_processes_racing_on_one_named_folder_exactly_one_gets_it(tmp_path):
    context = multiprocessing.get_context("fork")
    queue, done = context.Queue(), context.Event()
    target = tmp_path / "deep" / "out"
    processes = [context.Process(target=_claim_in_process, args=(target, i, queue, done)) for i in range(4)]
    for process in processes:
        process.start()
    answers = [queue.get(timeout=60) for _ in processes]
    done.set()
    for process in processes:
        process.join(60)
    assert answers.count("won") == 1
    assert all("is taken by another run" in a for a in answers if a != "won")


def test_a_run_takes_the_folder_it_claimed_again_and_nobody_else_does(tmp_path):
    target = claim_run_dir(tmp_path / "out", "--out", "mine")
    (target / "results.csv").write_text("x\n")
    assert claim_run_dir(target, "--out", "mine") == target  # a restarted attempt, or the CLI's rank 0
    with pytest.raises(UserInputError, match="already exists and is not empty"):
        claim_run_dir(target, "--out", "theirs")


def test_a_folder_with_files_nobody_claimed_is_refused_and_left_as_it_was(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "results.csv").write_text("x\n")
    with pytest.raises(UserInputError, match="already exists and is not empty"):
        claim_run_dir(tmp_path / "old", "--out", "me")
    assert [p.name for p in (tmp_path / "old").iterdir()] == ["results.csv"]


def test_an_empty_folder_the_user_made_is_taken_and_given_back_empty(tmp_path):
    (tmp_path / "empty").mkdir()
    claim_run_dir(tmp_path / "empty", "--out", "me")
    assert [p.name for p in (tmp_path / "empty").iterdir()] == [CLAIM_FILE]
    release_run_dir(tmp_path / "empty", made=False)
    assert (tmp_path / "empty").is_dir() and not any((tmp_path / "empty").iterdir())
    made = claim_run_dir(tmp_path / "new", "--out", "me")
    release_run_dir(made, made=True)
    assert not made.exists()


def test_a_folder_with_results_is_never_given_back(tmp_path):
    made = claim_run_dir(tmp_path / "new", "--out", "me")
    (made / "meta.json").write_text("{}")
    release_run_dir(made, made=True)
    assert sorted(p.name for p in made.iterdir()) == [CLAIM_FILE, "meta.json"]


def test_a_restarted_attempt_finds_the_folder_its_run_claimed(tmp_path):
    root = tmp_path / "results"
    claim_run_dir(root / "a", "--results-root", "other")
    mine = claim_run_dir(root / "b", "--results-root", "job 7")
    assert find_claimed(root, "job 7") == mine
    assert find_claimed(root, "job 8") is None
    assert find_claimed(tmp_path / "nowhere", "job 7") is None


def test_a_csv_started_afresh_drops_an_earlier_attempts_lines_and_an_appended_one_keeps_them(tmp_path):
    from nccl_bench.results.csv_appender import CsvAppender

    path = tmp_path / "doctor.csv"
    for start_afresh, expected in ((False, ["a,b", "1,2"]), (False, ["a,b", "1,2", "1,2"]),
                                   (True, ["a,b", "1,2"])):
        writer = CsvAppender(path, ["a", "b"], start_afresh=start_afresh)
        writer.append_cells([1, 2])
        writer.close()
        assert path.read_text().splitlines() == expected


def _claim_file(folder, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CLAIM_FILE).write_text(text)
    return folder


def test_a_claim_names_its_process_and_when_it_started(tmp_path):
    claim_run_dir(tmp_path / "out", "--out", "mine")
    token, owner = (tmp_path / "out" / CLAIM_FILE).read_text().splitlines()
    assert token == "mine" and claim_holder(tmp_path / "out") == "mine"
    assert owner.startswith(f"owner pid={os.getpid()} start={process_start(os.getpid())} boot=")
    assert owner.endswith(f" host={socket.gethostname()}")


@pytest.mark.parametrize("owner", [
    "owner pid={dead} start=1 boot= host={host}",  # killed: its pid is free
    "owner pid={me} start=1 boot= host={host}",  # its pid now another program's (started at another time)
    "owner pid={me} start={my_start} boot=not-this-boot host={HOST}.",  # before this host restarted; DNS case
    "",  # an older claim: its token's pid, dead
])
def test_a_claim_whose_process_is_gone_is_taken_over_with_a_note(tmp_path, owner):
    host = socket.gethostname()
    text = owner.format(dead=dead_pid(), me=os.getpid(), my_start=process_start(os.getpid()), host=host,
                        HOST=host.upper())
    folder = _claim_file(tmp_path / "out", f"pid {dead_pid()} on {host}, 0123abcd\n{text}\n")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert claim_run_dir(folder, "--out", "next run") == folder
    assert claim_holder(folder) == "next run"
    [note] = [str(w.message) for w in said if issubclass(w.category, ClaimWarning)]
    assert note.startswith(f"{folder} was claimed by a run that is gone (pid ") and note.endswith("this run takes it")


def test_a_claim_whose_process_lives_or_is_on_another_host_is_refused_with_how_to_free_it(tmp_path):
    host = socket.gethostname()
    alive = f"owner pid={os.getpid()} start={process_start(os.getpid())} boot= host={host}"
    folder = _claim_file(tmp_path / "alive", f"pid {os.getpid()} on {host}, 0123abcd\n{alive}\n")
    with pytest.raises(UserInputError) as refused:
        claim_run_dir(folder, "--out", "next run")
    assert refused.value.problem == (
        f"{folder} is taken by another run (pid {os.getpid()} on {host}, 0123abcd); give each run its own folder, "
        f"or if that run is gone, remove {folder / CLAIM_FILE} (pid {os.getpid()} is still running here)")
    far = _claim_file(tmp_path / "far", "pid 1 on nodea, 0123abcd\nowner pid=1 start=5 boot=x host=nodea\n")
    with pytest.raises(UserInputError) as refused:
        claim_run_dir(far, "--out", "next run")
    assert refused.value.problem.endswith(f"remove {far / CLAIM_FILE} (check with `ps -p 1` on nodea)")
    assert "\n" not in refused.value.problem
    assert claim_holder(far) == "pid 1 on nodea, 0123abcd"


def test_of_runs_racing_for_one_stale_claim_exactly_one_takes_it(tmp_path):
    folder = _claim_file(tmp_path / "out", f"pid {dead_pid()} on {socket.gethostname()}, 0123abcd\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcomes = race(RACERS, lambda i: claim_run_dir(folder, "--out", f"run {i}"))
    won = [o for o in outcomes if not isinstance(o, UserInputError)]
    assert won == [folder]
    assert claim_holder(folder) == f"run {outcomes.index(folder)}"
