#!/usr/bin/env bash
# Set up a virtual environment and run one of the two everyday jobs:
#   bash scripts/dev.sh sweep [sweep options]   a sweep on this host (local ranks; gloo on CPU without a GPU)
#   bash scripts/dev.sh test [pytest options]   ruff, then the test suite
# On a host without an NVIDIA GPU it installs torch's CPU build, so set-up takes seconds, not a
# multi-GB CUDA download. Set NCCL_BENCH_TORCH to choose the torch requirement yourself, and
# NCCL_BENCH_TORCH_INDEX to an index of CPU wheels on a machine that has none on disk.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${NCCL_BENCH_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
py="$venv/bin/python"
pip_quiet=(-m pip install --quiet --disable-pip-version-check)

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

# torch first chosen (the CPU build where no GPU is seen), then installed in the same pip call as the
# package, so that one resolver run serves both; a separate index of torch wheels needs its own call.
torch_spec=""
if ! "$py" -c "import torch" >/dev/null 2>&1; then
  if [ -n "${NCCL_BENCH_TORCH:-}" ]; then
    torch_spec="$NCCL_BENCH_TORCH"
  elif has_gpu; then
    torch_spec="torch>=2.3"
  else
    torch_spec="torch==2.13.0"  # the CPU build this workplace keeps on disk (see README)
  fi
  if [ -n "${NCCL_BENCH_TORCH_INDEX:-}" ]; then
    echo "dev.sh: installing $torch_spec into $venv from $NCCL_BENCH_TORCH_INDEX" >&2
    "$py" "${pip_quiet[@]}" --index-url "$NCCL_BENCH_TORCH_INDEX" "$torch_spec"
    torch_spec=""
  fi
fi

# Reinstall the package only when its declared dependencies change (or torch comes with it). pip is told
# not to compile every module it installs (torch alone has thousands, a third of the install's time);
# one import of what a run loads then compiles those, and bytecode is written even where the
# environment says not to (PYTHONDONTWRITEBYTECODE), so no later process compiles torch again.
stamp="$venv/.nccl-bench-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ -n "$torch_spec" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "dev.sh: installing ${torch_spec:+$torch_spec and }nccl-bench (editable) with its test and plot extras into $venv" >&2
  "$py" "${pip_quiet[@]}" --no-compile ${torch_spec:+"$torch_spec"} -e ".[test,plot]"
  env -u PYTHONDONTWRITEBYTECODE "$py" -c "import torch, torch.distributed, torch.distributed.run, matplotlib.pyplot, \
nccl_bench.cli.entry, nccl_bench.sweep.sweep_body, nccl_bench.doctor.doctor_body, nccl_bench.replay.replay_body"
  echo "$want" > "$stamp"
fi

job="${1:-}"
shift || true
case "$job" in
  sweep) exec "$venv/bin/nccl-bench" sweep "$@" ;;
  test)
    # System programs some tests start for real, installed where we may (root with apt), all in one apt
    # call: iproute2 (network namespaces for simulated hosts), chromium (the HTML report opened headless),
    # slurm-wlm, munge and openmpi-bin (real slurmctld, slurmd, munged and mpirun), postgresql (initdb and
    # pg_ctl for the PostgreSQL results store). A test whose program is missing skips, naming it.
    has() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
    missing=()
    has ip || missing+=(iproute2)
    has chromium || missing+=(chromium)
    { has slurmd && has slurmctld && has munged; } || missing+=(slurm-wlm munge)
    has mpirun || missing+=(openmpi-bin)
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
    if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "dev.sh: installing ${missing[*]} for the tests that start them" >&2
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=120 \
        "${missing[@]}") >/dev/null 2>&1 || echo "dev.sh: could not install ${missing[*]}; the tests that need them will skip" >&2
    fi
    "$venv/bin/ruff" check nccl_bench tests benchmarks  # a lint error fails the command before any test runs
    # Every test starts ranks, each a fresh interpreter: compiled once here (and pytest's rewritten test
    # modules cached by the first worker), they are read, not compiled again, by the thousand processes after.
    unset PYTHONDONTWRITEBYTECODE
    "$py" -m compileall -q nccl_bench >/dev/null
    # Two passes (tests/conftest.py says which test goes where). First every test but the `alone` ones,
    # in parallel (pytest-xdist) on three workers more than the cores: a group that must not run beside its
    # own kind shares one worker, and the two largest (`timing`, `signals`) mostly wait on deadlines and
    # signals, as do the launches of the rest once their ranks are forked rather than started afresh
    # (tests/helpers/rank_zygote.py), so spare workers keep the cores busy (benchmarks/RESULTS.md has the
    # paired runs). Then the `alone` tests, one at a time on a quiet machine: what they judge (a run-to-run
    # spread of a few percent through tc-shaped links) moves with the load beside them. Exit 5 is pytest's
    # "nothing selected", which a pass that a test selection leaves empty is; the command fails if either
    # pass fails.
    passed() { [ "$1" = 0 ] || [ "$1" = 5 ]; }
    parallel=0; alone=0
    workers="${NCCL_BENCH_TEST_WORKERS:-$(($(nproc) + 3))}"
    "$py" -m pytest -n "$workers" --dist loadgroup -m "not alone" "$@" || parallel=$?
    "$py" -m pytest -p no:xdist -m alone "$@" || alone=$?
    if [ "$parallel" = 5 ] && [ "$alone" = 5 ]; then exit 5; fi
    passed "$parallel" || exit "$parallel"
    passed "$alone" || exit "$alone"
    exit 0 ;;
  *) echo "usage: bash scripts/dev.sh sweep|test [options]" >&2; exit 2 ;;
esac
