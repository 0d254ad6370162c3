#!/usr/bin/env bash
# The whole GPU path in one go, on any machine with one or more NVIDIA GPUs, no network needed:
#   bash benchmarks/gpu_smoke.sh [OUT_DIR]        (default results/gpu_smoke_<UTC time>)
# Runs the tool as a user would (torchrun -m nccl_bench, NCCL), prints one PASS/FAIL line per
# check and a closing count, and keeps every log, run folder and hardware capture in OUT_DIR
# (fixtures/ holds nvidia-smi and NVML outputs to add to tests/fixtures/). Exit 1 if any check
# fails. About 3-6 minutes on one H100. Set PYTHON to choose the interpreter (default python3).
set -u
cd "$(dirname "$0")/.."
out_dir="${1:-results/gpu_smoke_$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out_dir/logs" "$out_dir/runs" "$out_dir/fixtures"
py="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
checks="$py benchmarks/gpu_smoke_checks.py"
: >"$out_dir/summary.txt"

verdict() { tee -a "$out_dir/summary.txt"; }  # PASS/FAIL lines, counted from the file at the end

say() { echo "$1 $2: $3" | verdict; }

# sweep NAME NPROC [sweep args...]: run one sweep under torchrun; rc and log kept for the caller
sweep() {
  local name="$1" nproc="$2"
  shift 2
  local started=$SECONDS
  timeout 300 "$py" -m torch.distributed.run --standalone --nproc_per_node "$nproc" -m nccl_bench sweep \
    --out "$out_dir/runs/$name" "$@" >"$out_dir/logs/$name.log" 2>&1
  rc=$?
  wall=$((SECONDS - started))
}

run_ok() {  # run_ok NAME NPROC [args]: a sweep that must complete with 0 wrong
  local name="$1"
  sweep "$@"
  if [ "$rc" != 0 ]; then
    say FAIL "$name" "exit $rc after ${wall}s: $(grep -m1 'nccl-bench: error' "$out_dir/logs/$name.log" || tail -n 1 "$out_dir/logs/$name.log")"
  else
    $checks run "$out_dir/runs/$name" --name "$name (${wall}s)" | verdict
  fi
}

# 1. The GPU and the hardware captures (future test fixtures).
gpus=$("$py" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null || echo 0)
if [ "$gpus" -lt 1 ]; then
  say FAIL gpu "torch sees no CUDA device; nothing else can run"
  echo "0 passed, 1 failed"
  exit 1
fi
say PASS gpu "$gpus GPU(s): $("$py" -c 'import torch; print(torch.cuda.get_device_name(0), "torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))')"
nvidia-smi -L >"$out_dir/fixtures/nvidia_smi_L.txt" 2>&1
nvidia-smi -q >"$out_dir/fixtures/query.txt" 2>&1
nvidia-smi topo -m >"$out_dir/fixtures/topo_m.txt" 2>&1
nvidia-smi nvlink -s >"$out_dir/fixtures/nvlink_status.txt" 2>&1
$checks nvml-dump "$out_dir/fixtures/nvml.json" | verdict

# 2. limits against the real nvidia-smi and NVML.
if "$py" -m nccl_bench limits --json >"$out_dir/fixtures/limits.json" 2>"$out_dir/logs/limits.log"; then
  say PASS limits "$("$py" -c 'import json,sys; p=json.load(open(sys.argv[1]))["peak"]; print(f"peak {p[\"peak_gbps\"]:.2f} GB/s, {p[\"label\"]} [{p[\"source\"]}]" if p else "no peak")' "$out_dir/fixtures/limits.json")"
else
  say FAIL limits "exit $?: $(tail -n 1 "$out_dir/logs/limits.log")"
fi

# 3. Every op, world size 1 (sendrecv is reported unsupported on one rank).
run_ok all_ops 1 --op all -b 1K -e 64M --min-sample-ms 20

# 4. CUDA graphs: every op with a bandwidth factor, and all_gather at 16 MiB against a copy.
run_ok cuda_graph 1 --op all_reduce,all_gather,reduce_scatter,broadcast,reduce,gather,scatter,all_to_all \
  --sizes 1K,1M,16M --cuda-graph 10 --min-sample-ms 20
[ -f "$out_dir/runs/cuda_graph/results.csv" ] && $checks d2d-vs-all-gather "$out_dir/runs/cuda_graph" | verdict

# 5. --cuda-graph with barrier in the op list: refused up front (exit 2, one line naming the
#    options) or run without capturing barrier; never a failure half-way.
sweep cuda_graph_barrier 1 --op all --sizes 1K --cuda-graph 10 --min-sample-ms 5
if [ "$rc" = 2 ] && grep -q -- "--cuda-graph" "$out_dir/logs/cuda_graph_barrier.log" && ! grep -q Traceback "$out_dir/logs/cuda_graph_barrier.log"; then
  say PASS cuda_graph_barrier "refused: $(grep -m1 'nccl-bench' "$out_dir/logs/cuda_graph_barrier.log")"
elif [ "$rc" = 0 ]; then
  $checks run "$out_dir/runs/cuda_graph_barrier" --name cuda_graph_barrier | verdict
else
  say FAIL cuda_graph_barrier "exit $rc: $(grep -m1 'error' "$out_dir/logs/cuda_graph_barrier.log")"
fi

# 6. Per-op latency mode.
run_ok blocking 1 --op all_reduce,all_gather -b 1K -e 16M --blocking --min-sample-ms 20

# 7. Every dtype, and every reduce op.
for dtype in float32 float16 bfloat16 float64 int8 uint8 int32 int64; do
  run_ok "dtype_$dtype" 1 --op all_reduce,reduce_scatter,reduce,all_gather --sizes 1K,1M -d "$dtype" --min-sample-ms 5
done
for redop in sum prod min max avg; do
  run_ok "redop_$redop" 1 --op all_reduce,reduce_scatter,reduce --sizes 1K,1M -o "$redop" --min-sample-ms 5
done

# 8. A large buffer, and one too large for the card: refused with one line, before allocating.
run_ok large 1 --op all_gather --sizes 8G --iters 5 --warmup 1
sweep too_large 1 --op all_gather --sizes 4T
if [ "$rc" = 2 ] && grep -q "memory" "$out_dir/logs/too_large.log" && ! grep -q Traceback "$out_dir/logs/too_large.log"; then
  say PASS too_large "$(grep -m1 'nccl-bench' "$out_dir/logs/too_large.log")"
else
  say FAIL too_large "exit $rc: $(tail -n 2 "$out_dir/logs/too_large.log" | tr '\n' ' ')"
fi

# 9. A planted stall (NCCL_BENCH_FAULT=stall-gpu:RANK:POINT: the rank's stream spins and it waits
#    in torch.cuda.synchronize, as when a GPU stops answering): the run must end within --timeout
#    plus a few seconds, name the timeout, keep the row already measured and say "failed". Once
#    with torch's watchdog, once with TORCH_NCCL_BLOCKING_WAIT=1 (no watchdog at all).
stall_timeout=10
for variant in watchdog blocking_wait; do
  if [ "$variant" = blocking_wait ]; then export TORCH_NCCL_BLOCKING_WAIT=1; fi
  NCCL_BENCH_FAULT=stall-gpu:0:1 sweep "stall_$variant" 1 --op all_gather --sizes 1K,1M --timeout "$stall_timeout" --min-sample-ms 5
  unset TORCH_NCCL_BLOCKING_WAIT
  status=$("$py" -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m.get("status"), m.get("rows"))' "$out_dir/runs/stall_$variant/meta.json" 2>/dev/null)
  if [ "$rc" = 1 ] && [ "$status" = "failed 1" ] && grep -q -- "--timeout" "$out_dir/logs/stall_$variant.log" && [ "$wall" -le $((stall_timeout + 30)) ]; then
    say PASS "stall_$variant" "ended in ${wall}s (--timeout $stall_timeout), 1 row kept: $(grep -m1 'nccl-bench: error' "$out_dir/logs/stall_$variant.log")"
  else
    say FAIL "stall_$variant" "exit $rc, meta status/rows ${status:-none}, ${wall}s: $(grep -m1 -i 'error\|abort' "$out_dir/logs/stall_$variant.log")"
  fi
done

# 10. Refusals and layouts that need a GPU count to judge.
sweep barrier_graph 1 --op barrier --cuda-graph 5
if [ "$rc" = 2 ] && grep -q -- "--cuda-graph: nothing left to capture" "$out_dir/logs/barrier_graph.log"; then
  say PASS barrier_graph "refused: $(grep -m1 'nccl-bench' "$out_dir/logs/barrier_graph.log")"
else
  say FAIL barrier_graph "exit $rc: $(tail -n 1 "$out_dir/logs/barrier_graph.log")"
fi
workers=$((gpus + 1))
timeout 120 "$py" -m nccl_bench sweep --workers "$workers" --sizes 1K --out "$out_dir/runs/too_many_workers" >"$out_dir/logs/too_many_workers.log" 2>&1
rc=$?
if [ "$rc" = 2 ] && grep -q -- "--workers: $workers NCCL workers need $workers GPUs" "$out_dir/logs/too_many_workers.log"; then
  say PASS too_many_workers "refused before any worker: $(grep -m1 'nccl-bench' "$out_dir/logs/too_many_workers.log")"
else
  say FAIL too_many_workers "exit $rc: $(tail -n 1 "$out_dir/logs/too_many_workers.log")"
fi
# srun giving each task its own GPU: one visible device, local rank 3 -> cuda:0
CUDA_VISIBLE_DEVICES=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0 SLURM_LOCALID=3 \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 timeout 120 "$py" -m nccl_bench sweep --op all_reduce,all_gather --sizes 1M \
  --min-sample-ms 5 --out "$out_dir/runs/srun_layout" >"$out_dir/logs/srun_layout.log" 2>&1
if [ "$?" = 0 ]; then
  $checks run "$out_dir/runs/srun_layout" --name "srun layout, local rank 3, one visible GPU" | verdict
else
  say FAIL srun_layout "$(grep -m1 'nccl-bench' "$out_dir/logs/srun_layout.log")"
fi
# meta.json records the NCCL and torch NCCL/flight-recorder environment and the library's version
NCCL_DEBUG=WARN TORCH_FR_BUFFER_SIZE=0 sweep meta_env 1 --op all_reduce --sizes 1K --min-sample-ms 5
"$py" - "$out_dir/runs/meta_env/meta.json" <<'PY' | verdict
import json, sys
import torch
meta = json.load(open(sys.argv[1]))
env, nccl = meta.get("env", {}), meta.get("versions", {}).get("nccl")
want = ".".join(map(str, torch.cuda.nccl.version()))
ok = env.get("NCCL_DEBUG") == "WARN" and env.get("TORCH_FR_BUFFER_SIZE") == "0" and nccl == want \
    and env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING") is not None
print(f"{'PASS' if ok else 'FAIL'} meta_env: env {sorted(env)}, versions.nccl {nccl} (library {want})")
PY
# calibration: a small out-of-place reduce_scatter must not settle at the minimum iterations
run_ok calibration 1 --op reduce_scatter --no-inplace --sizes 2K,4K,8K --trials 3
"$py" - "$out_dir/runs/calibration" <<'PY' | verdict
import sys
from nccl_bench.results.store import read_rows
rows = read_rows(sys.argv[1])
bad = [f"{r.size_bytes}: iters {r.iters} {r.flags}" for r in rows if r.iters <= 3 or "below_timer_resolution" in r.flags]
print(f"{'FAIL' if bad or not rows else 'PASS'} calibration_iters: " + ("; ".join(bad) or ", ".join(f"{r.size_bytes} B: {r.iters} iters" for r in rows)))
PY

# 11. Two ranks, where there are two GPUs.
if [ "$gpus" -ge 2 ]; then
  run_ok two_ranks 2 --op all -b 1K -e 256M
else
  echo "(two_ranks not run: one GPU; one GPU cannot hold two NCCL ranks)" | tee -a "$out_dir/summary.txt"
fi

passed=$(grep -c '^PASS' "$out_dir/summary.txt")
failed=$(grep -c '^FAIL' "$out_dir/summary.txt")
echo "$passed passed, $failed failed" | tee -a "$out_dir/summary.txt"
[ "$failed" = 0 ]
