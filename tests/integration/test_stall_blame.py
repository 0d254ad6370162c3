"""NCCL's order of timeouts, reproduced on gloo: the stalled rank is named, not the rank that waited on it.

On NCCL the process group's own timeout is --timeout + 14 s (ranks/dist.py), so every rank's deadline
runs out first, and the abort releases the ranks that only waited. NCCL_BENCH_FAULT_LATE_BACKEND
(ranks/planted.py) gives gloo's group a timeout 1 s past the deadline, standing in for that release
(gloo's abort does nothing). Rank 1 stalls for good outside any collective; it is the rank that never
comes back from its abort, and the one every case must name: the plain sweep, a stall inside a
--split sub-group (mod and div, 4 ranks), and the doctor's per-host group.
"""

from __future__ import annotations

import datetime as _dt

import pytest

from nccl_bench.errors import EXIT_RUN_FAILED
from nccl_bench.ranks.planted import FAULT_ENV, LATE_BACKEND_ENV
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.run_folder import read_meta
from tests.helpers.launch import run_cli, run_torchrun

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("timing")]

# Long enough that ranks started at once all join within it on a loaded 2-core machine (the join also
# ends after --timeout without progress: ranks/set_up.py), short enough that the stall ends soon.
TIMEOUT_S = 5.0
SWEEP = ["sweep", "--no-plot", "--op", "all_reduce", "--sizes", "1K,2K", "--iters", "5", "--warmup", "1",
         "--timeout", f"{TIMEOUT_S:g}"]
DOCTOR = ["doctor", "--no-plot", "--workers", "2", "--phase", "nodes", "--size", "4K", "--iters", "2", "--samples", "2",
          "--timeout", f"{TIMEOUT_S:g}"]
# From the first meta.json to the final one: a stalled run, sub-group or not, ends within this.
ENDS_WITHIN_S = TIMEOUT_S + 25
CASES = {  # id: (how it is run, the fault, the point it stalls in, rows finished before it, where the ranks stood)
    "sweep": (lambda args, env: run_torchrun(2, [*SWEEP, *args], env=env), "stall:1:1",
              "all_reduce at 2K (in_place)", 1, "ranks 0-1 last completed #1 all_reduce 1K, in #2 all_reduce 2K"),
    "split-mod2": (lambda args, env: run_cli([*SWEEP, "--workers", "4", "--split", "mod:2", *args], env=env),
                   "stall:1:1", "all_reduce at 2K (in_place)", 2,
                   "ranks 0,2 last completed #1 all_reduce 1K on rank%2=0, in #2 all_reduce 2K on rank%2=0; "
                   "ranks 1,3 last completed #1 all_reduce 1K on rank%2=1, in #2 all_reduce 2K on rank%2=1"),
    "split-div2": (lambda args, env: run_cli([*SWEEP, "--workers", "4", "--split", "div:2", *args], env=env),
                   "stall:1:1", "all_reduce at 2K (in_place)", 2,
                   "ranks 0-1 last completed #1 all_reduce 1K on rank/2=0, in #2 all_reduce 2K on rank/2=0; "
                   "ranks 2-3 last completed #1 all_reduce 1K on rank/2=1, in #2 all_reduce 2K on rank/2=1"),
    "doctor": (lambda args, env: run_cli([*DOCTOR, *args], env=env), "stall:1:0", "the intra-node all_reduce at 4K",
               None, "ranks 0-1 completed none, in #1 the intra-node all_reduce at 4K"),
}
STOOD = "; where the ranks stood: "


@pytest.mark.parametrize("case", list(CASES))
def test_the_rank_that_never_came_back_is_named_whichever_timeout_fires_first(tmp_path, case):
    run, fault, where, rows, stood = CASES[case]
    out = tmp_path / "run"
    result = run(["--out", str(out)], {FAULT_ENV: fault, LATE_BACKEND_ENV: "1"})
    errors = [line for line in result.stderr.splitlines() if line.startswith("nccl-bench: error:")]
    assert [line.partition(STOOD)[0] for line in errors] == [
        f"nccl-bench: error: {where} failed on rank 1: no progress for more than {TIMEOUT_S:g} s "
        f"(--timeout {TIMEOUT_S:g} s)"], result.stderr[-3000:]
    # where every rank stood (its last completed point and the one it is in), then torch's flight recorder
    assert errors[0].partition(STOOD)[2].startswith(f"{stood}; flight recorder (gloo): "), errors[0]
    # torchrun prints its own traceback for a failed worker; the ranks never do
    assert not any(word in result.stderr for word in ("terminate called", "core dumped"))
    assert case == "sweep" or "Traceback" not in result.stderr
    # torchrun's own exit for a failed worker is 1; the local workers' is the run's
    assert result.returncode == (1 if case == "sweep" else EXIT_RUN_FAILED)
    meta = read_meta(out)
    assert meta["status"] == "failed" and meta["failure"] == errors[0].removeprefix("nccl-bench: error: ")
    assert meta["stood"][0]["current"]["seq"] == (1 if case == "doctor" else 2)
    # the stalled rank never joined the collective its peers were in (torch's fr_trace: a missing rank)
    assert 1 in meta["flight_recorder"]["culprits"], meta["flight_recorder"]
    took = _dt.datetime.fromisoformat(meta["ended_utc"]) - _dt.datetime.fromisoformat(meta["started_utc"])
    assert took.total_seconds() < ENDS_WITHIN_S
    if rows is not None:
        kept = read_rows(out)
        assert meta["rows"] == len(kept) == rows and all(row.status == "ok" for row in kept)
        assert {row.size_bytes for row in kept} == {1024}
