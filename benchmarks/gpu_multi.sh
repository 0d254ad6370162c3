#!/usr/bin/env bash
# The multi-rank NCCL path, on a machine with two or more NVIDIA GPUs (two ranks, one GPU each):
#   bash benchmarks/gpu_multi.sh [--cpu] [OUT_DIR]        (default results/gpu_multi_<UTC time>)
# Every op on 2 ranks; --cuda-graph on every op with a bandwidth factor, sendrecv included, with and
# without TORCH_NCCL_BLOCKING_WAIT=1; a stalled rank 1 named by rank 0 within --timeout + a few
# seconds; kill -9 of rank 1 mid-run; doctor --workers 2, and the doctor's deadline on a stalled
# rank 1. One PASS/FAIL line per check, summary.txt and runs.tar.gz in OUT_DIR, exit 1 on any FAIL;
# every step has a limit, together under 9 minutes.
# Not yet run on real GPUs: written and tested in --cpu mode only (gloo, CPU tensors, the CUDA-only
# steps skipped and named), which the test suite runs. See smoke_lib.sh for PYTHON, SMOKE_STEPS and
# SMOKE_LIMIT_SCALE.
cd "$(dirname "$0")/.."
script=gpu_multi budget_s=540
. benchmarks/smoke_lib.sh

need_gpus 2

# 1. Every op on two ranks, every element checked.
if want all_ops; then
  trun all_ops 60 2 sweep --op all -b 1K -e "$top" --min-sample-ms 20
  ok_run all_ops --ranks 2 --min-rows 10 --proves "$many_ranks: every op, every element checked"
fi

# 2. --cuda-graph on two ranks, sendrecv included (point-to-point capture needs torch >= 2.7), once
#    with torch's watchdog and once with TORCH_NCCL_BLOCKING_WAIT=1 (no watchdog).
graph_ops=all_reduce,all_gather,reduce_scatter,broadcast,reduce,gather,scatter,all_to_all,sendrecv
for variant in graph graph_blocking_wait; do
  want "$variant" || continue
  if [ "$mode" = cpu ]; then
    skip "$variant" "needs CUDA (--cpu mode)"
    continue
  fi
  args=(sweep --op "$graph_ops" --sizes 1K,1M,16M --cuda-graph 10 --min-sample-ms 20)
  if [ "$variant" = graph_blocking_wait ]; then
    TORCH_NCCL_BLOCKING_WAIT=1 trun "$variant" 45 2 "${args[@]}"
  else
    trun "$variant" 45 2 "${args[@]}"
  fi
  ok_run "$variant" --ranks 2 --min-rows 9 --proves "$many_ranks, captured in CUDA graphs"
done

# 3. Rank 1 stalls at its second point (outside any collective); rank 0 waits in the collective, its
#    deadline aborts the group and it names rank 1, within --timeout + margin, grace and the roll call.
#    torchrun exits 1 whatever its workers' codes.
stall_timeout=8
if want stall_rank1; then
  NCCL_BENCH_FAULT=stall:1:1 trun stall_rank1 40 2 sweep --op all_gather --sizes 1K,1M --timeout "$stall_timeout" \
    --min-sample-ms 5
  finished stall_rank1 && check stall "$out_dir/runs/stall_rank1" "$out_dir/logs/stall_rank1.log" "$rc" \
    --name "stall_rank1 (named by rank 0)" --timeout "$stall_timeout" --rows 1 --expect-rc 1 --names "rank 1" \
    --slack 6 --proves "the stalled rank is named, not the rank its abort released"
fi

descendants() { local child; for child in $(pgrep -P "$1"); do echo "$child"; descendants "$child"; done; }

# 4. kill -9 of rank 1 once the first row is on disk: the run fails, names rank 1, keeps the rows.
if want kill_rank1; then
  limit kill_rank1 60
  started=$SECONDS
  timeout -k 5 "$limit_s" "$py" -m torch.distributed.run --standalone --nproc_per_node 2 -m nccl_bench sweep \
    "${backend[@]}" --op all_reduce -b 1K -e "$top" --min-sample-ms 200 --timeout 20 --out "$out_dir/runs/kill_rank1" \
    >"$out_dir/logs/kill_rank1.log" 2>&1 &
  launcher=$!
  victim=""
  for _ in $(seq 1 $((limit_s * 2))); do
    sleep 0.5
    csv="$out_dir/runs/kill_rank1/results.csv"
    if [ -z "$victim" ] && [ -f "$csv" ] && [ "$(wc -l <"$csv")" -ge 2 ]; then
      for pid in $(descendants "$launcher"); do  # rank 1: RANK=1 in its environment, not torchrun's agent
        if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'RANK=1' \
            && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'nccl_bench sweep' \
            && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'torch.distributed.run'; then
          victim=$pid
        fi
      done
      [ -n "$victim" ] && kill -9 "$victim"
    fi
    kill -0 "$launcher" 2>/dev/null || break
  done
  wait "$launcher"
  rc=$? wall=$((SECONDS - started))
  timed
  if [ -z "$victim" ]; then
    say FAIL kill_rank1 "rank 1's process was never found to kill (exit $rc after ${wall}s)"
  else
    finished kill_rank1 && check rank-lost "$out_dir/runs/kill_rank1" "$out_dir/logs/kill_rank1.log" "$rc" \
      --name "kill_rank1 (process $victim, ${wall}s)" --rank 1 --proves "a rank killed mid-run is named, rows kept"
  fi
fi

# 5. The doctor on this node's ranks, started without a launcher.
if want doctor; then
  workers doctor 60 2 doctor
  finished doctor && if [ "$rc" = 0 ]; then
    check doctor "$out_dir/runs/doctor" --proves "$many_ranks: the doctor's verdict on this node"
  else
    say FAIL doctor "exit $rc after ${wall}s: $(grep -m1 'nccl-bench: error' "$out_dir/logs/doctor.log" || tail -n 1 "$out_dir/logs/doctor.log")"
  fi
fi

# 6. The doctor's deadline, from the same life cycle: rank 1 stalls at its first measurement (one node
#    has only one: the intra-node all_reduce); the run fails within --timeout + a few seconds, naming
#    rank 1, meta.json "failed", exit the workers' code.
if want doctor_stall; then
  NCCL_BENCH_FAULT=stall:1:0 workers doctor_stall 40 2 doctor --timeout "$stall_timeout"
  finished doctor_stall && check stall "$out_dir/runs/doctor_stall" "$out_dir/logs/doctor_stall.log" "$rc" \
    --name "doctor_stall (named by rank 0)" --timeout "$stall_timeout" --rows 0 --names "rank 1" --slack 6 \
    --proves "a stall in the doctor's per-host group is named, the group released"
fi

finish
