"""`history html` opened in headless Chromium, as the report page is: the trends are drawn on a time axis
with dates, the band a run must stay above, each run's run, date, value and versions on hover, marks
where versions changed and where a change was accepted (with its reason), the regressions listed at the
top with what changed, the filter by system and op, the hosts' table (the DOM Chromium built, and a
screenshot's pixels)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from nccl_bench.history.records import read_record
from tests.helpers.history_runs import doctor_run, sweep_run
from tests.helpers.launch import run_cli

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package chromium; scripts/dev.sh test "
                                             "installs it where it runs as root with apt-get)")
def test_the_history_page_renders_in_headless_chromium(tmp_path):
    store = str(tmp_path / "h.sqlite")
    runs = [sweep_run(tmp_path / f"r{day}", day, scale) for day, scale in ((1, 1.0), (2, 1.0), (3, 1.0), (4, 0.4))]
    doctor = doctor_run(tmp_path / "d", 1, suspects=[("node", ["c"])])
    assert run_cli(["history", "add", *map(str, runs), str(doctor), "--history", store]).returncode == 0
    page = tmp_path / "history.html"
    done = run_cli(["history", "html", str(page), "--history", store])
    assert done.returncode == 0, done.stderr
    dom = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('<figure class="series"') == 2 and dom.stdout.count('class="run regression"') == 2
    assert "<td class=\"l\">c</td>" in dom.stdout


NEW_NCCL = {"versions": {"torch": "2.5.1", "nccl": "2.23.4"}, "env": {"NCCL_ALGO": "Tree"}}


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package chromium)")
def test_the_page_shows_dates_band_hover_marks_and_filters(tmp_path):
    store = str(tmp_path / "h.sqlite")
    steady = [sweep_run(tmp_path / f"r{day}", day, scale) for day, scale in ((1, 1.0), (2, 0.99), (3, 1.01),
                                                                            (4, 1.0), (5, 0.995))]
    slower = [sweep_run(tmp_path / f"s{day}", day, 0.8, **NEW_NCCL) for day in (6, 7)]
    other = [sweep_run(tmp_path / f"o{day}", day, 1.0, hosts=("big<b>", "big<b>")) for day in (1, 2, 3, 4)]
    assert run_cli(["history", "add", *map(str, steady + slower + other), "--history", store]).returncode == 0
    page = tmp_path / "history.html"
    assert run_cli(["history", "html", str(page), "--history", store]).returncode == 0
    dom = _dom(page.as_uri())
    regressions = re.search(r'<ul id="nb-regression-list">(.*?)</ul>', dom).group(1)
    assert regressions.count("<li") == 2
    assert "nccl version 2.21.5 -&gt; 2.23.4; NCCL_ALGO unset -&gt; Tree" in regressions
    assert dom.count('<figure class="series"') == 4
    assert dom.count('class="band"') == 4  # every series with a judged run has its band
    assert '<text class="date"' in dom and ">2026-01-01</text>" in dom and ">2026-01-07</text>" in dom
    slow_id = read_record(slower[0], "RUN", "").run_id
    tip = re.search(rf'data-run="{slow_id}"[^>]*><title>(.*?)</title>', dom, re.S).group(1)
    assert tip.startswith(f"run {slow_id[:12]}\n2026-01-06T00:00:00+00:00\n") and "(regression, band " in tip
    assert "nccl 2.23.4, torch 2.5.1; NCCL_ALGO=Tree" in tip
    assert dom.count('class="mark-version"') == 2 and "nccl version 2.21.5 -&gt; 2.23.4" in dom
    assert "cpu@big&lt;b&gt;" in dom and "big<b>" not in dom  # a host name from the history is escaped

    accepted = run_cli(["history", "accept", slow_id[:12], "--reason", "NCCL 2.23 <is> slower by design",
                        "--history", store])
    assert accepted.returncode == 0, accepted.stderr
    assert run_cli(["history", "html", str(page), "--history", store]).returncode == 0
    dom = _dom(page.as_uri())
    assert 'id="nb-regression-list"' not in dom and ">0 regression(s)<" in dom
    assert dom.count('class="mark-accept"') == 2
    assert "accepted as the new normal: NCCL 2.23 &lt;is&gt; slower by design" in dom and "<is>" not in dom

    filtered = _dom(page.as_uri() + "#system=cpu%40big%3Cb%3E&op=all_reduce")
    hidden = re.findall(r'<figure class="series" data-system="([^"]*)"[^>]*style="display: none;"', filtered)
    assert sorted(hidden) == ["cpu@vm", "cpu@vm"]
    assert '<span id="nb-shown">2</span>' in filtered

    shot = tmp_path / "history.png"
    done = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--screenshot={shot}", "--window-size=1300,1000",
                           "--hide-scrollbars", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    from matplotlib.image import imread

    pixels = (imread(shot)[:, :, :3] * 255).round().astype(int)
    assert pixels.shape[:2] == (1000, 1300)
    band = (abs(pixels - (0xFB, 0xE3, 0xE3)).sum(axis=2) < 12).sum()
    accept = (abs(pixels - (0x22, 0xAA, 0x22)).sum(axis=2) < 40).sum()
    assert band > 2000 and accept > 100, f"{band} band pixels, {accept} accepted-mark pixels: is the plot blank?"


def _dom(url: str) -> str:
    dom = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout


# Every label of each plot as Chromium lays it out (getBBox: the renderer's own box of the drawn text), and
# each pair of them that overlaps, written into the page for --dump-dom to return.
_BOXES_SCRIPT = """<script>
var found = [];
document.querySelectorAll('figure.series svg').forEach(function (svg, figure) {
  var boxes = Array.from(svg.querySelectorAll('text.date, text[fill="#2a2"]')).map(function (text) {
    var b = text.getBBox(); return {text: text.textContent, x: b.x, y: b.y, w: b.width, h: b.height};
  });
  boxes.forEach(function (a, i) { boxes.slice(i + 1).forEach(function (b) {
    if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h) found.push([figure, a, b]);
  }); });
  found.push(['labels', figure, boxes.length, svg.width.baseVal.value,
              boxes.filter(function (b) { return b.x < 0 || b.x + b.w > svg.width.baseVal.value; }).length]);
});
var pre = document.createElement('pre'); pre.id = 'nb-boxes'; pre.textContent = JSON.stringify(found);
document.body.appendChild(pre);
</script>"""


def _quiet_month_then_a_burst(runs: int) -> list[str]:
    """`runs` start times: a run a day, then the newest 25 a minute apart on the last day (a fleet re-run in
    a hurry after a quiet month): the page's window of runs is half days, half minutes."""
    from datetime import datetime, timedelta, timezone

    start = datetime(2020, 1, 1, tzinfo=timezone.utc)
    daily = [start + timedelta(days=day) for day in range(runs - 25)]
    burst = [daily[-1] + timedelta(hours=12, minutes=minute) for minute in range(25)]
    return [moment.isoformat() for moment in daily + burst]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package chromium)")
@pytest.mark.parametrize("window", ["20", "1000"])
def test_no_two_labels_of_a_plot_overlap_at_2000_runs(tmp_path, window):
    """2,000 runs, the newest crowded into minutes and five of them accepted: Chromium's boxes of every date
    label and accepted mark of each plot are apart and inside the plot; the page is written within seconds."""
    import json
    import time

    from tests.helpers.history_stores import bulk_sqlite_store

    store = bulk_sqlite_store(tmp_path / "h.sqlite", _quiet_month_then_a_burst(2000), accepted=(1990, 1992, 1994,
                                                                                                 1996, 1998))
    page = tmp_path / "history.html"
    began = time.monotonic()
    done = run_cli(["history", "html", str(page), "--history", str(store), "--window", window])
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    assert took < 30, f"the page took {took:.1f} s"
    print(f"history html of 2,000 runs, --window {window}: {took:.2f} s (the process included), "
          f"{page.stat().st_size / 1024:.0f} KiB")
    measured = tmp_path / "measured.html"
    measured.write_text(page.read_text().replace("</body>", _BOXES_SCRIPT + "</body>"))
    found = json.loads(re.search(r'<pre id="nb-boxes">(.*?)</pre>', _dom(measured.as_uri()), re.S).group(1))
    overlaps = [entry for entry in found if entry[0] != "labels"]
    counts = [entry for entry in found if entry[0] == "labels"]
    assert len(counts) == 2 and all(labels >= 3 for _, _, labels, _, _ in counts), counts
    assert overlaps == [], overlaps[:3]
    assert all(outside == 0 for *_, outside in counts), counts
