"""The MCP conformance suite scores ``toolspan mcp proxy`` as it scores the server behind it.

`@modelcontextprotocol/conformance` 0.1.16 (npm, with the Node.js 22 it needs,
from tests/integrations/conformance/) runs its server scenarios against
tests/integrations/conformance_server.py bare, then through one long-lived
``toolspan mcp proxy --serve http`` in front of it. Each scenario must come
out the same both ways: every check the server passes bare, it passes through
the proxy (content blocks as the server sent them, its log messages, progress,
sampling and elicitation requests relayed mid-call, one SSE stream per POST).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services import free_port, wait_for_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SUITE_DIR = REPO / "tests" / "integrations" / "conformance" / "node_modules"
SUITE = SUITE_DIR / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
NODES = [SUITE_DIR / f"node-linux-{arch}" / "bin" / "node" for arch in ("x64", "arm64")]
BIN = Path(sys.executable).parent
LINE = re.compile(r"^[✓✗] ([a-z0-9-]+): (\d+) passed, (\d+) failed", re.M)

SCENARIOS = (
    "server-initialize", "logging-set-level", "ping", "completion-complete", "tools-list",
    "tools-call-simple-text", "tools-call-image", "tools-call-audio",
    "tools-call-embedded-resource", "tools-call-mixed-content", "tools-call-with-logging",
    "tools-call-error", "tools-call-with-progress", "tools-call-sampling",
    "tools-call-elicitation", "json-schema-2020-12", "elicitation-sep1034-defaults",
    "server-sse-polling", "server-sse-multiple-streams", "elicitation-sep1330-enums",
    "resources-list", "resources-read-text", "resources-read-binary",
    "resources-templates-read", "resources-subscribe", "resources-unsubscribe",
    "prompts-list", "prompts-get-simple", "prompts-get-with-args",
    "prompts-get-embedded-resource", "prompts-get-with-image", "dns-rebinding-protection",
)  # fmt: skip


def _node() -> Path:
    for node in NODES:
        if node.is_file():
            return node
    pytest.fail("the conformance suite is not installed: run scripts/install-node-deps.sh")


def _score(url: str) -> dict[str, tuple[int, int]]:
    done = subprocess.run(
        [str(_node()), str(SUITE), "server", "--url", url],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    scores = {m[1]: (int(m[2]), int(m[3])) for m in LINE.finditer(done.stdout)}
    assert scores, done.stdout + done.stderr
    return scores


def _serve(command: list[str], port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_for_port(port, timeout_s=30)
    return process


@pytest.fixture(scope="module")
def scores() -> Iterator[dict[str, dict[str, tuple[int, int]]]]:
    server_port, proxy_port = free_port(), free_port()
    upstream = f"http://localhost:{server_port}/mcp"
    server = _serve(
        [sys.executable, "-m", "tests.integrations.conformance_server", str(server_port)],
        server_port,
    )
    proxy_command = [str(BIN / "toolspan"), "mcp", "proxy", "--serve", "http"]
    proxy = _serve([*proxy_command, "--port", str(proxy_port), "--upstream", upstream], proxy_port)
    try:
        yield {"bare": _score(upstream), "proxied": _score(f"http://localhost:{proxy_port}/mcp")}
    finally:
        for process in (proxy, server):
            process.terminate()
            process.wait(timeout=20)


def test_the_server_passes_every_scenario_bare(
    scores: dict[str, dict[str, tuple[int, int]]],
) -> None:
    bare = scores["bare"]
    assert set(bare) >= set(SCENARIOS) - {"server-sse-polling", "json-schema-2020-12"}
    assert all(failed == 0 for _, failed in bare.values()), bare


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_scenario_scores_the_same_through_the_proxy(
    scores: dict[str, dict[str, tuple[int, int]]], scenario: str
) -> None:
    assert scores["proxied"].get(scenario) == scores["bare"].get(scenario)
