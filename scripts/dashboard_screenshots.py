"""Screenshots of every dashboard page at 1280 px, for docs/dashboard.md.

    python scripts/dashboard_screenshots.py [--out docs/images] [--chromium /usr/bin/chromium]

Analyzes the checked-in sample traces into a temporary database (as `make demo`
does), starts `toolspan dashboard --db` on a free port, opens each page in
Chromium through Playwright and writes ``dashboard-<page>.png`` (a palette
PNG: a few tens of kB each). Regenerate after changing a page.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from PIL import Image
from playwright.sync_api import Page, sync_playwright

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_traces"
WIDTH = 1280
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
CHART = '[data-testid="stVegaLiteChart"] svg'
# (file name, sidebar link, what to wait for, what to do on the page first)
PAGES = (
    ("overview", "Overview", CHART, "budget"),
    ("timelines", "Retry timelines", CHART, None),
    ("findings", "Findings", '[data-testid="stDataFrame"]', "duplicate_write"),
    ("trace", "Trace view", CHART, None),
    ("console", "SQL console", "textarea", "run"),
)
AFTER = {"budget": CHART, "duplicate_write": CHART, "run": '[data-testid="stDataFrame"]'}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def dashboard(db: Path) -> Iterator[str]:
    """`toolspan dashboard --db` in a child process; yields its URL."""
    command = [sys.executable, "-m", "toolspan.cli", "dashboard", "--db", str(db)]
    process = subprocess.Popen(
        [*command, "--port", str(_free_port())],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            match = re.search(r" at (http://\S+)", line)
            if match:
                yield match.group(1)
                break
        else:
            raise SystemExit(f"the dashboard did not start (exit {process.wait()})")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


def _settle(page: Page, selector: str) -> None:
    page.wait_for_selector(selector, timeout=60_000)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000
    )
    time.sleep(1.0)  # vega-embed draws after the element appears


def _prepare(page: Page, action: str | None) -> None:
    if action == "budget":  # the outage sample's budget: 0.2 x first attempts + 0.05/s
        page.get_by_role("spinbutton", name="Min retries per second").fill("0.05")
        page.keyboard.press("Enter")
    elif action == "duplicate_write":
        page.get_by_test_id("stSelectbox").filter(has_text="Open a finding").click()
        page.get_by_role("option", name=re.compile("^duplicate_write")).click()
    elif action == "run":
        page.get_by_role("button", name="Run").click()


def shoot(url: str, out: Path, chromium: str) -> list[Path]:
    written = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": 900})
        page.goto(url)
        for name, link, selector, action in PAGES:
            page.get_by_role("link", name=link).click()
            _settle(page, selector)
            if action:
                _prepare(page, action)
                _settle(page, AFTER[action])
            path = out / f"dashboard-{name}.png"
            # Streamlit scrolls inside its main block: make the window as tall as it.
            height = page.evaluate(
                "() => document.querySelector('[data-testid=\"stMainBlockContainer\"]')"
                ".scrollHeight"
            )
            page.set_viewport_size({"width": WIDTH, "height": max(900, int(height) + 120)})
            time.sleep(1.0)
            page.screenshot(path=str(path), full_page=True)
            page.set_viewport_size({"width": WIDTH, "height": 900})
            # A palette PNG: the screenshots stay small enough to commit.
            with Image.open(path) as image:
                image.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(
                    path, optimize=True
                )
            written.append(path)
        browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        db = Path(scratch) / "samples.duckdb"
        subprocess.run(
            [sys.executable, "-m", "toolspan.cli", "analyze", "--db", str(db),
             "--write-tools", "send_sms",
             *(str(SAMPLES / name) for name in ("bicycle", "agent_run", "outage"))],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        with dashboard(db) as url:
            for path in shoot(url, args.out, args.chromium):
                print(f"{path}  {path.stat().st_size // 1024} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
