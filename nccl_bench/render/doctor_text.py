"""What `nccl-bench doctor` shows: header, estimate, node table, suspects, the pair heatmap.

Functions return lines, tables or figures; render/live.DoctorReporter prints them and saves the heatmap.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text

from nccl_bench.doctor.doctor_config import option_name
from nccl_bench.doctor.doctor_report import DoctorHeader, DoctorReport
from nccl_bench.doctor.roster import excluded_hosts
from nccl_bench.doctor.verdicts import Judgement, gbps
from nccl_bench.render.escape import one_line
from nccl_bench.render.fit import Column, render_lines
from nccl_bench.render.tables import header_tail, setup_lines, versions_line
from nccl_bench.units.hostlist import compress
from nccl_bench.units.sizes import format_size

if TYPE_CHECKING:
    from matplotlib.figure import Figure

ANNOTATE_MAX_NODES = 16  # beyond this the cells are too small to print a number in


def header_lines(header: DoctorHeader) -> list[str]:
    ranks = {len(n.ranks) for n in header.nodes}
    per_node = f"{ranks.pop()} rank(s) each" if len(ranks) == 1 else "uneven ranks per node"
    rounds = f"{header.rounds} round(s)" + (" of random pairings" if header.mode == "quick" else " (circle method)")
    run = header.run
    lines = [
        f"# nccl_bench doctor: backend {run.backend} via {run.launcher}, {run.world_size} ranks on "
        f"{len(header.nodes)} node(s), {per_node} ({', '.join(n.host for n in header.nodes)})",
        versions_line(run.versions),
        *setup_lines(run.timings),
    ]
    if header.config_only:
        lines.append(f"# phases: config only ({option_name('config_only')}): every host's configuration against "
                     "the fleet's, nothing measured")
        return lines + header_tail(run.run_dir, header.notes)
    lines += [
        f"# phases: config, {', '.join(header.phases)}; {header.mode} mode, {rounds}",
        f"# measurement: {format_size(header.size_bytes)} per message, warmup {header.warmup}, "
        f"{header.samples} samples of {header.iters}; "
        "pairs: two-way isend/irecv, busbw = size/time (factor 1, as sendrecv); "
        "nodes: all_reduce, busbw factor 2(n-1)/n",
        f"# verdicts: suspect below the fleet median by more than {header.tolerance:.0%}"
        + (f" or below {option_name('expect_gbps')} {gbps(header.expect_gbps)} GB/s"
           if header.expect_gbps is not None else "")
        + ", confirmed by a re-test",
    ]
    return [one_line(line) for line in lines] + header_tail(run.run_dir, header.notes)


def estimate_line(rounds: int, per_round_s: float) -> str:
    return (f"# estimate: {rounds} round(s) x ~{per_round_s:.2f} s = ~{rounds * per_round_s:.1f} s "
            "for the pairs, plus re-tests of anything low")


def _value(value: float | None) -> str:
    return "-" if value is None else gbps(value)


def node_table(judgement: Judgement) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title="nodes", title_justify="left")
    for name, justify in (("host", "left"), ("ranks", "right"), ("intra-node busbw\n(GB/s)", "right"),
                          ("median pair busbw\n(GB/s)", "right"), ("verdict", "left")):
        table.add_column(name, justify=justify)
    for node in judgement.nodes:
        verdict = Text(node.verdict, style="bold red" if node.verdict == "suspect" else "green")
        table.add_row(node.host, str(len(node.ranks)), _value(node.intra_busbw_gbps), _value(node.pair_median_gbps),
                      verdict)
    return table


def fleet_lines(judgement: Judgement) -> list[str]:
    lines = []
    for name, stat, threshold in (("pairs", judgement.pair_fleet, judgement.pair_threshold_gbps),
                                  ("intra-node", judgement.intra_fleet, judgement.intra_threshold_gbps)):
        if stat is not None:
            limit = f", suspect below {gbps(threshold)} GB/s" if threshold is not None else ""
            lines.append(f"# fleet {name}: median {gbps(stat.median_gbps)} GB/s, MAD {gbps(stat.mad_gbps)} GB/s "
                         f"over {stat.count}{limit}")
    return lines


def suspect_lines(judgement: Judgement, repeat_config: bool = True) -> list[str]:
    """Every suspect's line; the config suspects, already shown before measuring, only when repeat_config (a
    measuring run ends with every suspect, a config-only run has just shown them)."""
    return [suspect.line() for suspect in judgement.suspects if repeat_config or suspect.kind != "config"]


def summary_lines(report: DoctorReport) -> list[str]:
    judgement = report.judgement
    lines = [f"# note: {note}" for note in report.notes + (judgement.notes if judgement else [])]
    if report.heatmap_path is not None:
        lines.append(f"# heatmap: {report.heatmap_path}")
    if judgement is not None:
        count = len(judgement.suspects)
        lines.append(f"# verdict: {judgement.verdict}" + (f" ({count} suspect(s))" if count else "")
                     + f", {report.wall_s:.1f} s")
        lines.extend(exclude_lines(judgement, report.header.exclude_file if report.header else None))
    if report.run_dir is not None:
        lines.append(f"# {report.status}: {len(report.records)} measurement(s) in {report.run_dir}")
    return lines


def exclude_lines(judgement: Judgement, exclude_file: Path | None) -> list[str]:
    """The hosts to keep out as a compressed Slurm hostlist, ready for `sbatch --exclude`."""
    listed = compress(excluded_hosts(judgement.suspects))
    written = f"; written to {exclude_file}" if exclude_file is not None else ""
    if listed:
        return [f"# exclude: {listed} (sbatch --exclude={listed}){written}"]
    return [f"# exclude: none{written}"] if written else []


def pair_matrix(judgement: Judgement) -> tuple[list[str], list[list[float]]]:
    """Hosts and the node x node matrix of the slowest rail's busbw (NaN: not measured)."""
    hosts = [n.host for n in judgement.nodes]
    index = {h: i for i, h in enumerate(hosts)}
    matrix = [[math.nan] * len(hosts) for _ in hosts]
    for pair in judgement.pairs:
        i, j = index[pair.hosts[0]], index[pair.hosts[1]]
        value = pair.busbw_gbps if math.isnan(matrix[i][j]) else min(matrix[i][j], pair.busbw_gbps)
        matrix[i][j] = matrix[j][i] = value
    return hosts, matrix


def heatmap_figure(judgement: Judgement, title: str | None = None) -> "Figure":
    """Pair busbw of every node pair (the slowest rail), suspects outlined in red."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    hosts, matrix = pair_matrix(judgement)
    n = len(hosts)
    side = min(3 + 0.5 * n, 14)
    figure = Figure(figsize=(side + 1.5, side), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axis = figure.subplots()
    image = axis.imshow(matrix, cmap="viridis", vmin=0)
    figure.colorbar(image, ax=axis, label="pair busbw (GB/s, 1e9 B/s)")
    if n <= ANNOTATE_MAX_NODES:
        axis.set_xticks(range(n), hosts, rotation=60, ha="right")
        axis.set_yticks(range(n), hosts)
        finite = [v for row in matrix for v in row if not math.isnan(v)]
        middle = (max(finite) / 2) if finite else 0
        for i in range(n):
            for j in range(n):
                if not math.isnan(matrix[i][j]):
                    axis.text(j, i, gbps(matrix[i][j]), ha="center", va="center", fontsize="small",
                              color="white" if matrix[i][j] < middle else "black")
    index = {h: i for i, h in enumerate(hosts)}
    from matplotlib.patches import Rectangle

    for pair in judgement.pairs:
        if pair.verdict == "suspect":
            i, j = index[pair.hosts[0]], index[pair.hosts[1]]
            for x, y in ((j, i), (i, j)):
                axis.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    axis.set_title(title or "node pairs: busbw of the slowest rail")
    return figure


_RECORDED_NODE_COLUMNS = (
    Column("host", align="left"), Column("ranks"), Column("intra-node busbw", "(GB/s)", priority=2),
    Column("median pair busbw", "(GB/s)", priority=1), Column("verdict", align="left"),
)


def _recorded_value(value: object) -> str:
    return gbps(value) if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def recorded_lines(doctor: dict, title: str, width: int | None) -> list[Text | str]:
    """A finished doctor run read back from its doctor.json (`report DOCTOR_FOLDER`): verdict, nodes, suspects."""
    nodes = [node for node in doctor.get("nodes") or [] if isinstance(node, dict)]
    rows = [
        [str(node.get("host")), str(len(node.get("ranks") or [])), _recorded_value(node.get("intra_busbw_gbps")),
         _recorded_value(node.get("pair_median_gbps")),
         Text(str(node.get("verdict")), style="bold red" if node.get("verdict") == "suspect" else "green")]
        for node in nodes
    ]
    pairs = doctor.get("pairs") or []
    suspects = [s for s in doctor.get("suspects") or [] if isinstance(s, dict)]
    lines: list[Text | str] = [f"# {title}: doctor verdict {doctor.get('verdict')}, {len(nodes)} node(s), "
                               f"{len(pairs)} pair measurement(s)"]
    lines += render_lines(_RECORDED_NODE_COLUMNS, rows, width)
    lines += [Text(recorded_suspect_line(s), style="bold red") for s in suspects]
    return lines


def recorded_text(doctor: dict, title: str) -> str:
    """recorded_lines as a file holds them (every column: a file has no width)."""
    lines = recorded_lines(doctor, title, None)
    return "".join((line if isinstance(line, str) else line.plain) + "\n" for line in lines)


def recorded_suspect_line(suspect: dict) -> str:
    """As Suspect.line() says it, from doctor.json's record of one suspect."""
    hosts = [str(h) for h in suspect.get("hosts") or []]
    rail = suspect.get("rail")
    if suspect.get("kind") == "rail":
        return f"rail {rail} of {hosts[0] if hosts else '?'}: {suspect.get('reason')}"
    if suspect.get("kind") == "config":
        return f"config {compress(hosts)}: {suspect.get('reason')}"
    on_rail = f" (rail {rail})" if rail is not None else ""
    return f"{suspect.get('kind')} {'-'.join(hosts)}{on_rail}: {suspect.get('reason')}"
