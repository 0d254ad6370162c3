"""What `replay` prints: the profile's table with the replayed columns (and the replayed rows' flags) once
replayed, the count and call_bound notes, the rows' exposed time at other speeds, one sentence per replayed
collective (the job's time beside the time alone here) and the sweep beside both."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nccl_bench.render.replay_text import duration, envelope_lines, profile_lines, replay_lines
from nccl_bench.replay.profile import CountMismatch, Profile, ProfileRow
from tests.helpers.rows import row

MB = 1_000_000


def _entry(**changes) -> ProfileRow:
    base = ProfileRow(op="all_reduce", size_bytes=31_500_000, dtype="float32", group_size=8, group_ranks=None,
                      count=150, total_time_us=315_000.0, job_time_us=2100.0, job_busbw_gbps=26.25,
                      share_of_window=0.25)
    return dataclasses.replace(base, **changes)


def _profile(*rows: ProfileRow, mismatches=()) -> Profile:
    return Profile(backend="nccl", world_size=8, nccl_version="2.21.5", ranks_read=(0, 1), rows=rows,
                   window_us=1_260_000.0, collective_share=0.25, count_mismatches=mismatches)


def test_the_sentence_puts_the_jobs_time_beside_the_time_alone_here():
    replayed = _entry(replay_time_us=1200.0, replay_busbw_gbps=45.9, efficiency=1200 / 2100)
    faster = _entry(op="all_gather", count=1, job_time_us=100.0, replay_time_us=150.0, efficiency=1.5)
    assert replay_lines(_profile(replayed, faster, _entry(op="broadcast"))) == [
        "all_reduce 31.5 MB, 150 calls: 2.1 ms in the job, 1.2 ms alone here (57%): the job loses 900 us per call "
        "to overlap or placement",
        "all_gather 31.5 MB, 1 call: 100 us in the job, 150 us alone here (150%): the job ran it 50 us per call "
        "faster than this launch does alone",
    ]


def test_the_table_has_the_replayed_columns_only_after_a_replay():
    profile = _profile(_entry(), mismatches=(CountMismatch(("all_reduce", 31_500_000, "float32", 8, None),
                                                           ((0, 150), (1, 149))),))
    lines = [str(line) for line in profile_lines(profile, [Path("r0.json"), Path("r1.json")], None)]
    assert lines[0] == ("# communication profile of 2 trace(s) (r0.json, r1.json): backend nccl, 8 ranks, NCCL 2.21.5; "
                        "rank(s) read: 0, 1")
    assert lines[1] == "# traced window 1.26 s; collectives took 25.0% of it; the costliest first"
    assert "alone here" not in lines[2] and lines[4].split() == [
        "all_reduce", "31.5", "MB", "float32", "8", "-", "150", "315.000", "2,100.0", "26.25", "-", "-", "25.00"]
    assert lines[-1] == ("note: all_reduce 31.5 MB on 8 ranks was called a different number of times by the ranks "
                         "read (rank 0: 150, rank 1: 149): a shorter traced window, or another sub-group")
    replayed = _profile(_entry(replay_time_us=1200.0, replay_busbw_gbps=45.94, efficiency=1200 / 2100))
    lines = [str(line) for line in profile_lines(replayed, [Path("r0.json")], None)]
    assert "alone here" in lines[2] and lines[4].split()[-3:] == ["1,200.0", "45.94", "57"]


def test_groups_of_one_size_are_rows_and_sentences_apart():
    tp = _entry(size_bytes=4 * MB, group_size=4, group_ranks=(0, 1, 2, 3), job_time_us=100.0, replay_time_us=90.0,
                efficiency=0.9, count=1)
    dp = _entry(size_bytes=4 * MB, group_size=4, group_ranks=(0, 4, 8, 12), job_time_us=900.0, replay_time_us=850.0,
                efficiency=850 / 900, count=1)
    profile = dataclasses.replace(_profile(tp, dp), world_size=16)
    table = [str(line).split() for line in profile_lines(profile, [Path("r0.json")], None)][4:6]
    assert [cells[5] for cells in table] == ["0-3", "0,4,8,12"]
    assert replay_lines(profile) == [
        "all_reduce 4 MB on ranks 0-3, 1 call: 100 us in the job, 90 us alone here (90%): the job loses 10 us per "
        "call to overlap or placement",
        "all_reduce 4 MB on ranks 0,4,8,12, 1 call: 900 us in the job, 850 us alone here (94%): the job loses "
        "50 us per call to overlap or placement"]


def test_the_sweep_stands_beside_the_job_and_the_replay():
    replayed = _entry(size_bytes=4 * MB, job_busbw_gbps=10.0, replay_busbw_gbps=15.0, replay_time_us=1.0)
    sweep = [row(size_bytes=4 << 20, dtype="float32", world_size=8, time_us=4194304 / 20e3)]  # 20 GB/s
    assert envelope_lines(_profile(replayed), sweep, "--envelope") == [
        "all_reduce 4 MB: the sweep measured 20 GB/s busbw at 4.19 MB; in the job 10 GB/s (50%), alone here "
        "15 GB/s (75%)"]
    assert envelope_lines(_profile(replayed), [], "--envelope") == [
        "all_reduce 4 MB: the sweep has no all_reduce of float32 on 8 ranks"]
    assert envelope_lines(_profile(replayed), None, "--envelope") == [
        "no sweep envelope given (--envelope RUN puts each collective beside a sweep of this fabric)"]


def test_durations_read_as_people_read_them():
    assert [duration(t) for t in (0.5, 850.0, 2100.0, 1_250_000.0)] == ["0.5 us", "850 us", "2.1 ms", "1.25 s"]


def test_a_newline_in_a_trace_s_name_or_what_it_recorded_stays_inside_its_header_line():
    profile = dataclasses.replace(_profile(_entry()), backend="nccl\n# ranks 99", nccl_version="2.21\r\x1b[2J")
    lines = [str(line) for line in profile_lines(profile, [Path("r0\n# forged.json")], None)]
    assert lines[0] == ("# communication profile of 1 trace(s) (r0\\x0a# forged.json): backend nccl\\x0a# ranks 99, "
                        "8 ranks, NCCL 2.21\\x0d\\x1b[2J; rank(s) read: 0, 1")
    assert lines[1].startswith("# traced window") and all("\n" not in line for line in lines)


def test_the_overlap_columns_and_the_windows_line_come_with_kernel_times():
    from nccl_bench.replay.overlap import Overlap

    timed = _entry(overlap=Overlap(315_000.0, 78_750.0, 236_250.0), exposed_at_replay_us=135_000.0)
    untimed = _entry(op="broadcast", size_bytes=4, total_time_us=10.0)
    profile = dataclasses.replace(_profile(timed, untimed), overlaps=(Overlap(400_000.0, 100_000.0, 300_000.0),
                                                                      Overlap(400_000.0, 40_000.0, 360_000.0)))
    lines = [str(line) for line in profile_lines(profile, [Path("r0.json"), Path("r1.json")], None)]
    assert lines[2] == ("# communication beside compute over the traced window (rank 1, the most exposed of the ranks "
                        "read): 400 ms of NCCL kernels, 40 ms overlapped by compute (10.0%), 360 ms exposed")
    assert lines[3] == ("# exposed at other speeds, each collective's projection summed (each call keeps the share "
                        "compute hid; a row without one at its job value): the rows' 236 ms exposed in the job would "
                        "be 135 ms at the replayed speed (1 of 1 row projected)")
    assert lines[4].split()[-6:] == ["comm", "overlapped", "exposed", "overlap", "exposed", "here"]
    assert lines[6].split()[-5:] == ["315.000", "78.750", "236.250", "25.0", "135.000"]
    assert lines[7].split()[-5:] == ["-", "-", "-", "-", "-"]
    # without kernel times (gloo): neither the line nor the columns
    plain = [str(line) for line in profile_lines(_profile(untimed), [Path("r0.json")], None)]
    assert "overlap" not in " ".join(plain) and len(plain) == 5


def test_the_exposed_time_at_the_sweeps_busbw_has_its_column():
    from nccl_bench.replay.overlap import Overlap

    profile = _profile(_entry(overlap=Overlap(315_000.0, 0.0, 315_000.0), exposed_at_envelope_us=105_000.0),
                       _entry(op="all_gather", overlap=Overlap(10_000.0, 0.0, 10_000.0)))
    lines = [str(line) for line in profile_lines(profile, [Path("r0.json")], None)]
    assert lines[2].endswith(": the rows' 325 ms exposed in the job would be 115 ms at the sweep's busbw (1 of 2 rows "
                             "projected)")
    assert lines[3].split()[-2:] == ["exposed", "swept"] and lines[5].split()[-2:] == ["0.0", "105.000"]


def test_both_projections_share_the_line_and_each_keeps_the_rows_it_lacks_at_their_job_value():
    from nccl_bench.replay.overlap import Overlap

    profile = _profile(_entry(overlap=Overlap(3_000.0, 1_000.0, 2_000.0), exposed_at_replay_us=500.0,
                              exposed_at_envelope_us=250.0),
                       _entry(op="all_gather", overlap=Overlap(1_000.0, 0.0, 1_000.0), exposed_at_replay_us=2_000.0))
    [line] = [str(line) for line in profile_lines(profile, [Path("r0.json")], None) if "other speeds" in str(line)]
    assert line.endswith(": the rows' 3 ms exposed in the job would be 2.5 ms at the replayed speed (2 of 2 rows "
                         "projected), 1.25 ms at the sweep's busbw (1 of 2 rows projected)")


def test_replayed_rows_at_the_per_call_floor_carry_the_flag_and_a_note_in_the_sweeps_words():
    small = _entry(op="broadcast", size_bytes=8, replay_time_us=300.0, replay_busbw_gbps=0.0, efficiency=0.5,
                   replay_flags=("call_bound",))
    large = _entry(replay_time_us=1200.0, replay_busbw_gbps=45.94, efficiency=1200 / 2100)
    lines = [str(line) for line in profile_lines(_profile(large, small), [Path("r0.json")], None)]
    assert lines[2].split()[-1] == "flags"
    assert lines[4].split()[-1] == "-" and lines[5].split()[-1] == "call_bound"
    assert lines[-1] == ("note: 1 row(s) are call_bound: their median call is within 1.2x of the same op's smallest "
                         "message, so they measure what a call costs, not bandwidth; for NCCL's own latency without "
                         "torch's launch path, replay with --cuda-graph N")
    unflagged = [str(line) for line in profile_lines(_profile(large), [Path("r0.json")], None)]
    assert "flags" not in unflagged[2] and not any("call_bound" in line for line in unflagged)
