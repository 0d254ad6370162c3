#!/usr/bin/env bash
# The checks the open issues (43, 44, 45, 46, 47) name for one GPU, after the smoke, in one call:
#   OUT=DIR bash benchmarks/gpu_open_issues.sh
# Each check prints its command, its exit code and the lines it judges into $OUT/checks.log; a person
# reads them (the verdicts are in benchmarks/RESULTS.md). At most 8 files land in $OUT: the smoke's
# summary, timings and console, checks.log, and three tarballs (smoke runs, these checks' run folders,
# the hardware captures as fixtures). Every process has a time limit; the whole stays under 7 minutes.
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
t0=$SECONDS
w=/tmp/open_issues
rm -rf "$w" && mkdir -p "$w"
timeout -k 5 300 bash benchmarks/gpu_smoke.sh /tmp/smoke >"$OUT/smoke_console.log" 2>&1
cp /tmp/smoke/summary.txt /tmp/smoke/timings.txt "$OUT/"
tar -czf "$OUT/smoke_runs.tar.gz" -C /tmp/smoke runs logs 2>/dev/null
tar -czf "$OUT/fixtures.tar.gz" -C /tmp/smoke fixtures 2>/dev/null
log="$OUT/checks.log"
echo "smoke took $((SECONDS - t0)) s" >"$log"
unset PYTHONUNBUFFERED
nb() { timeout -k 5 "$1" python3 -m nccl_bench "${@:2}"; }
# step NAME LIMIT ARGS...: one nccl_bench command, its output in $w/NAME.log, its exit code and first lines shown
step() {
  local name=$1 lim=$2; shift 2
  echo "== $name: nccl_bench $*"
  nb "$lim" "$@" >"$w/$name.log" 2>&1
  echo "exit $?"
  head -n 25 "$w/$name.log"
}
{
  echo "== 45. a GPU CUDA cannot see, a misspelt knob, one-rank in place, the memory refusal's margin"
  CUDA_VISIBLE_DEVICES=7 step hidden_default 60 sweep --op all_reduce --sizes 1K --min-sample-ms 5 --out "$w/hidden_default"
  CUDA_VISIBLE_DEVICES=7 step hidden_nccl 60 sweep --backend nccl --op all_reduce --sizes 1K --out "$w/hidden_nccl"
  CUDA_VISIBLE_DEVICES= step hidden_empty 60 sweep --op all_reduce --sizes 1K --min-sample-ms 5 --out "$w/hidden_empty"
  NCCL_ALGO=bogus step algo_env 60 sweep --op all_reduce --sizes 1K --out "$w/algo_env"
  step proto_flag 60 sweep --op all_reduce --sizes 1K --nccl-env NCCL_PROTO=bogus --out "$w/proto_flag"
  step in_place 90 sweep --op all_reduce --sizes 1K,1M,1G --min-sample-ms 20 --out "$w/in_place"
  python3 - "$w/in_place/results.csv" <<'EOF'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print({k: r.get(k) for k in ("op", "size_bytes", "inplace", "time_us", "algbw_gbps", "busbw_gbps", "flags")})
EOF
  timeout 60 python3 - "$w/held" <<'EOF' &
import sys, time, torch
free, total = torch.cuda.mem_get_info()
held = torch.empty(free - 6 * 2**30, dtype=torch.uint8, device="cuda")
print(f"holding {held.numel() / 2**20:,.0f} MiB of {total / 2**20:,.0f} MiB", flush=True)
open(sys.argv[1], "w").write("held")
time.sleep(45)
EOF
  holder=$!
  for _ in $(seq 1 40); do [ -f "$w/held" ] && break; sleep 0.5; done
  step memory_margin 60 sweep --sizes 1G,3G --op all_gather --no-inplace --out "$w/memory_margin"
  timeout 20 nvidia-smi --query-gpu=memory.used,memory.total --format=csv
  kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null

  echo "== 43. a one-rank history on NCCL: four runs, then every reader"
  for i in 1 2 3 4; do
    nb 60 sweep --op all_reduce,all_gather,broadcast --sizes 1K,1M,16M --min-sample-ms 10 --history "$w/h.sqlite" \
      --out "$w/hist$i" >"$w/hist$i.log" 2>&1
    echo "run $i exit $?"
  done
  step history_show 30 history show --history "$w/h.sqlite"
  step history_check 30 history check --history "$w/h.sqlite" --junit "$w/check.xml"
  step history_check_json 30 history check --history "$w/h.sqlite" --json
  step history_html 30 history html "$w/history.html" --history "$w/h.sqlite"
  ls -la "$w/history.html" "$w/check.xml" 2>&1

  echo "== 47. the doctor's configuration phase on a real GPU (NVML, nvidia-smi -q, /proc)"
  step doctor_config 60 doctor --config-only --workers 1 --json "$w/doctor_config.json"
  python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(json.dumps(d['config'],indent=1)[:6000])" "$w/doctor_config.json"

  echo "== 46. a stall behind GPU work, with torch's NCCL flight recorder on: where the rank stood"
  NCCL_BENCH_FAULT=stall-behind-gpu:0:1 TORCH_FR_BUFFER_SIZE=2000 step stall_fr 60 sweep --op all_gather \
    --no-inplace --sizes 1K,1M --timeout 5 --out "$w/stall_fr"
  tail -n 20 "$w/stall_fr.log"
  python3 -c "import json,sys;m=json.load(open(sys.argv[1]));print('status',m.get('status'));[print(k,json.dumps(m[k])[:1500]) for k in m if 'stood' in k or 'flight' in k or 'position' in k or 'stall' in k]" "$w/stall_fr/meta.json"

  echo "== 44. a real one-GPU training trace: read, its exposure, replayed on NCCL"
  timeout 60 python3 benchmarks/trace_job.py "$w/trace.json" >"$w/trace_job.log" 2>&1; echo "trace exit $?"
  step replay_profile 60 replay "$w/trace.json" --json "$w/replay_profile.json"
  step replay_run 90 replay "$w/trace.json" --workers 1 --min-sample-ms 5 --out "$w/replay_run"
  echo "== 44. the same replay in CUDA graphs: a complete run, its alone-here time kernel time (the graph's note)"
  step replay_graph 90 replay "$w/trace.json" --workers 1 --cuda-graph 10 --min-sample-ms 5 --out "$w/replay_graph"
  grep "^# alone here:" "$w/replay_graph.log" || echo "no '# alone here' line"
  grep -A3 "^# launch path:" "$w/replay_graph.log" || echo "no '# launch path' line (kernel time beside the launch path's)"
  python3 -c "import json,sys;m=json.load(open(sys.argv[1]));print('status',m.get('status'),'alone_here',m['config'].get('alone_here'))" "$w/replay_graph/meta.json"
} >>"$log" 2>&1
gzip -f "$w/trace.json" 2>/dev/null
tar -czf "$OUT/checks_runs.tar.gz" -C "$w" . 2>/dev/null
echo "all took $((SECONDS - t0)) s" >>"$log"
