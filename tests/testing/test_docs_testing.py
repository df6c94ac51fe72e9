"""Every snippet of docs/testing.md, run: its files written, its command's output compared."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
SNIPPET = re.compile(r"<!-- (file|command): (.+?) -->\n```\w*\n(.*?)^```", re.S | re.M)
TOOLSPAN = Path(sys.executable).with_name("toolspan")


def _snippets(kind: str) -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    return {name: body for what, name, body in SNIPPET.findall(text) if what == kind}


def test_the_page_has_its_files_and_command():
    assert sorted(_snippets("file")) == [
        "langchain_check.py",
        "mcp_check.py",
        "payments_check.py",
        "test_payments.py",
    ]
    assert list(_snippets("command")) == ["toolspan check payments_check:build"]


@pytest.mark.slow
def test_the_worked_example_runs_as_shown(pytester: pytest.Pytester):
    for name, body in _snippets("file").items():
        (pytester.path / name).write_text(body, encoding="utf-8")
    ((command, shown),) = _snippets("command").items()
    done = subprocess.run(
        [TOOLSPAN, *command.split()[1:]], cwd=pytester.path, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr
    # Every line as shown, but the HTTP-date row's wait (whole-second rounding of a date).
    varies = "503 Retry-After HTTP-date"
    assert [line for line in done.stdout.splitlines() if varies not in line] == [
        line for line in shown.splitlines() if varies not in line
    ]
    fixed = subprocess.run(
        [TOOLSPAN, "check", "payments_check:build_fixed"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.rstrip().endswith("safe: 11 calls, at most one effect each")
    pytester.syspathinsert()
    pytester.runpytest("test_payments.py", "-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.slow
@pytest.mark.parametrize("module", ["langchain_check", "mcp_check"])
def test_the_framework_example_runs_as_said(pytester: pytest.Pytester, module: str):
    (pytester.path / f"{module}.py").write_text(_snippets("file")[f"{module}.py"], encoding="utf-8")
    verdicts = {
        "build": (1, "UNSAFE: 3 of 11 calls did the work twice (refund_order)"),
        "build_fixed": (0, "safe: 11 calls, at most one effect each"),
    }
    for build, (code, verdict) in verdicts.items():
        done = subprocess.run(
            [TOOLSPAN, "check", f"{module}:{build}"],
            cwd=pytester.path,
            capture_output=True,
            text=True,
        )
        assert done.returncode == code, done.stdout + done.stderr
        assert done.stdout.rstrip().endswith(verdict), done.stdout
