"""`history html` opened in headless Chromium, as the report page is: the trends are drawn, the regressed
runs circled in red, the hosts' table built (the DOM Chromium built; the report page's test also looks
at its pixels)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import run_cli
from tests.history_runs import doctor_run, sweep_run

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
    assert dom.stdout.count("<polyline") == 2 and dom.stdout.count('class="regression"') == 2
    assert "<td class=\"l\">c</td>" in dom.stdout
