"""The HTML report in a real browser: Debian's headless chromium loads the page from
disk, runs its script and dumps the DOM (no console errors, hostile text inert, the
list filtered from the address's #q=…, an item opened with its evidence highlighted),
and takes a screenshot. Chromium is installed with apt-get when missing (root only);
the tests skip, saying why, where it cannot be had.

The core checks take three browser starts; more filters and the screenshots are marked
``slow`` (``pytest -m slow tests/report``). Set FACTRL_REPORT_SCREENSHOT=PATH.png to keep the screenshots (PATH.png: the top of
the page, PATH-trajectory.png: the whole page with one trajectory open).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from factrl.report import write_html_report

from report_runs import write_two_runs

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--enable-logging=stderr", "--v=0"]


def _install() -> str | None:
    """Install Debian's chromium; None when that is not possible here."""
    if shutil.which("apt-get") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        subprocess.run(["apt-get", "update"], check=True, capture_output=True, timeout=600, env=env)
        subprocess.run(["apt-get", "install", "-y", "chromium"], check=True, capture_output=True, timeout=1200,
                       env=env)
    except (subprocess.SubprocessError, OSError):
        return None
    return shutil.which("chromium")


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or _install()
    if found is None:
        pytest.skip("headless chromium is not installed and could not be installed with apt-get (needs root)")
    return found


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("browser")
    return write_html_report(list(write_two_runs(tmp)), tmp / "report.html")


def _run(chromium: str, tmp: Path, url: str, *args: str) -> tuple[str, str]:
    profile = tmp / f"profile{len(list(tmp.glob('profile*')))}"
    r = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args, url],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, r.stderr


def _dom(chromium: str, tmp: Path, url: str) -> str:
    dom, log = _run(chromium, tmp, url, "--dump-dom")
    console = [line for line in log.splitlines() if ":CONSOLE" in line]
    assert not console, console  # the page logs nothing: any message is an error
    assert 'data-browser="ready"' in dom  # the script ran to its end
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]  # hostile text stayed text
    return dom


def _listed(dom: str) -> list[str]:
    return re.findall(r'<li class="item (?:ok|bad)" data-id="([^"]*)"', dom)


def test_console_errors_are_seen(chromium, tmp_path):
    """The check below means something: an uncaught error does reach the log."""
    probe = tmp_path / "probe.html"
    probe.write_text("<!DOCTYPE html><script>throw new Error('probe');</script>")
    _, log = _run(chromium, tmp_path, probe.as_uri(), "--dump-dom")
    assert "Uncaught Error: probe" in log


def test_filtered_list_and_an_opened_trajectory(chromium, page, tmp_path):
    dom = _dom(chromium, tmp_path, page.as_uri() + "#q=Capital%20paris&open=c2")
    assert _listed(dom) == ["c2"]
    assert "showing 1 of 1 matching (4 in smollm2-run)" in dom
    item = dom.split('data-id="c2"')[1].split('<li class="item')[0]
    assert "<details open" in item
    # The hostile <script> block is shown as a block named "script", its body as text.
    assert '<span class="tag">script</span><div class="txt">document.body.setAttribute' in item
    assert "&lt;img src=x onerror=" in item
    assert '<mark class="eid gold">[[Paris_sentence_0]]</mark>' in item  # gold evidence highlighted
    assert '<div class="psg"><mark class="eid">[[Nile_sentence_1]]</mark>' in item  # retrieved, not gold
    assert "qwen-run: REFUTE ✓" in item  # the other run's verdict
    for text in ("0.250", "0.750", "+0.500", "ECE=", "no label"):  # server-rendered sections
        assert text in dom


@pytest.mark.slow
def test_more_filters_from_the_address(chromium, page, tmp_path):
    uri = page.as_uri()
    assert _listed(_dom(chromium, tmp_path, uri)) == ["c1", "c2", "c3", "c4"]
    assert _listed(_dom(chromium, tmp_path, uri + "#q=NILE%20egypt%20flows%20through")) == ["c1"]
    assert _listed(_dom(chromium, tmp_path, uri + "#q=danube")) == ["c3"]
    assert _listed(_dom(chromium, tmp_path, uri + "#q=Paris_sentence_0")) == ["c2"]  # a gold id
    assert _listed(_dom(chromium, tmp_path, uri + "#f=wrong")) == ["c2", "c3", "c4"]
    assert _listed(_dom(chromium, tmp_path, uri + "#f=format")) == ["c3"]
    assert _listed(_dom(chromium, tmp_path, uri + "#f=error&label=SUPPORT")) == ["c4"]
    assert _listed(_dom(chromium, tmp_path, uri + "#run=1&f=correct")) == ["c1", "c2", "c3"]
    assert _listed(_dom(chromium, tmp_path, uri + "#f=differs")) == ["c2", "c3", "c4"]


@pytest.mark.slow
def test_screenshot(chromium, page, tmp_path):
    top, full = tmp_path / "top.png", tmp_path / "trajectory.png"
    _run(chromium, tmp_path, page.as_uri(), f"--screenshot={top}", "--window-size=1280,2000")
    # A window taller than the page: opening an item scrolls, and headless screenshots
    # of a scrolled page come out blank.
    _run(chromium, tmp_path, page.as_uri() + "#q=paris&open=c2", f"--screenshot={full}", "--window-size=1280,5200")
    for shot in (top, full):
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 40_000, shot  # a blank page is ~10 kB
    keep = os.environ.get("FACTRL_REPORT_SCREENSHOT")
    if keep:
        dest = Path(keep)
        shutil.copyfile(top, dest)
        shutil.copyfile(full, dest.with_name(dest.stem + "-trajectory.png"))
