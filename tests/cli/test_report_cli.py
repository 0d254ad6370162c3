"""`nccl-bench report` input handling: one clear line and exit 2 for bad input, never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers.launch import run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_tests"


def _error(done) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    return line


def test_nccl_tests_log_in_nccl_tests_format():
    done = run_cli(["report", str(FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt"), "--format", "nccl-tests"])
    assert done.returncode == 0, done.stderr
    data = [line for line in done.stdout.splitlines() if line and not line.startswith("#")]
    assert data[0] == (
        "        8192          2048     float     sum      -1"
        "    35.15    0.23    0.23       0    30.33    0.27    0.27       0"
    )
    assert "# Avg bus bandwidth    : 0.65375 " in done.stdout.splitlines()


def test_bad_format():
    line = _error(run_cli(["report", str(FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt"), "--format", "xml"]))
    assert line == (
        "nccl-bench: error: --format: unknown format 'xml'; choose one of table, markdown, csv, json, nccl-tests"
    )


def test_missing_run(tmp_path):
    line = _error(run_cli(["report", str(tmp_path / "nope")]))
    assert line == f"nccl-bench: error: RUN: no results found at {tmp_path / 'nope'}"


def test_plot_path_checked_before_reading(tmp_path):
    line = _error(run_cli(["report", str(tmp_path / "nope"), "--plot", str(tmp_path / "x" / "p.png")]))
    assert line == f"nccl-bench: error: --plot: folder {tmp_path / 'x'} does not exist"


def test_not_a_result_file(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    assert _error(run_cli(["report", str(junk)])) == f"nccl-bench: error: RUN: {junk}: no nccl-tests result lines found"


def _run_with_a_cut_last_line(tmp_path: Path) -> Path:
    from tests.helpers.rows import MiB, row, write_run

    run = write_run(tmp_path / "run", [row(dtype="float32", size_bytes=size) for size in (MiB, 2 * MiB)])
    text = (run / "results.csv").read_text()
    (run / "results.csv").write_text(text[:-40])  # a crash while the second row was being written
    return run


def test_a_cut_last_line_warns_once_and_the_complete_rows_are_read_by_report_and_compare(tmp_path):
    run = _run_with_a_cut_last_line(tmp_path)
    warning = (f"nccl-bench: warning: {run / 'results.csv'} line 3 is cut off (the run stopped while writing it); "
               "read the 1 complete row(s) before it")
    for named in (run, run / "results.csv"):
        done = run_cli(["report", str(named), "--format", "csv"])
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines() == [warning]
        assert len(done.stdout.splitlines()) == 2  # header and the one complete row
    done = run_cli(["compare", str(run), str(run)])
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [warning]  # the same file on both sides: said once


def test_load_frame_reads_the_complete_rows_of_a_cut_file(tmp_path):
    import pytest

    from nccl_bench.results import load_frame
    from nccl_bench.results.input_lines import ResultsWarning

    run = _run_with_a_cut_last_line(tmp_path)
    for named in (run, run / "results.csv"):
        with pytest.warns(ResultsWarning, match="line 3 is cut off"):
            assert len(load_frame(named)) == 1


def test_a_failed_nccl_tests_run_keeps_its_rows_and_says_why_it_stopped():
    path = FIXTURES / "failed_after_rows_no_header_names.txt"
    done = run_cli(["report", str(path), "--ranks", "256", "--format", "csv"])
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"nccl-bench: warning: {path}: the run failed after 10 row(s); the log says: "
        "Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '"
    ]
    assert len(done.stdout.splitlines()) == 11


def _without_matplotlib(tmp_path: Path) -> dict[str, str]:
    """An environment where `import matplotlib` fails, as on a host without the [plot] extra."""
    blocker = tmp_path / "blocker" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('matplotlib is blocked for this test')\n")
    from tests.helpers.launch import REPO

    return {"PYTHONPATH": f"{blocker.parent}{os.pathsep}{REPO}"}


def test_plot_without_matplotlib_says_so_before_reading_anything(tmp_path):
    line = _error(run_cli(["report", str(tmp_path / "nope"), "--plot", str(tmp_path / "p.svg")],
                          env=_without_matplotlib(tmp_path)))
    assert line == "nccl-bench: error: --plot: matplotlib is not installed; pip install 'nccl-bench[plot]'"


def test_plot_suffix_must_be_png_svg_or_pdf(tmp_path):
    log = str(FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt")
    line = _error(run_cli(["report", log, "--plot", str(tmp_path / "p.jpg")]))
    assert line == f"nccl-bench: error: --plot: {tmp_path / 'p.jpg'} should end in .png, .svg, .pdf"


def test_version_and_short_help():
    import nccl_bench

    done = run_cli(["--version"])
    assert (done.returncode, done.stdout) == (0, f"nccl-bench {nccl_bench.__version__}\n")
    for args in (["-h"], ["report", "-h"], ["sweep", "-h"]):
        done = run_cli(args)
        assert done.returncode == 0 and done.stdout.startswith("Usage: python -m nccl_bench"), (args, done.stderr)


def test_html_path_checked_before_reading(tmp_path):
    line = _error(run_cli(["report", str(tmp_path / "nope"), "--html", str(tmp_path / "r.htm")]))
    assert line == f"nccl-bench: error: --html: {tmp_path / 'r.htm'} should end in .html"


def test_nccl_tests_export_writes_only_what_the_run_recorded(tmp_path):
    from nccl_bench.render.formats import to_csv
    from nccl_bench.results.csv_reader import read_rows
    from nccl_bench.results.loader import load_rows

    rows = load_rows(FIXTURES / "v2.20.0_all_reduce_perf_2ranks.txt")
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.csv").write_text(to_csv(rows))
    bare = run_cli(["report", str(run / "results.csv"), "--format", "nccl-tests"]).stdout
    assert "warmup iters" not in bare and " on " not in bare and "Pid" not in bare and "node0" not in bare
    assert "#  Rank  0 device nccl_bench nccl" in bare
    meta = {"hostnames": ["vm", "vm"], "devices": ["cpu: X", "cpu: X"], "config": {"warmup": 5, "cuda_graph": 0}}
    (run / "meta.json").write_text(__import__("json").dumps(meta))
    full = run_cli(["report", str(run), "--format", "nccl-tests", "--output", str(tmp_path / "x.log")])
    assert full.returncode == 0, full.stderr
    text = (tmp_path / "x.log").read_text()
    assert " warmup iters: 5 " in text and " graph: 0" in text and text.endswith("\n")
    assert "#  Rank  1 on vm device [cpu: X] nccl_bench nccl" in text and "Pid" not in text
    again = load_rows(tmp_path / "x.log")
    expected = [(r.world_size, 1, r.size_bytes) for r in read_rows(run)]
    assert [(r.world_size, r.nodes, r.size_bytes) for r in again] == expected


def _doctor_folder(tmp_path: Path) -> Path:
    """A doctor's run folder as the doctor leaves it: doctor.json (its real shape), meta.json, no results.csv."""
    import json

    from nccl_bench.doctor.doctor_report import DoctorReport, report_json
    from nccl_bench.results.run_folder import write_meta
    from tests.helpers.doctor_reports import three_node_header, three_node_judgement

    folder = tmp_path / "doctor_run"
    folder.mkdir()
    report = DoctorReport(run_dir=folder, header=three_node_header(), judgement=three_node_judgement(), wall_s=4.0)
    (folder / "doctor.json").write_text(json.dumps(report_json(report)))
    (folder / "doctor.csv").write_text("host_a,host_b\n")
    write_meta(folder, {"status": "complete"})
    return folder


def test_report_of_a_doctor_run_shows_its_verdict_nodes_and_suspects(tmp_path):
    folder = _doctor_folder(tmp_path)
    done = run_cli(["report", str(folder), "--html", str(tmp_path / "page.html")])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "# doctor_run: doctor verdict suspects, 3 node(s), 6 pair measurement(s)"
    assert [line.split()[0] for line in lines[3:6]] == ["a", "b", "c"] and lines[5].split()[-1] == "suspect"
    assert lines[6] == "node c: pair busbw 0.20 GB/s with 2 of 2 partners, fleet median 1.80 GB/s (-89%)"
    page = (tmp_path / "page.html").read_text()
    assert '<p class="verdict bad">doctor verdict: suspects</p>' in page and '<table class="doctor">' in page


def test_report_of_a_doctor_run_refuses_formats_of_result_rows(tmp_path):
    folder = _doctor_folder(tmp_path)
    assert _error(run_cli(["report", str(folder), "--format", "csv"])) == (
        f"nccl-bench: error: --format: {folder} is a doctor run (doctor.json, no result rows); "
        "only the table format and --html show it"
    )


def test_a_streamed_export_is_written_whole_or_not_at_all(tmp_path):
    from tests.helpers.rows import row, write_run

    write_run(tmp_path / "run", [row(size_bytes=1024), row(size_bytes=2048)])
    done = run_cli(["report", str(tmp_path / "run"), "--format", "csv", "--output", str(tmp_path / "out.csv")])
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.csv").read_text() == (tmp_path / "run" / "results.csv").read_text()
    csv_path = tmp_path / "run" / "results.csv"
    csv_path.write_text(csv_path.read_text().replace(",2048,512,", ",-2048,512,"))
    line = _error(run_cli(["report", str(tmp_path / "run"), "--format", "csv", "--output", str(tmp_path / "b.csv")]))
    assert line == f"nccl-bench: error: RUN: {csv_path} line 3: size_bytes: must be at least 0, got -2048"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "run"]  # no b.csv, no partial file


def _gone_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    import subprocess

    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_report_and_compare_of_a_run_whose_writer_is_gone_say_it_never_finished(tmp_path):
    import json
    import socket

    from tests.helpers.rows import MiB, row, write_run

    run = write_run(tmp_path / "run", [row(dtype="float32", size_bytes=MiB)])
    pid = _gone_pid()
    (run / "meta.json").write_text(json.dumps({"status": "running", "pid": pid, "host": socket.gethostname()}))
    done = run_cli(["report", str(run), "--format", "csv"])
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"nccl-bench: note: {run} never finished: its meta.json says running, but its process (pid {pid} on "
        f"{socket.gethostname()}) is gone; its rows are those recorded before it ended"]
    assert len(done.stdout.splitlines()) == 2
    done = run_cli(["compare", str(run), str(run / "results.csv")])  # compare says it too, once per run
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if "never finished" in line] == [
        f"nccl-bench: note: {run} never finished: its meta.json says running, but its process (pid {pid} on "
        f"{socket.gethostname()}) is gone; its rows are those recorded before it ended"] * 2


def test_report_of_a_run_still_running_elsewhere_or_unknown_says_it_is_unfinished(tmp_path):
    import json
    import socket
    import subprocess
    import sys

    from tests.helpers.rows import MiB, row, write_run

    run = write_run(tmp_path / "run", [row(dtype="float32", size_bytes=MiB)])
    host = socket.gethostname()
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "nccl_bench", "sweep"])
    reused = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # a pid now another program's
    partial = "its rows are those recorded so far"
    try:
        for meta, said in (
            ({"status": "running", "pid": writer.pid, "host": host},
             f"{run} is still running (pid {writer.pid} on {host}); {partial}"),
            ({"status": "running", "pid": _gone_pid(), "host": "elsewhere"},
             f"{run} is unfinished: its meta.json says running (pid {{pid}} on elsewhere, which cannot be seen from "
             f"here); {partial}"),
            ({"status": "running"},  # written before meta.json said who writes it
             f"{run} is unfinished: its meta.json says running and not which process writes it; {partial}"),
            ({"status": "running", "pid": reused.pid, "host": host.upper() + "."},
             f"{run} never finished: its meta.json says running, but its process (pid {reused.pid} on "
             f"{host.upper()}.) is gone; its rows are those recorded before it ended"),
        ):
            (run / "meta.json").write_text(json.dumps(meta))
            done = run_cli(["report", str(run / "results.csv"), "--format", "csv"])
            assert done.returncode == 0, meta
            assert done.stderr.splitlines() == [f"nccl-bench: note: {said.format(pid=meta.get('pid'))}"], meta
    finally:
        for process in (writer, reused):
            process.kill()
            process.wait()


def test_plot_of_a_run_with_ranks_csv_writes_its_rank_heatmap_beside_it(tmp_path):
    from tests.helpers.png_files import png_size
    from tests.helpers.rows import MiB, write_ranks_run

    run = write_ranks_run(tmp_path / "run", (1024, MiB), (100.0, 100.0, 1000.0, 100.0))
    done = run_cli(["report", str(run), "--plot", str(tmp_path / "busbw.png")])
    assert done.returncode == 0, done.stderr
    assert f"wrote every rank's time in the op and lateness to {tmp_path / 'busbw-ranks.png'}" in done.stderr
    assert png_size(tmp_path / "busbw-ranks.png")[0] > 0
