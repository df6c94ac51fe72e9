"""The real thing: `toolspan dashboard PATH` in a child process, Debian's Chromium
driven by Playwright, a screenshot, and checks that the page really rendered."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from ..services import free_port, stop_process
from .traces import write_traces

# Serial: in the parallel run a page waited on a busy core past its timeouts.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def wait_for_url(process: subprocess.Popen[str], timeout_s: float = 90.0) -> tuple[str, str]:
    """Read the CLI's output until it prints the URL; return (url, output so far)."""
    assert process.stdout is not None
    output = ""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        output += line
        match = re.search(r" at (http://\S+)", line)
        if match:
            return match.group(1), output
    raise AssertionError(f"the dashboard did not start:\n{output}")


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    traces = write_traces(tmp_path / "traces.jsonl")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolspan.cli",
            "dashboard",
            str(traces),
            "--port",
            str(free_port()),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,  # its own process group: cleanup reaches the Streamlit child
    )
    try:
        url, output = wait_for_url(process)
        yield url, output, process
    finally:
        stop_process(process)


def distinct_colours(path: Path) -> int:
    with Image.open(path) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    return len(colours or [])


def test_dashboard_renders_in_chromium(
    dashboard: tuple[str, str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    url, output, process = dashboard
    assert url.startswith("http://127.0.0.1:")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page.goto(url)
        # Wait for Streamlit's own elements, not just the HTML skeleton.
        page.wait_for_selector('[data-testid="stMetric"]', timeout=60_000)
        page.wait_for_selector(
            '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg',
            timeout=60_000,
        )
        metrics = page.locator('[data-testid="stMetric"]').all_inner_texts()
        assert any("Calls" in m and "12" in m for m in metrics), metrics
        assert any("Retries" in m and "4" in m for m in metrics), metrics
        assert page.locator('[data-testid="stVegaLiteChart"]').count() == 2
        shot = tmp_path / "overview.png"
        page.screenshot(path=str(shot), full_page=True)

        page.get_by_role("link", name="Retry timelines").click()
        page.wait_for_selector("text=wait_budget", timeout=60_000)
        page.wait_for_selector(
            '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg',
            timeout=60_000,
        )
        timeline_shot = tmp_path / "timelines.png"
        page.screenshot(path=str(timeline_shot), full_page=True)
        browser.close()

    # A blank or skeleton page is one or two colours; a rendered dashboard
    # with coloured bars, text and anti-aliasing has hundreds.
    assert distinct_colours(shot) > 200
    assert distinct_colours(timeline_shot) > 200

    # Ctrl-C stops the app, its Streamlit child and removes the temporary database.
    db_path = Path(re.search(r"into (\S+\.duckdb)", output).group(1))  # type: ignore[union-attr]
    assert db_path.exists()
    process.send_signal(signal.SIGINT)
    # Bounded by the launcher (Streamlit gets 10 s after SIGTERM, then SIGKILL); one
    # full-suite run here took over 30 s to exit, so the bound leaves room for a slow CI.
    assert process.wait(timeout=90) == 0
    assert not db_path.exists()
