#!/bin/bash
# BEFORE: a copy of main at c99a560 (git archive c99a560 | tar -x -C $BEFORE); AFTER: this branch at 394ac2f
# before (main at c99a560, a copy) and after (h47d), 16 and 64 simulated hosts, 3 runs each
PY=/work/main/.venv/bin/python
for hosts in 16 64; do
  for side in before after; do
    if [ $side = before ]; then dir="$BEFORE"; else dir="$AFTER"; fi
    echo "=== $side hosts=$hosts $(date -u +%H:%M:%S) uptime: $(uptime)"
    (cd $dir && $PY benchmarks/doctor_hosts.py --hosts $hosts --runs 3 --scenario healthy -- --config-only) 2>&1
    echo "=== end $(date -u +%H:%M:%S) uptime: $(uptime)"
  done
done
