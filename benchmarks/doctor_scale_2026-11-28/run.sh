#!/bin/bash
cd /work/main
PY=/work/main/.venv/bin/python
B=benchmarks/doctor_hosts.py
run() { name=$1; shift; echo "=== $name $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) commit $(git rev-parse --short HEAD)" >> /tmp/m47/index; $PY $B "$@" > /tmp/m47/$name.log 2>&1; echo "    rc $? end $(date -u +%T)" >> /tmp/m47/index; }
run q64node --hosts 64 --runs 2 --scenario node --nic-rate 200mbit --rate 100mbit --tolerance 20% --limit 900 -- --quick
run q64healthy --hosts 64 --runs 5 --scenario healthy --nic-rate 200mbit --tolerance 20% --limit 900 -- --quick
run q32node --hosts 32 --runs 2 --scenario node --nic-rate 200mbit --rate 100mbit --tolerance 20% --limit 900 -- --quick
run full64contended --hosts 64 --runs 1 --scenario link --rate 20mbit --tolerance 20% --limit 900
run cfg64 --hosts 64 --runs 1 --scenario healthy --limit 600 -- --config-only
run full64node --hosts 64 --runs 1 --scenario node --nic-rate 200mbit --rate 100mbit --tolerance 20% --limit 900
echo ALLDONE >> /tmp/m47/index
