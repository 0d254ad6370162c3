"""The live reporters of a sweep and of the doctor: what they print, and the plots they leave in the run folder."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from rich.console import Console

from nccl_bench.doctor.doctor_report import DoctorReport
from nccl_bench.doctor.verdicts import judge
from nccl_bench.render import live
from nccl_bench.sweep.sweep_report import SweepSummary
from tests.helpers.doctor_reports import three_node_header, three_node_judgement
from tests.helpers.png_files import png_size
from tests.helpers.rows import row


def _a_curve():
    return [row(size_bytes=size, time_us=100.0) for size in (1024, 4096)]


def test_a_sweep_of_one_size_per_op_draws_no_plot_and_says_nothing_of_it(tmp_path):
    """Dots are what the table says exactly; no busbw.png, no note."""
    out = io.StringIO()
    reporter = live.LiveReporter("--plot", Console(file=out, width=200, soft_wrap=True))
    one_size = [row(op=op, size_bytes=1024, time_us=100.0) for op in ("all_reduce", "all_gather")]
    reporter.finished(SweepSummary(run_dir=Path(tmp_path), rows=one_size, status="complete"))
    assert "busbw.png" not in out.getvalue() and "plot" not in out.getvalue()
    assert not (tmp_path / "busbw.png").exists()
    reporter.finished(SweepSummary(run_dir=Path(tmp_path), rows=_a_curve(), status="complete"))
    assert (tmp_path / "busbw.png").exists()


def test_a_sweep_without_matplotlib_says_once_that_no_plot_was_drawn(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    out = io.StringIO()
    reporter = live.LiveReporter("--plot", Console(file=out, width=200, soft_wrap=True))
    reporter.finished(SweepSummary(run_dir=Path(tmp_path), rows=_a_curve(), status="complete"))
    lines = out.getvalue().splitlines()
    notes = [line for line in lines if "busbw.png" in line]
    assert notes == ["# note: busbw.png not drawn: matplotlib is not installed; pip install 'nccl-bench[plot]'"]
    assert not (tmp_path / "busbw.png").exists()


def test_an_interrupted_sweep_draws_no_plot_and_says_how_to_draw_it(tmp_path):
    out = io.StringIO()
    reporter = live.LiveReporter("--plot", Console(file=out, width=300, soft_wrap=True))
    reporter.finished(SweepSummary(run_dir=Path(tmp_path), rows=_a_curve(), status="interrupted"))
    notes = [line for line in out.getvalue().splitlines() if "busbw.png" in line]
    assert notes == [f"# note: busbw.png not drawn after the interruption; `nccl-bench report {tmp_path} --plot "
                     "busbw.png` draws it"]
    assert not (tmp_path / "busbw.png").exists()


def test_no_plot_draws_neither_figure_and_says_nothing_of_it(tmp_path):
    """--no-plot: a curve that would be drawn is not, with no note (the user asked); the doctor's pairs.png likewise,
    while its report is printed whole."""
    out = io.StringIO()
    reporter = live.LiveReporter("--plot", Console(file=out, width=200, soft_wrap=True), draw=False)
    summary = SweepSummary(run_dir=Path(tmp_path), rows=_a_curve(), status="complete")
    reporter.finished(summary)
    assert "busbw.png" not in out.getvalue() and summary.plot_path is None
    assert not (tmp_path / "busbw.png").exists()
    console = Console(width=200, record=True, color_system=None)
    report = DoctorReport(run_dir=tmp_path, header=three_node_header(tmp_path), judgement=three_node_judgement(),
                          status="complete", wall_s=1.5)
    live.DoctorReporter(console, draw=False).finished(report)
    assert report.heatmap_path is None and not (tmp_path / "pairs.png").exists()
    assert "node c: pair busbw 0.20 GB/s" in console.export_text()


def test_write_sweep_plot(tmp_path):
    rows = [row(size_bytes=s, time_us=1000.0) for s in (1024, 1 << 20)]  # busbw = size / 1e6
    path = live.write_sweep_plot(rows, tmp_path)
    assert path == tmp_path / "busbw.png" and png_size(path) == (1200, 500)


def test_write_sweep_plot_without_matplotlib_returns_none(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
    assert live.write_sweep_plot([row(size_bytes=1024)], tmp_path) is None
    assert not (tmp_path / "busbw.png").exists()


def test_doctor_reporter_prints_the_report_and_draws_the_heatmap(tmp_path):
    console = Console(width=200, record=True, color_system=None)
    reporter = live.DoctorReporter(console)
    reporter.started(three_node_header(tmp_path))
    reporter.pairs_planned(3, 0.5)
    reporter.rounds_added(2, ["a-c", "b-c"])
    report = DoctorReport(run_dir=tmp_path, header=three_node_header(tmp_path), judgement=three_node_judgement(),
                          status="complete", wall_s=1.5)
    reporter.finished(report)
    text = console.export_text()
    assert "# re-test in 2 more round(s), nobody is named on one measurement: a-c, b-c" in text
    assert "node c: pair busbw 0.20 GB/s" in text and "# verdict: suspects (1 suspect(s)), 1.5 s" in text
    assert report.heatmap_path == tmp_path / "pairs.png" and report.heatmap_path.read_bytes()[:4] == b"\x89PNG"
    assert live.write_heatmap(judge([("x", [0])], {}, {}, 0.2), tmp_path / "none") is None  # no pairs, no picture


def test_print_lines_prints_text_as_given():
    console = Console(file=io.StringIO(), width=20, soft_wrap=True)
    live.print_lines(console, ["[bold]not markup[/bold] and a line longer than twenty columns"])
    assert console.file.getvalue() == "[bold]not markup[/bold] and a line longer than twenty columns\n"
    assert live.table_width(console) is None  # not a terminal: tables are not cut to a width


def test_report_on_a_terminal_fits_the_table_and_prints_other_formats_as_written(capsys):
    from nccl_bench.render import formats

    runs = [("one", [row()]), ("two", [row(size_bytes=2048)])]
    console = Console(file=io.StringIO(), width=60, force_terminal=True, color_system=None)
    live.print_runs([Path("a"), Path("b")], runs, "table", console)
    printed = console.file.getvalue().splitlines()
    assert [line for line in printed if line.startswith("# run:")] == ["# run: one", "# run: two"]
    notes = [line for line in printed if line.startswith("# not shown at 60 columns:")]
    assert len(notes) == 2 and max(len(line) for line in printed if line not in notes) <= 60
    live.print_runs([Path("a"), Path("b")], runs, "csv")
    assert capsys.readouterr().out == formats.render_runs([Path("a"), Path("b")], runs, "csv")


def test_config_findings_from_hosts_reach_the_terminal_escaped():
    """A fact's value is a host's text (an environment variable, nvidia-smi's output): its control
    characters are shown, never sent."""
    from nccl_bench.doctor.config_check import Fact, HostFacts, judge_config

    hosts = [HostFacts(f"n{i}", {"env NCCL_SOCKET_IFNAME": Fact("eth0", "environment")}, ()) for i in range(3)]
    hosts.append(HostFacts("n3", {"env NCCL_SOCKET_IFNAME": Fact("eth0\x1b]0;owned\x07\n# verdict: healthy",
                                                                  "environment")}, ()))
    console = Console(file=io.StringIO(), width=300, soft_wrap=True)
    live.DoctorReporter(console).config_checked("# config: 1 fact(s)", [s.line() for s in judge_config(hosts)])
    printed = console.file.getvalue()
    assert "\x1b" not in printed and "\x07" not in printed
    assert printed.splitlines()[1].startswith("config n3: env NCCL_SOCKET_IFNAME eth0")
    assert "\n# verdict" not in printed  # the planted line break stays inside the one line
