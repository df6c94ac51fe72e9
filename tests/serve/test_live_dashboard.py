"""The dashboard served by ``toolspan serve`` follows the database live: in
Chromium, a finding made after the page opened appears without a reload."""

from __future__ import annotations

import shutil

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

from tests.dashboard.test_browser import CHROMIUM_ARGS
from tests.services import free_port

from .conftest import findings, http_url, send_writes

pytestmark = pytest.mark.slow


# Serial, like every browser test: a page on a busy core misses its timeouts.
# (It failed alone in CI too: the analyser dropped the copy of the second call's
# ingest when it came within a second of the first; see test_live_ingest.)
@pytest.mark.serial
def test_a_new_finding_appears_without_a_reload(serve):
    from playwright.sync_api import sync_playwright

    server = serve(dashboard_port=free_port())
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page()
            page.goto(server.dashboard_url)
            page.wait_for_selector("text=Live: no data yet", timeout=60_000)
            send_writes(HttpExporter(endpoint=http_url(server)), "conv-live")
            # 60 s: on 2 cores the suite's other worker may be running a browser too.
            page.wait_for_selector(
                r"text=/\d+ new finding\(s\) since this page was opened/", timeout=60_000
            )
            page.wait_for_selector("text=NEW · duplicate_write · tool send_email", timeout=30_000)
            page.wait_for_selector("text=Live: data last arrived", timeout=30_000)
            # The page itself ran again on the new data: the overview shows the calls.
            page.wait_for_selector('[data-testid="stMetric"]', timeout=30_000)
            # An alert's link opens the finding's trace in the trace view (each of its two).
            [finding] = findings(server)
            assert len(finding["trace_ids"]) == 2
            for trace_id in finding["trace_ids"]:
                page.goto(f"{server.dashboard_url}/trace?trace={trace_id}")
                page.wait_for_function(
                    "id => [...document.querySelectorAll('input, [aria-selected], div')]"
                    ".some(e => (e.value || e.textContent || '').startsWith(id + ' · conv-live'))",
                    arg=trace_id,
                    timeout=60_000,
                )
        finally:
            browser.close()
