"""``toolspan check``: finds README §2's double refund, passes the fixed versions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.testing import refund_checks
from toolspan.testing import FaultKit, check, format_report
from toolspan.tracer import Executor, Tool

ROOT = Path(__file__).resolve().parents[2]
# The installed console script: its sys.path does not start at the current directory.
TOOLSPAN = [str(Path(sys.executable).with_name("toolspan"))]


@pytest.mark.parametrize("build", ["build_key_not_passed", "build_service_ignores_keys"])
def test_the_double_refund_is_found_with_its_fix(build):
    report = check(getattr(refund_checks, build))
    unsafe = {row.scenario: row.effects for row in report.unsafe}
    assert unsafe == {
        "timeout after commit": 2,
        "late commit 0.5 s": 2,
        "timeout after commit, twice,": 3,
    }
    text = format_report(report)
    assert (
        "refund_order: a timeout after commit gives 2 refunds — add read_back or pass the key"
        in (text)
    )
    assert text.endswith("UNSAFE: 3 of 11 calls did the work twice (refund_order)")


@pytest.mark.parametrize("build", ["build_key_passed", "build_read_back", "build_as_in_the_readme"])
def test_the_fixed_versions_pass(build):
    report = check(getattr(refund_checks, build))
    assert not report.unsafe
    assert max(row.effects for row in report.rows) == 1
    assert all(row.wait_s <= row.budget_s for row in report.rows)


def test_a_table_row_says_statuses_and_waits_against_the_budget():
    rows = {row.scenario: row for row in check(refund_checks.build_key_passed).rows}
    assert (rows["429 Retry-After 2 s"].status, rows["429 Retry-After 2 s"].wait_s) == (
        "succeeded",
        2.0,
    )
    assert rows["503 every time"].status == "attempt_limit"
    assert rows["503 every time"].budget_s == 5.0


def _cli(*args: str, cwd: Path, env_path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    if env_path is not None:
        env["PYTHONPATH"] = env_path
    return subprocess.run(
        [*TOOLSPAN, "check", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_the_cli_exits_1_on_the_double_refund_and_0_on_the_fix_from_the_repo_root():
    bad = _cli("tests.testing.refund_checks:build_key_not_passed", cwd=ROOT)
    assert bad.returncode == 1, bad.stderr
    assert "timeout after commit gives 2 refunds — add read_back or pass the key" in bad.stdout
    good = _cli("tests.testing.refund_checks:build_as_in_the_readme", cwd=ROOT)
    assert good.returncode == 0, good.stderr
    assert good.stdout.rstrip().endswith("safe: 11 calls, at most one effect each")


@pytest.mark.slow
def test_the_cli_runs_a_users_module_from_another_directory(tmp_path):
    (tmp_path / "my_checks.py").write_text(
        textwrap.dedent(
            """
            from toolspan.testing import FaultKit
            from toolspan.tracer import Executor, Tool

            def build(kit: FaultKit) -> Executor:
                def send(to: str, idempotency_key: str) -> dict:
                    kit.ledger.commit("email", to)   # the key is dropped on the floor
                    return {"sent": to}
                tool = Tool("send_email", kit.wrap(send), side_effect="write", idempotent=True)
                return Executor([tool], **kit.executor_options())
            """
        ),
        encoding="utf-8",
    )
    done = _cli("my_checks:build", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "send_email: a timeout after commit gives 2 emails" in done.stdout
    missing = _cli("my_checks:nothing_here", cwd=tmp_path)
    assert missing.returncode == 2 and "nothing_here" in missing.stderr


def test_a_target_that_would_sleep_for_real_is_refused():
    def build(kit: FaultKit) -> Executor:
        return Executor([Tool("read", lambda: {})])

    with pytest.raises(TypeError, match="executor_options"):
        check(build)


def test_an_executor_instead_of_a_build_function_is_refused_with_a_clear_error():
    from toolspan._check import load_target

    with pytest.raises(ValueError, match="expected MODULE:BUILD"):
        load_target("no_colon")
    with pytest.raises(ValueError, match="must name a function"):
        load_target("toolspan.testing:FAULT_MATRIX")


@pytest.mark.parametrize("sends_key", [False, True])
def test_an_async_executor_with_an_async_client_is_checked_too(sends_key):
    import json

    import httpx

    from toolspan.tracer import AsyncExecutor

    def build(kit: FaultKit) -> AsyncExecutor:
        def api(request: httpx.Request) -> httpx.Response:
            order = json.loads(request.content)["order_id"]
            kit.ledger.commit("refund", order, key=request.headers.get("Idempotency-Key"))
            return httpx.Response(201, json={})

        transport = kit.httpx_transport(api)

        async def refund_order(order_id: str, idempotency_key: str) -> dict:
            headers = {"Idempotency-Key": idempotency_key} if sends_key else {}
            async with httpx.AsyncClient(base_url="https://p.example", transport=transport) as c:
                response = await c.post("/refunds", json={"order_id": order_id}, headers=headers)
            return response.json()

        tool = Tool("refund_order", refund_order, side_effect="write", idempotent=True)
        return AsyncExecutor([tool], **kit.executor_options(asynchronous=True))

    report = check(build)
    assert bool(report.unsafe) is not sends_key
    assert all(row.status != "crashed" for row in report.rows)


def test_an_async_executor_on_the_real_sleep_is_refused():
    from toolspan.tracer import AsyncExecutor

    async def read() -> dict:
        return {}

    with pytest.raises(TypeError, match=r"executor_options\(asynchronous=True\)"):
        check(lambda kit: AsyncExecutor([Tool("read", read)]))


def test_check_target_gives_the_arguments_and_which_requests_the_faults_hit():
    from toolspan.testing import CheckTarget

    def build(kit: FaultKit) -> CheckTarget:
        executor = refund_checks.build_read_back(kit)
        return CheckTarget(
            executor,
            arguments={"refund_order": {"order_id": "R-9", "amount_cents": 5}},
            applies_to=lambda request: request.method == "POST",  # read-backs always answer
        )

    report = check(build)
    assert not report.unsafe
    rows = {row.scenario: row for row in report.rows}
    # Every 503 hits the refund only: its read-back answers "absent" each time.
    assert rows["503 every time"].status == "unsafe_retry"
    assert rows["timeout after commit"].status == "succeeded"


def test_the_cli_prints_json_rows_and_refuses_a_bad_build_with_exit_2(
    capsys, tmp_path, monkeypatch
):
    from toolspan.cli import main

    code = main(["check", "--json", "tests.testing.refund_checks:build_service_ignores_keys"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 1 and len(rows) == 11
    assert {row["scenario"] for row in rows if row["unsafe"]} == {
        "timeout after commit",
        "late commit 0.5 s",
        "timeout after commit, twice,",
    }
    (tmp_path / "broken_checks.py").write_text(
        "from toolspan.tracer import Executor, Tool\n"
        "def build(kit):\n"
        "    def pay(x: str) -> dict: return {}\n"
        "    tool = Tool('pay', pay, side_effect='write', idempotent=True)  # no key route\n"
        "    return Executor([tool], **kit.executor_options())\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    assert main(["check", "broken_checks:build"]) == 2
    assert "nothing passes its idempotency key" in capsys.readouterr().err


def test_a_tool_that_refuses_the_made_up_arguments_fails_the_gate_as_untested():
    schema = {
        "type": "object",
        "properties": {"dock_id": {"type": "string", "pattern": "^D[0-9]{3}$"}},
        "required": ["dock_id"],
    }

    def build(kit: FaultKit) -> Executor:
        tool = Tool("get_dock", kit.wrap(lambda dock_id: {}), parameters=schema)
        return Executor([tool], **kit.executor_options())

    report = check(build)
    assert report.untested == ["get_dock"] and not report.unsafe and not report.passed
    text = format_report(report)
    assert text.endswith("UNTESTED: get_dock")
    assert "CheckTarget(executor, arguments={'get_dock': {...}})" in text
