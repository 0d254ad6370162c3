# Shared by gpu_smoke.sh and gpu_multi.sh (sourced, not run): the output folder, one PASS/FAIL/SKIP
# line per check into summary.txt, each saying what its step proves, per-step time limits that must
# add up to less than the script's budget (every process counts: a checker, the GPU query's torch
# imports, the tarball), the three ways a step starts ranks, and the closing count and tarball.
# Each step's wall time and limit land in timings.txt.
#
# Caller sets before sourcing: script (a name for the default folder) and budget_s; the lib reads the
# caller's arguments, [--cpu] [OUT_DIR], into mode (gpu | cpu) and out_dir. Environment:
#   PYTHON             interpreter (default python3)
#   SMOKE_STEPS        space-separated step names to run (default: every step)
#   SMOKE_LIMIT_SCALE  multiplies every step's limit and the budget (a slow or shared host: 4; a check
#                      of the limits themselves: 0.1; default 1)
set -u
mode=gpu
if [ "${1:-}" = --cpu ]; then mode=cpu; shift; fi
out_dir="${1:-results/${script}_$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out_dir/logs" "$out_dir/runs" "$out_dir/fixtures"
py="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
checks="$py benchmarks/gpu_smoke_checks.py"
scale="${SMOKE_LIMIT_SCALE:-1}"
planned_s=0
: >"$out_dir/summary.txt"
# top: the largest size of the wide sweeps (gloo on a shared CPU moves 64 MiB in seconds, not microseconds)
if [ "$mode" = cpu ]; then backend=(--backend gloo) top=1M; else backend=(--backend nccl) top=64M; fi
# What a step proves, by how many ranks move its data (--proves of the checks). With one rank NCCL runs
# no communication kernel: each collective is a cudaMemcpyAsync (out of place), nothing (in place), or
# for avg its one-rank scaling kernel (NCCL's enqueue.cc, device/onerank.cu).
if [ "$mode" = cpu ]; then
  one_rank="one gloo rank: the tool's own path (launch, timing, check, files), no link crossed"
  many_ranks="gloo across 2 ranks: the multi-rank path on CPU, no NCCL"
else
  one_rank="one rank only: NCCL ran a copy or nothing per collective (ncclLaunchOneRank, enqueue.cc), and for all_to_all/all_to_allv, which torch builds from sends and receives, its point-to-point kernel to the rank itself; no link crossed; the tool's path on a GPU (launch, timing, check, files)"
  many_ranks="NCCL kernels across 2 GPUs"
fi
# A checker is a short Python process (no torch): this limit covers it on a loaded host; one that
# imports torch (on a GPU host: CUDA's libraries, cold) gets heavy_check_s.
check_s=3 heavy_check_s=15
# The tarball and the free-port lookups: what the script does outside steps and checkers.
rest_s=15

verdict() { tee -a "$out_dir/summary.txt"; }  # PASS/FAIL/SKIP lines, counted from the file at the end
say() { echo "$1 $2: $3" | verdict; }
skip() { say SKIP "$1" "$2"; }
want() { [ -z "${SMOKE_STEPS:-}" ] || [[ " $SMOKE_STEPS " == *" $1 "* ]]; }

# limit NAME GPU_SECONDS [CPU_SECONDS]: this step's limit in this mode (scaled) into $limit_s; counted
# against the budget. Each covers 1.5x the step's time: on CPU as measured on a 2-core host, on a GPU as
# estimated (benchmarks/RESULTS.md, "The GPU smoke scripts' limits").
limit() {
  local seconds="$2"
  if [ "$mode" = cpu ]; then seconds="${3:-$2}"; fi
  limit_s=$(awk -v s="$seconds" -v k="$scale" 'BEGIN { n = int(s * k + 0.999); print (n < 1 ? 1 : n) }')
  planned_s=$(( planned_s + limit_s ))
  step_name="$1"
}

# timed: record the step just run (wall time against its limit) in timings.txt
timed() { echo "$step_name ${wall}s of ${limit_s}s" >>"$out_dir/timings.txt"; }

# check [--heavy] ARGS...: one checker (gpu_smoke_checks.py ARGS) under a limit of its own, its line
# into the summary (not in a pipeline: the limit must count in this shell)
check() {
  local seconds=$check_s started=$SECONDS code
  if [ "$1" = --heavy ]; then seconds=$heavy_check_s; shift; fi
  limit "check $1" "$seconds"
  timeout -k 2 "$limit_s" $checks "$@" | verdict
  code=${PIPESTATUS[0]}
  wall=$((SECONDS - started))
  timed
  if [ "$code" = 124 ] || [ "$code" = 137 ]; then say FAIL "check $1" "killed at its limit of ${limit_s}s"; fi
  return "$code"
}

# finished NAME: false, with a FAIL line, when the step was killed at its limit
finished() {
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    say FAIL "$1" "killed at its limit of ${limit_s}s"
    return 1
  fi
}

# need_gpus N: what torch sees (a PASS line), or, with fewer than N GPUs, a FAIL line and the end of
# the script; in --cpu mode a SKIP line
need_gpus() {
  gpus=0
  if [ "$mode" = cpu ]; then
    skip gpu "--cpu mode: gloo on CPU tensors"
    return
  fi
  limit gpu 25  # one torch import and CUDA's start: 8 s on the H100 probe
  local started=$SECONDS about
  about=$(timeout -k 2 "$limit_s" "$py" -c 'import torch
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(n, *((torch.cuda.get_device_name(0), "torch", torch.__version__, "nccl",
           ".".join(map(str, torch.cuda.nccl.version()))) if n else ()))' 2>/dev/null)
  wall=$((SECONDS - started))
  timed
  gpus=${about%% *}
  gpus=${gpus:-0}
  if [ "$gpus" -lt "$1" ]; then
    say FAIL gpu "torch sees $gpus CUDA device(s), $1 needed; nothing else can run (--cpu runs the steps on gloo)"
    finish
    exit 1
  fi
  say PASS gpu "$gpus GPU(s): ${about#* }"
}

free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# trun NAME SECONDS NPROC COMMAND [args...]: ranks under torchrun (whose exit is 1 for any worker failure)
trun() {
  local name="$1" nproc="$3" command="$4"
  limit "$name" $2  # "GPU_S [CPU_S]"
  shift 4
  local started=$SECONDS
  timeout -k 5 "$limit_s" "$py" -m torch.distributed.run --standalone --nproc_per_node "$nproc" -m nccl_bench \
    "$command" --out "$out_dir/runs/$name" "${backend[@]}" "$@" >"$out_dir/logs/$name.log" 2>&1
  rc=$?
  wall=$((SECONDS - started))
  timed
}

# direct NAME SECONDS COMMAND [args...]: one rank, no launcher (its layout exported by hand), so the
# exit code read is the tool's own
direct() {
  local name="$1" command="$3"
  limit "$name" $2  # "GPU_S [CPU_S]"
  shift 3
  local started=$SECONDS
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" \
    timeout -k 5 "$limit_s" "$py" -m nccl_bench "$command" --out "$out_dir/runs/$name" "${backend[@]}" "$@" \
    >"$out_dir/logs/$name.log" 2>&1
  rc=$?
  wall=$((SECONDS - started))
  timed
}

# workers NAME SECONDS N COMMAND [args...]: the launcher-less --workers path
workers() {
  local name="$1" n="$3" command="$4"
  limit "$name" $2  # "GPU_S [CPU_S]"
  shift 4
  local started=$SECONDS
  timeout -k 5 "$limit_s" "$py" -m nccl_bench "$command" --workers "$n" --out "$out_dir/runs/$name" "${backend[@]}" \
    "$@" >"$out_dir/logs/$name.log" 2>&1
  rc=$?
  wall=$((SECONDS - started))
  timed
}

# ok_run NAME: the step ran to completion with every row checked (extra args go to `checks run`)
ok_run() {
  local name="$1"
  shift
  finished "$name" || return 0
  if [ "$rc" != 0 ]; then
    say FAIL "$name" "exit $rc after ${wall}s: $(grep -m1 'nccl-bench: error' "$out_dir/logs/$name.log" || tail -n 1 "$out_dir/logs/$name.log")"
  else
    check run "$out_dir/runs/$name" --name "$name (${wall}s)" "$@"
  fi
}

# finish: the budget check, the count, one tarball of every run folder, log and capture; exit 1 on any FAIL
finish() {
  local budget
  budget=$(awk -v s="$budget_s" -v k="$scale" 'BEGIN { print int(s * k) }')
  limit rest "$rest_s"
  if [ "$planned_s" -lt "$budget" ]; then
    say PASS budget "the limits of steps, checkers and the rest add up to ${planned_s}s, under ${budget}s; the script took ${SECONDS}s"
  else
    say FAIL budget "the limits of steps, checkers and the rest add up to ${planned_s}s, not under ${budget}s; the script took ${SECONDS}s"
  fi
  local passed failed skipped kernels copies
  passed=$(grep -c '^PASS' "$out_dir/summary.txt")
  failed=$(grep -c '^FAIL' "$out_dir/summary.txt")
  skipped=$(grep -c '^SKIP' "$out_dir/summary.txt")
  kernels=$(grep -c '^PASS.*; proves: NCCL kernels' "$out_dir/summary.txt")
  copies=$(grep -c '^PASS.*; proves: one rank only' "$out_dir/summary.txt")
  if [ "$mode" = gpu ]; then
    echo "proof: $kernels passed step(s) ran NCCL's kernels across GPUs; $copies passed on one rank only (no link crossed)" | verdict
  else
    echo "proof: no NCCL in --cpu mode (gloo on CPU tensors)" | verdict
  fi
  echo "$passed passed, $failed failed, $skipped skipped ($mode mode)" | tee -a "$out_dir/summary.txt"
  tar -czf "$out_dir/runs.tar.gz" -C "$out_dir" runs logs fixtures
  echo "summary: $out_dir/summary.txt; every run folder, log and capture: $out_dir/runs.tar.gz"
  [ "$failed" = 0 ]
}
