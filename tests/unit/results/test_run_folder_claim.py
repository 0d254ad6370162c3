"""A run folder is claimed atomically: of runs started at once on one folder exactly one gets it, a
default name is numbered instead of shared, and a run's own later processes take the folder it claimed."""

from __future__ import annotations

import datetime as _dt
import multiprocessing

import pytest

from nccl_bench.errors import UserInputError
from nccl_bench.results.run_folder import (
    CLAIM_FILE,
    claim_holder,
    claim_run_dir,
    find_claimed,
    new_run_dir,
    release_run_dir,
)
from tests.races import race

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


def _claim_in_process(target, i, queue):
    try:
        claim_run_dir(target, "--out", f"process {i}")
        queue.put("won")
    except UserInputError as exc:
        queue.put(exc.problem)


def test_of_processes_racing_on_one_named_folder_exactly_one_gets_it(tmp_path):
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    target = tmp_path / "deep" / "out"
    processes = [context.Process(target=_claim_in_process, args=(target, i, queue)) for i in range(4)]
    for process in processes:
        process.start()
    answers = [queue.get(timeout=60) for _ in processes]
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
