"""Where each rank stood, as one bounded line and meta.json's groups; a flight recorder read as torch's
fr_trace reads it."""

from __future__ import annotations

from nccl_bench.units.rank_positions import (
    GroupRecord,
    Position,
    Standing,
    culprits,
    decode,
    decode_records,
    encode_records,
    rank_ranges,
    recorder_line,
    stood_line,
    stood_meta,
)

M16 = 16 * 2**20
DONE_12 = Position(12, "all_reduce", M16)
IN_13 = Position(13, "all_reduce", 2 * M16)


def test_rank_ranges_join_runs_and_cut_at_a_limit():
    assert rank_ranges([4, 0, 1, 2, 5, 6, 7]) == "0-2,4-7"
    assert rank_ranges([3]) == "3"
    assert rank_ranges(range(0, 40, 2), limit=4) == "0,2,4,...,38"


def test_the_odd_rank_out_comes_first_and_the_rest_as_ranges():
    standings = {rank: Standing(DONE_12, IN_13) for rank in range(8)}
    standings[3] = Standing(DONE_12, None)
    assert stood_line(standings) == ("rank 3 last completed #12 all_reduce 16M; "
                                     "ranks 0-2,4-7 last completed #12 all_reduce 16M, in #13 all_reduce 32M")


def test_a_rank_without_a_note_said_nothing_and_a_group_is_named():
    sub = Position(2, "all_gather", 1024, "rank%2=1")
    line = stood_line({0: Standing(None, Position(1, "barrier")), 1: Standing(Position(1, "all_gather", 1024), sub),
                       2: None})
    assert line == ("rank 0 completed none, in #1 barrier; "
                    "rank 1 last completed #1 all_gather 1K, in #2 all_gather 1K on rank%2=1; rank 2 said nothing")


def test_the_line_stays_bounded_at_1024_ranks_in_1024_states():
    standings = {rank: Standing(Position(rank, "all_reduce", 1024), None) for rank in range(1024)}
    line = stood_line(standings)
    assert line.endswith("; 1020 more ranks in 1020 other states") and len(line) < 300


def test_a_big_group_of_scattered_ranks_is_cut_with_its_count():
    standings = {rank: Standing(DONE_12, IN_13 if rank % 2 else None) for rank in range(1024)}
    line = stood_line(standings)
    assert "ranks 0,2,4,6,8,10,12,...,1022 (512 ranks) last completed #12" in line and len(line) < 300


def test_meta_keeps_every_state_with_its_ranges():
    meta = stood_meta({0: Standing(DONE_12, IN_13), 1: Standing(DONE_12, IN_13), 2: None})
    assert meta == [
        {"ranks": "0-1", "last_completed": {"seq": 12, "op": "all_reduce", "size_bytes": M16, "group": None},
         "current": {"seq": 13, "op": "all_reduce", "size_bytes": 2 * M16, "group": None}},
        {"ranks": "2", "last_completed": None, "current": None, "said": "nothing"},
    ]


def test_a_standing_goes_through_the_store_and_back():
    standing = Standing(DONE_12, Position(13, "all_to_allv", None, "node h2"))
    assert decode(standing.encode()) == standing
    assert decode("not json") is None and decode('{"last": 1}') is None


def test_the_recorder_names_the_rank_that_never_joined_the_collective():
    joined = [GroupRecord("default_pg", 7, 6, "gloo:all_reduce")]
    records = {0: joined, 1: [GroupRecord("default_pg", 6, 6, "gloo:all_reduce")], 2: joined, 3: joined}
    assert recorder_line(records) == ("group default_pg: #7 gloo:all_reduce enqueued by ranks 0,2-3, "
                                      "not joined by rank 1 (last enqueued #6)")
    assert culprits(records) == [1]


def test_the_group_that_misses_the_fewest_ranks_comes_first():
    """--split mod:2 with rank 1 stalled: the world's gather misses ranks 1 and 3, their own group only rank 1."""
    world, sub = "default_pg", "ranks 1,3"
    records = {0: [GroupRecord(world, 9, 8)], 2: [GroupRecord(world, 9, 8)], 1: [GroupRecord(world, 8, 8),
               GroupRecord(sub, 106, 106)], 3: [GroupRecord(world, 8, 8), GroupRecord(sub, 107, 106)]}
    assert recorder_line(records) == ("group ranks 1,3: #107 enqueued by rank 3, not joined by rank 1 (last enqueued "
                                      "#106); group default_pg: #9 enqueued by ranks 0,2, not joined by ranks 1,3 "
                                      "(last enqueued #8)")
    assert culprits(records) == [1, 3]


def test_a_recorder_where_every_rank_finished_names_nobody_and_comes_after_a_stuck_group():
    records = {0: [GroupRecord("0", 3, 3), GroupRecord("rank%2=0", 5, 4)], 1: [GroupRecord("0", 3, 3)]}
    assert recorder_line(records) == "group rank%2=0: #5 enqueued by rank 0; group 0: #3 completed by ranks 0-1"
    assert culprits(records) == []


def test_a_recorder_of_ranks_all_inside_one_collective_says_it_without_a_culprit():
    records = {0: [GroupRecord("0", 3, 2, "nccl:all_gather")], 1: [GroupRecord("0", 3, 2, "nccl:all_gather")]}
    assert recorder_line(records) == "group 0: #3 nccl:all_gather enqueued by ranks 0-1"


def test_records_or_the_reason_go_through_the_store_and_back():
    records = [GroupRecord("default_pg", 7, 6, "gloo:all_reduce")]
    assert decode_records(encode_records(records)) == records
    assert decode_records(encode_records("not available for mpi in torch 2.13.0")) == (
        "not available for mpi in torch 2.13.0")
    assert decode_records("{") is None


def test_the_recorders_line_stays_bounded_at_1024_ranks():
    records = {rank: [GroupRecord(f"ranks {rank}", 5, 4), GroupRecord("default_pg", 9 + rank % 2, 9)]
               for rank in range(1024)}
    line = recorder_line(records)
    assert line.startswith("group default_pg: #10 enqueued by ranks 1,3,5,7,9,11,13,...,1023 (512 ranks), not joined "
                           "by ranks 0,2,4,6,8,10,12,...,1022 (512 ranks) (last enqueued #9); group ranks 0: #5 ")
    assert line.endswith("; 1021 more groups") and len(line) < 400
