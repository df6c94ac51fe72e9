"""Every ```sh block of README.md: run as written, or listed below with why it cannot be.

The §5 commands run in an empty directory holding ``traces/`` (the agent
sample's spans, as §1's program would leave them), with the ``toolspan``
command of this environment on ``PATH``, the dashboard on its default port
(hence ``serial``). A new ``sh`` block fails the inventory test until it is
run here or listed, with its reason, in ``NOT_RUN``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.services import wait_for_port

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
BIN = Path(sys.executable).parent

# The first word of each block that is not run here, and why.
NOT_RUN = {
    "make": "the quick start is what CI itself runs (.ci/run calls make test)",
    "toolspan analyze clickhouse://": "needs a ClickHouse server at ch.internal; the same "
    "commands on ClickHouse are run by tests/analyzer/test_analyzer_clickhouse.py (chDB)",
    "toolspan serve": "the user's own my_agent.py; serve on its default ports is run by "
    "tests/serve/test_live_dashboard.py and `make demo`",
}
RUN_HERE = "toolspan analyze traces/"


def sh_blocks() -> list[list[str]]:
    """The command lines of every sh block, comments stripped."""
    blocks = []
    for match in BLOCK.finditer(README.read_text(encoding="utf-8")):
        lines = [re.sub(r"\s+#.*$", "", line).strip() for line in match.group(1).splitlines()]
        blocks.append([line for line in lines if line])
    return blocks


def test_every_sh_block_is_run_here_or_says_why_not() -> None:
    blocks = sh_blocks()
    assert blocks, "README.md has no sh blocks: the pattern no longer matches"
    for lines in blocks:
        first = lines[0]
        assert first.startswith(RUN_HERE) or any(first.startswith(k) for k in NOT_RUN), first


def _section_5() -> list[str]:
    (lines,) = [b for b in sh_blocks() if b[0].startswith(RUN_HERE)]
    return lines


def _run(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        shlex.split(line), cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
@pytest.mark.serial
def test_section_5_runs_as_written(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    shutil.copy(REPO / "sample_traces" / "agent_run" / "traces.jsonl", tmp_path / "traces")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    analyze, dashboard, sql = _section_5()

    # What the gate must decide, read independently of its exit code.
    report = _run(analyze.split(" --fail-on")[0] + " --format json", tmp_path, env)
    assert report.returncode == 0, report.stderr
    kinds = {f["kind"] for f in json.loads(report.stdout)["findings"]}
    gate = _run(analyze, tmp_path, env)
    assert gate.returncode == (1 if "duplicate_write" in kinds else 0), gate.stderr
    assert (tmp_path / "traces.duckdb").is_file()

    answer = _run(sql, tmp_path, env)
    assert answer.returncode == 0, answer.stderr
    assert "get_order" in answer.stdout or "refund_order" in answer.stdout, answer.stdout

    server = subprocess.Popen(
        shlex.split(dashboard), cwd=tmp_path, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for_port(8501, timeout_s=60)
        deadline = time.monotonic() + 30
        while (status := httpx.get("http://127.0.0.1:8501/_stcore/health").status_code) != 200:
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        assert server.poll() is None, "the dashboard answering is not the one started here"
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=20)
