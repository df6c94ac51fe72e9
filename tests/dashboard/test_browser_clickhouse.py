"""`toolspan dashboard --source chdb:PATH` as a process, driven by Debian's
Chromium through Playwright: the Findings page shows the duplicate write of the
sample traces, read from the collector's otel_traces in embedded ClickHouse."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..services import free_port, stop_process
from .test_browser import CHROMIUM_ARGS, wait_for_url

pytest.importorskip("chdb")
# Serial: in the parallel run a page waited on a busy core past its timeouts.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

ROOT = Path(__file__).resolve().parents[2]
# chDB holds one data directory per process: the table is filled by a child
# process of its own, so neither pytest's engine nor the dashboard's is shared.
_LOAD = """
import sys
import clickhouse_connect
from tests.dashboard.clickhouse_sources import SAMPLES, load_chdb
client = clickhouse_connect.get_client(dsn="chdb://" + sys.argv[1])
load_chdb(client, "otel", [SAMPLES / "agent_run"])
client.close()
"""


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[str]:
    data = tmp_path / "chdb"
    data.mkdir()
    subprocess.run([sys.executable, "-c", _LOAD, str(data)], cwd=ROOT, check=True, timeout=120)
    process = subprocess.Popen(
        [
            sys.executable, "-m", "toolspan.cli", "dashboard",
            "--source", f"chdb:{data}?database=otel",
            "--write-tools", "send_*,refund_*",
            "--port", str(free_port()),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )  # fmt: skip
    try:
        url, output = wait_for_url(process)
        assert "chdb:" in output and "table otel_traces" in output
        yield url
    finally:
        stop_process(process)


def test_the_findings_page_on_a_chdb_source_shows_the_duplicate_write(dashboard: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        page.goto(dashboard)
        page.wait_for_selector('[data-testid="stMetric"]', timeout=90_000)
        page.get_by_role("link", name="Findings").click()
        page.wait_for_selector("text=duplicate write", timeout=60_000)
        metrics = page.locator('[data-testid="stMetric"]').all_inner_texts()
        duplicate = next(m for m in metrics if m.startswith("duplicate write"))
        assert int(duplicate.split()[-1]) > 0, metrics
        # The newest finding opens, with its calls and its trace's waterfall.
        page.get_by_role("button", name="Filter every page to this conversation").wait_for(
            timeout=60_000
        )
        page.wait_for_selector('[data-testid="stVegaLiteChart"]', timeout=60_000)
        browser.close()
