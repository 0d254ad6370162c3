#!/usr/bin/env bash
# The NCCL path on one GPU, after the smoke: torchrun's error handling, --nccl-env values NCCL reads
# whole, --nccl-trace at one rank, NCCL's lines in a file, a real profiler trace read and replayed.
# Run where $OUT names a folder for the outputs (at most 8 files): OUT=DIR bash benchmarks/gpu_nccl_path.sh
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
t0=$SECONDS
timeout -k 5 300 bash benchmarks/gpu_smoke.sh /tmp/smoke >"$OUT/smoke_console.log" 2>&1
cp /tmp/smoke/summary.txt "$OUT/summary.txt"; cp /tmp/smoke/timings.txt "$OUT/timings.txt"
tar -czf "$OUT/smoke_runs.tar.gz" -C /tmp/smoke runs logs fixtures 2>/dev/null
echo "smoke took $((SECONDS - t0)) s" >>"$OUT/checks.log"
unset PYTHONUNBUFFERED
{
  port=29611
  echo "== 1. torchrun: the error-handling mode the ranks ran with"
  timeout 60 torchrun --nproc_per_node 1 --master_port $port -m nccl_bench sweep --op all_reduce --sizes 1M --min-sample-ms 5 --out /tmp/c1 >/tmp/c1.log 2>&1; echo "exit $?"
  python3 -c "import json;m=json.load(open('/tmp/c1/meta.json'));print('status',m.get('status'));print('error_handling',m.get('error_handling'));print('env',{k:v for k,v in m.get('env',{}).items() if 'ASYNC' in k})"
  echo "== 2. --nccl-env with NCCL's own grammar, one variant each (--workers 1)"
  timeout 90 python3 -m nccl_bench sweep --workers 1 --op all_reduce,all_gather --sizes 1M --min-sample-ms 5 --nccl-env 'NCCL_ALGO=allreduce:ring;allgather:^tree' --nccl-env NCCL_ALGO=^NVLS --out /tmp/c2 >/tmp/c2.log 2>&1; echo "exit $?"
  tail -n 15 /tmp/c2.log
  python3 -c "import csv;[print(r['op'],r['size_bytes'],r['variant'],r['busbw_gbps'],r['status'] if 'status' in r else '') for r in csv.DictReader(open('/tmp/c2/results.csv'))]"
  echo "== 3. --nccl-trace at one rank (NCCL_DEBUG kept), stdout a file"
  timeout 60 python3 -m nccl_bench sweep --op all_reduce,all_gather --sizes 1M,256M --no-inplace --nccl-trace --min-sample-ms 5 --out /tmp/c3 >/tmp/c3.log 2>&1; echo "exit $?"
  tail -n 12 /tmp/c3.log
  echo "== 4. NCCL WARN/INFO lines reach a file-backed stdout in order"
  NCCL_DEBUG=WARN timeout 60 python3 -m nccl_bench sweep --op all_reduce --sizes 1K --min-sample-ms 5 --out /tmp/c4 >/tmp/c4.log 2>&1; echo "exit $?"
  head -n 3 /tmp/c4.log
  echo "== 5. a real one-rank NCCL profiler trace, read by replay"
  timeout 60 python3 benchmarks/trace_job.py "$OUT/trace_1gpu_nccl.json" >/tmp/c5.log 2>&1; echo "exit $?"; tail -n 3 /tmp/c5.log
  timeout 60 python3 -m nccl_bench replay "$OUT/trace_1gpu_nccl.json" --json /tmp/c5.json 2>&1 | tail -n 12
  echo "== 6. replay under --workers 1 on NCCL"
  timeout 90 python3 -m nccl_bench replay "$OUT/trace_1gpu_nccl.json" --workers 1 --min-sample-ms 5 --out /tmp/c6 2>&1 | tail -n 14
} >>"$OUT/checks.log" 2>&1
gzip -f "$OUT/trace_1gpu_nccl.json" 2>/dev/null
echo "all took $((SECONDS - t0)) s" >>"$OUT/checks.log"
