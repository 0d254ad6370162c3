"""`nccl-bench doctor` on simulated hosts: launch and set-up time, memory, time per round against the
printed estimate, shaped vs unshaped pair busbw, verdicts.

Builds the same namespaces as tests/integration/test_doctor_hosts.py (tests/helpers/simhosts.py: one
rank per host, hosts node001, node002, ..., a Linux bridge, gloo over each host's own interface),
then for each scenario runs the doctor --runs times and prints, per run: the wall time of the whole
launch (process start to the last exit), the set-up costs meta.json records (init_s: the process
group made; first_op_s: the first collective), the peak of the ranks' summed resident memory, the
pair rounds' measured time against the estimate rank 0 printed, the doctor's own wall_s, the
verdict, and the busbw of shaped and unshaped pairs (first attempts; re-tests are listed apart);
also the time from launch to rank 0's verdict line, the load average before and at the verdict,
the packets the kernel's backlog dropped meanwhile (the simulated switch losing frames), and rank
0's host against the others. --nic-rate limits every host's NIC, so that the fabric, not the shared
CPUs, is what pairs measure (needed from ~32 hosts on two cores: benchmarks/RESULTS.md).

A run that ends without a verdict shows what the ranks said (each distinct last line once, with the
ranks that said it) and their exit codes; a run past --limit is ended, every rank's process group
killed, before the namespaces go. Needs root, iproute2, tc.

    python benchmarks/doctor_hosts.py --runs 3 [--hosts 4] [--rate 200mbit] [--tolerance 20%] [--busy 2]
    python benchmarks/doctor_hosts.py --hosts 64 --runs 1 --scenario link --nic-rate 200mbit --rate 20mbit -- --size 1M
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.processes import busy_loops  # noqa: E402
from tests.helpers.simhosts import simulated_hosts, why_no_namespaces  # noqa: E402

SCENARIOS = ("healthy", "node", "link")
MEMORY_POLL_S = 0.5  # how often the ranks' resident memory is summed
# rank 0's estimate line (render/doctor_text.estimate_line): "N round(s) x ~S s = ~T s"
ESTIMATE = re.compile(r"(\d+) round\(s\) x ~([0-9.]+) s")
RETEST = "# re-test in"
VERDICT = "# verdict:"  # rank 0's summary line (render/doctor_text.summary_lines)
LAST_LINES = 3  # of each rank's output, shown when a run ends without a verdict


@dataclass
class Launch:
    """One doctor launch: what the harness saw from outside the ranks."""

    wall_s: float = 0.0
    codes: list[int | None] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    peak_rss_bytes: int = 0
    rounds: int = 0
    estimate_per_round_s: float | None = None
    measured_per_round_s: float | None = None
    ended_by_limit: bool = False
    to_verdict_s: float | None = None  # from the first rank's start to rank 0's verdict line
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)  # os.getloadavg() as the launch starts
    load_at_verdict: tuple[float, float, float] | None = None
    dropped_packets: int = 0  # by the kernel's per-CPU backlog during the launch (/proc/net/softnet_stat)


def _dropped_packets() -> int:
    """Packets the kernel dropped because a CPU's backlog was full (net.core.netdev_max_backlog), all
    CPUs: the simulated switch losing frames, which gloo sees as "No route to host" and retries."""
    try:
        with open("/proc/net/softnet_stat", encoding="ascii") as handle:
            return sum(int(line.split()[1], 16) for line in handle if line.strip())
    except (OSError, ValueError, IndexError):
        return 0


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _read_rank_zero(proc: subprocess.Popen, lines: list[tuple[float, str]], launch: Launch) -> None:
    for line in proc.stdout:
        lines.append((time.monotonic(), line))
        if line.startswith(VERDICT) and launch.load_at_verdict is None:
            launch.load_at_verdict = os.getloadavg()


def _per_round(lines: list[tuple[float, str]], launch: Launch) -> None:
    """The first pass's rounds timed from rank 0's own lines: the estimate line, to the re-test line or,
    without re-tests, to the first line of the report after the rounds."""
    start = next(((t, m) for t, line in lines if (m := ESTIMATE.search(line))), None)
    if start is None:
        return
    started, match = start
    launch.rounds, launch.estimate_per_round_s = int(match.group(1)), float(match.group(2))
    after = [t for t, line in lines if t > started and line.strip()]
    ended = next((t for t, line in lines if t > started and line.startswith(RETEST)), after[0] if after else None)
    if ended is not None and launch.rounds:
        launch.measured_per_round_s = (ended - started) / launch.rounds


def _run(hosts, folder: Path, count: int, tolerance: str, timeout_s: float, limit_s: float, env_extra: dict[str, str],
         extra: list[str]) -> Launch:
    hosts_file = hosts.hosts_file(folder)
    out = folder / "run"
    procs: list[subprocess.Popen] = []
    launch = Launch()
    rank_zero_lines: list[tuple[float, str]] = []
    readers: list[threading.Thread] = []
    launch.load_before = os.getloadavg()
    dropped_before = _dropped_packets()
    started = time.monotonic()
    try:
        for host in range(count):
            env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO),
                       MASTER_ADDR=hosts.hostnames[0], MASTER_PORT="29591", OMPI_COMM_WORLD_RANK=str(host),
                       OMPI_COMM_WORLD_SIZE=str(count), OMPI_COMM_WORLD_LOCAL_RANK="0",
                       OMPI_COMM_WORLD_LOCAL_SIZE="1", **env_extra)
            argv = [sys.executable, "-m", "nccl_bench", "doctor", "--tolerance", tolerance,
                    "--timeout", f"{timeout_s:g}", "--out", str(out), *extra]
            # Each rank in a session of its own: ending the run kills its whole process group.
            procs.append(subprocess.Popen(hosts.command(host, hosts_file, argv), stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO,
                                          start_new_session=True))
        readers.append(threading.Thread(target=_read_rank_zero, args=(procs[0], rank_zero_lines, launch),
                                        daemon=True))
        others: list[list[str]] = [[] for _ in procs[1:]]
        readers += [threading.Thread(target=lambda p=p, o=o: o.extend(p.stdout), daemon=True)
                    for p, o in zip(procs[1:], others, strict=True)]
        for reader in readers:
            reader.start()
        while any(p.poll() is None for p in procs):
            if time.monotonic() - started > limit_s:
                launch.ended_by_limit = True
                break
            launch.peak_rss_bytes = max(launch.peak_rss_bytes, sum(_rss_bytes(p.pid) for p in procs))
            time.sleep(MEMORY_POLL_S)
        launch.wall_s = time.monotonic() - started
        launch.dropped_packets = _dropped_packets() - dropped_before
    finally:
        for proc in procs:  # never leave a rank behind: each rank's whole process group
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for proc in procs:
            proc.wait()
    for reader in readers:
        reader.join(timeout=5)
    launch.codes = [p.returncode for p in procs]
    launch.outputs = ["".join(line for _, line in rank_zero_lines), *("".join(o) for o in others)]
    _per_round(rank_zero_lines, launch)
    launch.to_verdict_s = next((t - started for t, line in rank_zero_lines if line.startswith(VERDICT)), None)
    return launch


def _load_text(launch: Launch) -> str:
    """The 1-minute load average as the launch started (other work on the machine) and at the verdict
    (the ranks' own load on top)."""
    at = f", {launch.load_at_verdict[0]:.2f} at the verdict" if launch.load_at_verdict else ""
    return f"load {launch.load_before[0]:.2f} before{at}; {launch.dropped_packets} packet(s) dropped by the backlog"


def _what_ranks_said(launch: Launch) -> list[str]:
    """Each distinct last few lines of the ranks' output once, with the ranks that wrote them."""
    said: dict[str, list[int]] = {}
    for rank, text in enumerate(launch.outputs):
        tail = "\n".join(line for line in text.strip().splitlines()[-LAST_LINES:]) or "(nothing)"
        said.setdefault(tail, []).append(rank)
    return [f"  ranks {_ranges(ranks)}:\n    " + tail.replace("\n", "\n    ") for tail, ranks in said.items()]


def _ranges(ranks: list[int]) -> str:
    parts, start = [], None
    for index, rank in enumerate(ranks):
        if start is None:
            start = rank
        if index + 1 == len(ranks) or ranks[index + 1] != rank + 1:
            parts.append(str(start) if start == rank else f"{start}-{rank}")
            start = None
    return ",".join(parts)


def _report(scenario: str, run: int, launch: Launch, out: Path, shaped: set[str]) -> float | None:
    """Print one run's line (or what the ranks said without a verdict); its doctor wall_s, if any."""
    codes = ", ".join(f"{code}x{launch.codes.count(code)}" for code in sorted(set(launch.codes), key=str))
    memory = f"peak RSS of all ranks {launch.peak_rss_bytes / 2**30:.2f} GiB"
    verdict_file = out / "doctor.json"
    if not verdict_file.is_file():
        why = f"ended by --limit after {launch.wall_s:.0f} s" if launch.ended_by_limit else "no doctor.json"
        if (out / "doctor.csv").is_file():
            with open(out / "doctor.csv", newline="") as handle:
                done = {row["round"] for row in csv.DictReader(handle) if row["phase"] == "pairs"}
            why += f", {len(done)} pair round(s) in doctor.csv"
        rounds = ""
        if launch.measured_per_round_s is not None:
            rounds = (f"; first {launch.rounds} rounds: {launch.measured_per_round_s:.2f} s each, estimate "
                      f"{launch.estimate_per_round_s:.2f} s")
        print(f"{scenario:8s} run {run}: no verdict ({why}); {_load_text(launch)}; launch {launch.wall_s:.1f} s, "
              f"exit codes {codes}, "
              f"{memory}{rounds}")
        print("\n".join(_what_ranks_said(launch)))
        return None
    verdict = json.loads(verdict_file.read_text())
    timings = json.loads((out / "meta.json").read_text()).get("timings", {})
    with open(out / "doctor.csv", newline="") as handle:
        records = list(csv.DictReader(handle))
    pairs = [r for r in records if r["phase"] == "pairs"]
    first = [r for r in pairs if r["attempt"] == "1"]
    key = lambda r: ";".join(sorted(r["hosts"].split(";")))  # noqa: E731
    unshaped = sorted(float(r["best_busbw_gbps"]) for r in first if key(r) not in shaped)
    slow = sorted(float(r["best_busbw_gbps"]) for r in first if key(r) in shaped)
    first_of = {r["hosts"]: float(r["best_busbw_gbps"]) for r in first}
    retested = [f"{r['hosts']}={first_of.get(r['hosts'], float('nan')):.3f}>{float(r['best_busbw_gbps']):.3f}"
                for r in pairs if r["attempt"] != "1"]
    named = [f"{s['kind']} {'-'.join(s['hosts'])}" for s in verdict["suspects"]] or ["nobody"]
    set_up = ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
    rounds = ""
    if launch.measured_per_round_s is not None:
        estimate = launch.estimate_per_round_s
        ratio = launch.measured_per_round_s / estimate if estimate else float("nan")
        rounds = (f"; {launch.rounds} rounds: {launch.measured_per_round_s:.2f} s each, estimate "
                  f"{launch.estimate_per_round_s:.2f} s (x{ratio:.2f})")
        # The shaped pairs' rounds are slow by design; the others are what the estimate is for.
        slow_s = sum((int(r["samples"]) * int(r["iters"]) + 1) * float(r["time_us"]) * 1e-6 for r in first
                     if key(r) in shaped)
        slow_rounds = len({r["round"] for r in first if key(r) in shaped})
        if slow_rounds and launch.rounds > slow_rounds:
            rest = (launch.measured_per_round_s * launch.rounds - slow_s) / (launch.rounds - slow_rounds)
            rounds += f", {rest:.2f} s (x{rest / estimate:.2f}) without the shaped pairs' rounds"
    spread = (f"unshaped pairs GB/s median {statistics.median(unshaped):.3f} (min {unshaped[0]:.3f}, "
              f"max {unshaped[-1]:.3f})") if unshaped else "no unshaped pair"
    to_verdict = f"{launch.to_verdict_s:.1f} s" if launch.to_verdict_s is not None else "?"
    print(f"{scenario:8s} run {run}: {_load_text(launch)}; launch {launch.wall_s:5.1f} s (verdict at {to_verdict}), "
          f"doctor {verdict['wall_s']:5.1f} s, set-up "
          f"{set_up}, {memory}, exit codes {codes}{rounds}; named {', '.join(named)}; {spread}"
          + (f"; shaped {', '.join(f'{v:.4f}' for v in slow)}" if slow else "")
          + (f"; re-tests (first>again) {', '.join(retested)}" if retested else "")
          + _noise_text(verdict))
    print(f"         {_first_host_text(first, shaped, key)}")
    for suspect in verdict["suspects"]:
        print(f"         {suspect['kind']} {'-'.join(suspect['hosts'])}: {suspect['reason']}")
    return float(verdict["wall_s"])


def _noise_text(verdict: dict) -> str:
    """The pair bar and the controls' repeat noise the verdict used (doctor.json)."""
    bar = (verdict.get("thresholds_gbps") or {}).get("pairs")
    noise = verdict.get("repeat_noise")
    return ((f"; pair bar {bar:.3f}" if bar else "")
            + (f"; controls {noise['controls']}: shift {noise['shift']:+.2f}, repeat sigma {noise['sigma']:.2f}"
               if noise else ""))


def _first_host_text(first: list[dict], shaped: set[str], key) -> str:
    """Rank 0's host against the others: its median unshaped pair busbw and its place among the hosts'
    medians (1 = the lowest). Rank 0 holds the rendezvous store and writes doctor.csv, so a bias there
    would show as a low place in every run."""
    per_host: dict[str, list[float]] = {}
    for record in first:
        if key(record) not in shaped:
            for host in record["hosts"].split(";"):
                per_host.setdefault(host, []).append(float(record["best_busbw_gbps"]))
    if not per_host:
        return "no unshaped pair"
    medians = {host: statistics.median(values) for host, values in per_host.items()}
    host = min(medians)  # node001: rank 0's host
    place = sorted(medians.values()).index(medians[host]) + 1
    others = statistics.median(v for h, v in medians.items() if h != host)
    return (f"rank 0's host {host}: median unshaped pair busbw {medians[host]:.3f} GB/s, place {place} of "
            f"{len(medians)} from the lowest; the other hosts' medians: median {others:.3f} GB/s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--rate", default="200mbit", help="tc rate of the shaped host or pair")
    parser.add_argument("--nic-rate", help="tc rate of every host's NIC (default: unlimited; the CPUs decide)")
    parser.add_argument("--tolerance", default="50%", help="passed to doctor (the tests use 70%%)")
    parser.add_argument("--timeout", type=float, default=60, help="the doctor's --timeout, seconds")
    parser.add_argument("--limit", type=float, default=900, help="seconds before the harness ends a launch")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="added to every rank's env")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="default: all three")
    parser.add_argument("--busy", type=int, default=0, help="busy loops to run beside every launch")
    parser.add_argument("extra", nargs="*", help="more doctor options after --")
    args = parser.parse_args()
    with busy_loops(args.busy):
        return _scenarios(args)


def _scenarios(args) -> int:
    reason = why_no_namespaces(("ip", "unshare", "mount", "tc"))
    if reason:
        print(f"cannot run: {reason}")
        return 2
    if args.hosts < 4:
        print("cannot run: --hosts must be 4 or more (hosts 2 and 3 are the shaped ones)")
        return 2
    env_extra = dict(item.split("=", 1) for item in args.env)
    print(f"# load average before: {os.getloadavg()}; {args.hosts} hosts, --timeout {args.timeout:g}, env {env_extra}, "
          f"shaped {args.rate}, NICs {args.nic_rate or 'unlimited'}, doctor options {args.extra}, "
          f"{args.busy} busy loop(s)")
    for scenario in args.scenario or SCENARIOS:
        doctor_walls = []
        for run in range(1, args.runs + 1):
            tag = f"{os.getpid() % 10000:04d}"
            with tempfile.TemporaryDirectory() as folder, simulated_hosts(args.hosts, tag) as hosts:
                shaped = set()
                if args.nic_rate:
                    hosts.limit_nics(args.nic_rate)
                if scenario == "node":
                    hosts.shape_host(2, args.rate)
                    slow_host = hosts.hostnames[2]
                    shaped = {";".join(sorted((slow_host, h))) for h in hosts.hostnames if h != slow_host}
                elif scenario == "link":
                    hosts.shape_pair(1, 3, args.rate)
                    shaped = {";".join(sorted((hosts.hostnames[1], hosts.hostnames[3])))}
                launch = _run(hosts, Path(folder), args.hosts, args.tolerance, args.timeout, args.limit, env_extra,
                              args.extra)
                wall = _report(scenario, run, launch, Path(folder) / "run", shaped)
            if wall is not None:
                doctor_walls.append(wall)
        if doctor_walls:
            median = statistics.median(doctor_walls)
            print(f"{scenario:8s} median doctor {median:.1f} s over {len(doctor_walls)} run(s)")
    print(f"# load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
