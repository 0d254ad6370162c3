#!/usr/bin/env bash
# The whole GPU path in one go, on any machine with one or more NVIDIA GPUs, no network needed:
#   bash benchmarks/gpu_smoke.sh [--cpu] [OUT_DIR]        (default results/gpu_smoke_<UTC time>)
# Runs the tool as a user would (torchrun -m nccl_bench, NCCL; one rank started by hand where the
# exit code read must be the tool's own), prints one PASS/FAIL line per check with the figure it
# judged and what the step proves, then a count. With one GPU every data step runs one rank, and NCCL
# then crosses no link: a copy or nothing per collective, and for all_to_all/all_to_allv (sends and
# receives in torch) its point-to-point kernel to the rank itself. Those lines say "one rank only"
# and the closing "proof:" line counts them apart; steps that need two GPUs are in gpu_multi.sh.
# OUT_DIR ends with three files to copy out: summary.txt, timings.txt (each step's and checker's wall
# time against its limit) and runs.tar.gz (every run folder, log and hardware capture; fixtures/ holds
# nvidia-smi and NVML outputs for tests/fixtures/). Every process has a time limit (each step, each
# checker, the GPU query); on one GPU they add up to less than 9 minutes (checked).
# Exit 1 if any check fails.
# --cpu: the same steps on gloo with CPU tensors (wide sweeps up to 1 MiB), skipping (and saying so) only what needs CUDA; the
# test suite runs it, so the script's own logic is checked without a GPU. See smoke_lib.sh for
# PYTHON, SMOKE_STEPS and SMOKE_LIMIT_SCALE.
cd "$(dirname "$0")/.."
script=gpu_smoke budget_s=540
. benchmarks/smoke_lib.sh
cuda_only() { skip "$1" "needs CUDA (--cpu mode)"; }
# Limits: `limit NAME GPU_S CPU_S` (trun/direct/workers NAME "GPU_S CPU_S" ...), 1.5x the step's time
# on one H100 (estimated from the probe of 2026-11-23) and on a 2-core CPU host (measured); the table
# is in benchmarks/RESULTS.md.

# 1. The GPU and the hardware captures (future test fixtures).
need_gpus 1
if [ "$mode" = gpu ] && want captures; then
  limit captures 20  # five queries of at most 4 s each
  started=$SECONDS
  timeout 4 nvidia-smi -L >"$out_dir/fixtures/nvidia_smi_L.txt" 2>&1
  timeout 4 nvidia-smi -q >"$out_dir/fixtures/query.txt" 2>&1
  timeout 4 nvidia-smi topo -m >"$out_dir/fixtures/topo_m.txt" 2>&1
  timeout 4 nvidia-smi nvlink -s >"$out_dir/fixtures/nvlink_status.txt" 2>&1
  timeout 4 $checks nvml-dump "$out_dir/fixtures/nvml.json" --proves "NVML answers saved as a fixture" | verdict
  wall=$((SECONDS - started))
  timed
fi

# 2. limits against the real nvidia-smi and NVML (on CPU: the host's memcpy peak).
if want limits; then
  limit limits 12 12
  started=$SECONDS
  timeout -k 5 "$limit_s" "$py" -m nccl_bench limits --json >"$out_dir/fixtures/limits.json" 2>"$out_dir/logs/limits.log"
  rc=$? wall=$((SECONDS - started))
  timed
  finished limits && check limits "$out_dir/fixtures/limits.json" $([ "$mode" = gpu ] && echo --gpu) \
    --proves "the peak the tool reads from this host (NVML and nvidia-smi on a GPU)"
fi

# 3. Every op, world size 1 (sendrecv is reported unsupported on one rank).
if want all_ops; then
  trun all_ops "45 20" 1 sweep --op all -b 1K -e "$top" --min-sample-ms 20
  ok_run all_ops --min-rows 10 --proves "$one_rank"
fi

# 4. CUDA graphs: every op with a bandwidth factor, out of place (in place at one rank captures
#    nothing), and all_gather at 16 MiB against a copy captured in a CUDA graph the same way (both
#    GPU-bound, not one CPU-bound and one GPU-bound): the graph's timing, on copies.
if want cuda_graph; then
  if [ "$mode" = gpu ]; then
    trun cuda_graph 25 1 sweep --op all_reduce,all_gather,reduce_scatter,broadcast,reduce,gather,scatter,all_to_all \
      --sizes 1K,1M,16M --no-inplace --cuda-graph 10 --min-sample-ms 20
    ok_run cuda_graph --min-rows 10 --proves "$one_rank; captured in CUDA graphs"
    limit d2d 12
    started=$SECONDS
    timeout -k 5 "$limit_s" $checks d2d-vs-all-gather "$out_dir/runs/cuda_graph" \
      --proves "one rank only: a graph-replayed one-rank all_gather times as a captured copy does" | verdict
    wall=$((SECONDS - started))
    timed
  else
    cuda_only cuda_graph
  fi
fi

# 5. --cuda-graph with barrier in the op list: barrier left out with a note, the rest captured.
if want cuda_graph_barrier; then
  if [ "$mode" = gpu ]; then
    direct cuda_graph_barrier 15 sweep --op all --sizes 1K --cuda-graph 10 --min-sample-ms 5
    ok_run cuda_graph_barrier --min-rows 5 --proves "$one_rank; barrier kept out of the capture"
  else
    cuda_only cuda_graph_barrier
  fi
fi

# 6. Per-op latency mode (--blocking synchronizes the GPU after every op; refused on CPU).
if want blocking; then
  if [ "$mode" = gpu ]; then
    trun blocking 25 1 sweep --op all_reduce,all_gather -b 1K -e 16M --blocking --min-sample-ms 20
    ok_run blocking --min-rows 10 --proves "$one_rank; timed per op"
  else
    cuda_only blocking
  fi
fi

# Rows that measure something: at one rank an in-place op moves nothing and is flagged one_rank_in_place
# without a bandwidth (all_reduce and reduce have only in-place forms in torch), so a one-GPU run counts
# reduce_scatter's and all_gather's out-of-place rows (4 of 12) and srun_layout's all_gather (1 of 3).
if [ "$mode" = gpu ] && [ "$gpus" -lt 2 ]; then dtype_rows=4 srun_rows=1; else dtype_rows=8 srun_rows=2; fi

# 7. Every dtype and every reduce op, each dtype with one reduce op (one launch each).
if want dtypes; then
  for pair in float32:sum float16:avg bfloat16:prod float64:max int8:min uint8:sum int32:max int64:prod; do
    dtype=${pair%:*} redop=${pair#*:}
    direct "dtype_${dtype}_$redop" "14 14" sweep --op all_reduce,reduce_scatter,reduce,all_gather --sizes 1K,1M \
      -d "$dtype" -o "$redop" --min-sample-ms 5
    ok_run "dtype_${dtype}_$redop" --min-rows "$dtype_rows" --proves "$one_rank; $dtype with $redop checked"
  done
fi

# 8. A large buffer, and one too large for the card: refused with one line, before allocating, by
#    the process whose exit code is read.
if want large; then
  if [ "$mode" = gpu ]; then
    direct large 20 sweep --op all_gather --sizes 8G --iters 5 --warmup 1
    ok_run large --proves "$one_rank; an 8 GiB buffer allocated, copied and checked"
  else
    skip large "an 8 GiB buffer is a GPU's test (--cpu mode)"
  fi
fi
if want too_large; then
  direct too_large "10 12" sweep --op all_gather --sizes 4T
  finished too_large && check refused "$out_dir/logs/too_large.log" "$rc" --name too_large --needle=memory \
    --proves "a buffer past the device's memory is refused before allocating, exit 2"
fi

# 9. A planted stall behind GPU work (NCCL_BENCH_FAULT=stall-behind-gpu:0:1: the point's collective is
#    enqueued behind torch.cuda._sleep on the rank's stream, so it sits unfinished in torch's watchdog
#    list): the rank's deadline must end the run before the watchdog's own timeout, with the tool's
#    exit code and no SIGABRT, the timeout named, the row before it kept, meta.json "failed". It
#    exercises only the stuck rank's own exit (one rank: no peer waits on it, no abort releases
#    anyone, no roll call names it; gpu_multi.sh has those). On CPU the
#    planted stall is a plain `stall` (no stream to spin): the same checks. There is no variant with
#    TORCH_NCCL_ASYNC_ERROR_HANDLING=3: the deadline ends the run at --timeout + 4 s, before the
#    watchdog's group timeout (--timeout + 14 s), so its error handling never acts, whatever its value.
stall_timeout=5
if [ "$mode" = gpu ]; then fault=stall-behind-gpu:0:1; else fault=stall:0:1; fi
if want stall_defaults; then
  # out of place: one rank's in-place all_gather enqueues no NCCL kernel, its copy does
  NCCL_BENCH_FAULT="$fault" direct stall_defaults "25 25" sweep --op all_gather --no-inplace --sizes 1K,1M \
    --timeout "$stall_timeout" --min-sample-ms 5
  finished stall_defaults && check stall "$out_dir/runs/stall_defaults" "$out_dir/logs/stall_defaults.log" "$rc" \
    --name "stall_defaults ($fault)" --timeout "$stall_timeout" --rows 1 \
    --proves "the stuck rank's own exit only: the deadline ends the stalled rank (one rank, no peer waiting) before NCCL's watchdog, with the tool's exit and its report"
fi

# 10. Refusals, exit codes under torchrun, layouts that need a GPU count to judge.
if want barrier_graph; then
  if [ "$mode" = gpu ]; then
    direct barrier_graph 12 sweep --op barrier --cuda-graph 5
    finished barrier_graph && check refused "$out_dir/logs/barrier_graph.log" "$rc" --name barrier_graph \
      --needle="--cuda-graph: nothing left to capture" --proves "--cuda-graph with barrier alone is refused, exit 2"
  else
    cuda_only barrier_graph
  fi
fi
if want torchrun_exit; then  # torchrun exits 1 whatever its worker's code; the worker's is in its summary
  trun torchrun_exit "15 15" 1 sweep --timeout 0
  finished torchrun_exit && check torchrun-exit "$out_dir/logs/torchrun_exit.log" "$rc" --child 2 \
    --proves "the worker's own exit code is in torchrun's summary"
fi
if want too_many_workers; then
  if [ "$mode" = gpu ]; then
    n=$((gpus + 1))
    workers too_many_workers 12 "$n" sweep --sizes 1K
    finished too_many_workers && check refused "$out_dir/logs/too_many_workers.log" "$rc" --name too_many_workers \
      --needle="--workers: $n NCCL workers need $n GPUs" --proves "more NCCL workers than GPUs is refused, exit 2"
  else
    cuda_only too_many_workers
  fi
fi
if want srun_layout; then  # srun giving each task its own GPU: one visible device, local rank 3 -> cuda:0
  limit srun_layout 15 15
  started=$SECONDS
  CUDA_VISIBLE_DEVICES=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0 SLURM_LOCALID=3 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT="$(free_port)" timeout -k 5 "$limit_s" "$py" -m nccl_bench sweep "${backend[@]}" --op all_reduce,all_gather \
    --sizes 1M --min-sample-ms 5 --out "$out_dir/runs/srun_layout" >"$out_dir/logs/srun_layout.log" 2>&1
  rc=$? wall=$((SECONDS - started))
  timed
  ok_run srun_layout --min-rows "$srun_rows" --proves "$one_rank; srun's layout mapped to the one visible device"
fi
if want meta_env; then  # meta.json records NCCL's and torch's NCCL/flight-recorder environment
  NCCL_DEBUG=WARN TORCH_FR_BUFFER_SIZE=0 direct meta_env "12 15" sweep --op all_reduce --sizes 1K --min-sample-ms 5
  if [ "$mode" = gpu ]; then heavy=--heavy nccl=--nccl; else heavy="" nccl=""; fi
  finished meta_env && check $heavy meta-env "$out_dir/runs/meta_env" $nccl \
    --proves "meta.json records the NCCL and torch environment (and the NCCL library's version)"
fi
if want calibration; then  # a small out-of-place reduce_scatter must not settle at the minimum iterations
  direct calibration "15 20" sweep --op reduce_scatter --no-inplace --sizes 2K,4K,8K --trials 3
  finished calibration && check calibration "$out_dir/runs/calibration" \
    --proves "calibration reaches samples of the planned length at small sizes"
fi

# 11. Two ranks, where there are two GPUs (benchmarks/gpu_multi.sh goes further).
if want two_ranks; then
  if [ "$mode" = cpu ] || [ "$gpus" -ge 2 ]; then
    trun two_ranks "45 30" 2 sweep --op all -b 1K -e "$top" --min-sample-ms 20
    ok_run two_ranks --ranks 2 --min-rows 10 --proves "$many_ranks"
  else
    skip two_ranks "one GPU cannot hold two NCCL ranks (gpu_multi.sh needs two)"
  fi
fi

finish
