#!/usr/bin/env bash
# The checks of what changed after a full gpu_open_issues.sh run, in one short call (about 2 minutes):
#   OUT=DIR bash benchmarks/gpu_followup.sh
# 47: `doctor --config-only` without torch (one rank in an srun-like layout, rank 0 owning MASTER_PORT):
#     its versions read from torch's files and libnccl against what torch itself says, and no torch import.
# 44: `replay --cuda-graph` of a real one-GPU trace: kernel time with the launch path's time beside it.
# Everything lands in $OUT/followup.log (and the run folders in $OUT/followup_runs.tar.gz).
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD"
w=/tmp/followup
rm -rf "$w" && mkdir -p "$w"
log="$OUT/followup.log"
t0=$SECONDS
{
  echo "== 47. versions without torch against torch's own"
  timeout 60 python3 - <<'PY'
from nccl_bench.hardware import stack
import torch
print("stack.torch_version", stack.torch_version(), "torch", torch.__version__)
print("stack.torch_cuda_build", stack.torch_cuda_build(), "torch.version.cuda", torch.version.cuda)
print("stack.nccl_library", stack.nccl_library())
print("stack.nccl_version", stack.nccl_version(), "torch.cuda.nccl.version", torch.cuda.nccl.version())
PY
  echo "== 47. doctor --config-only without torch, one rank (srun-like layout), -X importtime"
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29561 \
    timeout 60 python3 -X importtime -m nccl_bench doctor --config-only --timeout 20 --json "$w/config_nt.json" \
    --out "$w/config_nt" >"$w/config_nt.log" 2>"$w/config_nt.stderr"
  echo "exit $?"
  cat "$w/config_nt.log"
  grep -v "^import time:" "$w/config_nt.stderr" | head -20
  echo "torch modules imported: $(grep -cE '\| +torch(\.|$)' "$w/config_nt.stderr")"
  python3 -c "import json,sys;d=json.load(open(sys.argv[1]));h=d['config']['hosts'][0];[print(k,v) for k,v in h['facts'].items()];print(h['gpus'])" "$w/config_nt.json"
  if [ -f benchmarks/trace_job.py ]; then
    echo "== 44. replay --cuda-graph of a real one-GPU trace: kernel time and the launch path beside it"
    timeout 60 python3 benchmarks/trace_job.py "$w/trace.json" >"$w/trace_job.log" 2>&1; echo "trace exit $?"
    timeout 90 python3 -m nccl_bench replay "$w/trace.json" --workers 1 --cuda-graph 10 --min-sample-ms 5 \
      --out "$w/replay_graph" --json "$w/replay_graph.json" >"$w/replay_graph.log" 2>&1
    echo "exit $?"
    cat "$w/replay_graph.log"
    python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(json.dumps(d.get('rows', d)[:5] if isinstance(d.get('rows'), list) else d, indent=1)[:4000])" "$w/replay_graph.json"
  fi
} >"$log" 2>&1
tar -czf "$OUT/followup_runs.tar.gz" -C "$w" . 2>/dev/null
echo "all took $((SECONDS - t0)) s" >>"$log"
