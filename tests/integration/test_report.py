"""report/plot over a real 2-rank gloo sweep, and nccl-tests export of that run."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from nccl_bench.render import live, plots
from nccl_bench.results.csv_reader import read_rows
from nccl_bench.results.loader import load_rows
from tests.helpers.launch import run_cli
from tests.helpers.png_files import png_size

pytestmark = pytest.mark.integration


@pytest.fixture
def gloo_run(shared_sweep) -> Path:
    """A two-rank all_reduce,all_gather sweep at 1K, 64K and 2M (tests/helpers/launch.py SHARED_SWEEP); read only."""
    return shared_sweep[0]


def test_report_plot_of_a_real_run(gloo_run, tmp_path):
    png = tmp_path / "bw.png"
    done = run_cli(["report", str(gloo_run), "--plot", str(png)])
    assert done.returncode == 0, done.stderr
    assert "all_gather" in done.stdout and f"wrote plot to {png}" in done.stderr
    assert png_size(png) == (1200, 500)
    rows = read_rows(gloo_run)
    figure = plots.busbw_figure([(gloo_run.name, rows)])
    lines = figure.axes[0].get_lines()
    data_lines = [line for line in lines if not line.get_label().startswith(plots.PEAK_LABEL_PREFIX)]
    peak_lines = [line for line in lines if line.get_label().startswith(plots.PEAK_LABEL_PREFIX)]
    # all_reduce runs in place only (one line); all_gather both ways (one line per placement)
    assert [line.get_label() for line in data_lines] == [
        "all_reduce", "all_gather (out-of-place)", "all_gather (in-place)"
    ]
    for line in data_lines:
        assert list(line.get_xdata()) == [1024, 65536, 2 * 1024 * 1024]
    # the sweep recorded the host's reference peak in every row; gloo's busbw is far below a memcpy
    # peak, so the peak is a note at the top and the data sets the scale (a dashed line when near)
    assert rows[0].peak_gbps is not None
    best = max(r.busbw_gbps for r in rows if r.busbw_gbps is not None)
    if plots.peak_on_scale(rows[0].peak_gbps, best):
        assert [list(line.get_ydata()) for line in peak_lines] == [[rows[0].peak_gbps] * 2]
    else:
        assert not peak_lines and figure.axes[0].get_ylim() == (0, best * plots.Y_HEADROOM)
        assert figure.axes[0].texts[0].get_text().startswith(f"peak {plots.round_gbps(rows[0].peak_gbps)} GB/s")
    # the latency panel stops at 1 MiB
    assert all(list(line.get_xdata()) == [1024, 65536] for line in figure.axes[1].get_lines())


def test_sweep_plot_file_for_a_real_run(gloo_run, tmp_path):
    path = live.write_sweep_plot(read_rows(gloo_run), tmp_path)
    assert path == tmp_path / "busbw.png" and png_size(path) == (1200, 500)


def test_nccl_tests_export_of_a_real_run_reads_back(gloo_run, tmp_path):
    log = tmp_path / "run.log"
    done = run_cli(["report", str(gloo_run), "--format", "nccl-tests", "--output", str(log)])
    assert done.returncode == 0, done.stderr
    ours = read_rows(gloo_run)
    again = load_rows(log)
    assert [(r.op, r.placement, r.size_bytes, r.count, r.world_size, r.backend) for r in again] == [
        (r.op, r.placement, r.size_bytes, r.count, r.world_size, r.backend) for r in ours
    ]
    for before, after in zip(ours, again, strict=True):
        rounded = float(f"{before.time_us:.1f}")
        close = after.time_us == pytest.approx(before.time_us, abs=0.005 + 1e-9 * before.time_us)
        assert close or after.time_us == rounded
        assert after.busbw_gbps == pytest.approx(before.busbw_gbps, abs=0.005)
        assert after.wrong == before.wrong
    # and the two side by side, as a user comparing against nccl-tests would plot them
    both = tmp_path / "both.png"
    done = run_cli(["report", str(gloo_run), str(log), "--format", "csv", "--plot", str(both)])
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1 + 2 * len(ours)
    assert png_size(both) == (1200, 500)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]


class _ResultsTable(HTMLParser):
    """Cell texts of the results table's body rows."""

    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self._in_table = self._in_body = self._in_cell = False

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("class", "results") in attrs:
            self._in_table = True
        elif self._in_table and tag == "tbody":
            self._in_body = True
        elif self._in_body and tag == "tr":
            self.rows.append([])
        elif self._in_body and tag == "td":
            self._in_cell = True
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_cell = False
        elif tag == "table":
            self._in_table = self._in_body = False

    def handle_data(self, data):
        if self._in_cell:
            self.rows[-1][-1] += data


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package chromium; scripts/dev.sh test "
                                             "installs it where it runs as root with apt-get)")
def test_html_report_renders_in_headless_chromium(gloo_run, tmp_path):
    from nccl_bench.render.tables import result_cells

    page = tmp_path / "report.html"
    done = run_cli(["report", str(gloo_run), "--html", str(page)])
    assert done.returncode == 0, done.stderr
    # the DOM chromium built holds every row of the run, busbw included, as the table prints it
    dom = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    parser = _ResultsTable()
    parser.feed(dom.stdout)
    rows = read_rows(gloo_run)
    expected = [[str(cell) for cell in result_cells(row)] for row in rows]
    assert [cells[:-1] for cells in parser.rows] == [cells[:-1] for cells in expected]
    assert all(f"{row.busbw_gbps:,.2f}" in cells for row, cells in zip(rows, parser.rows, strict=True))
    # and the screenshot shows the curves: the first series' colour (matplotlib C0) fills many pixels
    shot = tmp_path / "shot.png"
    done = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, "--window-size=1300,1400", f"--screenshot={shot}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    from matplotlib.image import imread

    pixels = (imread(shot)[:, :, :3] * 255).round().astype(int)
    c0 = (abs(pixels - (31, 119, 180)).sum(axis=2) < 40).sum()
    assert c0 > 300, f"only {c0} pixels of the first curve's colour: is the plot blank?"
