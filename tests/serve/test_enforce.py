"""``toolspan serve --enforce``: live findings write quarantines that stop the fleet."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from tests.redis_server import RedisServer
from tests.services import free_port
from toolspan._errors import ServeError
from toolspan.serve._enforce import Rule, read_policy
from toolspan.tracer import Executor, Safeguards, Tool, ToolCall, list_quarantines
from toolspan.tracer.store import RedisStore, SQLiteStore

from .conftest import http_url, send_writes, wait_for

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4
STOPPED_WITHIN_S = 2.0


def test_a_policy_file_sets_scope_and_ttl_per_kind(tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text('[loop]\nscope = "tool"\nttl_s = 60\n[duplicate_write]\n')
    assert read_policy(policy) == {"loop": Rule("tool", 60.0), "duplicate_write": Rule()}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[lop]\n", "unknown finding kind 'lop'"),
        ('[loop]\nscope = "fleet"\n', "scope is one of"),
        ("[loop]\nttl = 5\n", "takes scope and ttl_s only"),
        ("[loop\n", "policy.toml"),
    ],
)
def test_a_bad_policy_file_is_a_clear_error(tmp_path, text, message):
    policy = tmp_path / "policy.toml"
    policy.write_text(text)
    with pytest.raises(ServeError, match=message):
        read_policy(policy)


@pytest.mark.slow
def test_a_live_duplicate_write_quarantines_the_tool_in_that_conversation(serve, tmp_path):
    store_path = tmp_path / "guards.sqlite"
    server = serve(enforce=str(store_path))
    send_writes(OTLPSpanExporter(endpoint=http_url(server)), "conv-dup", times=2)
    store = SQLiteStore(store_path)
    (quarantine,) = wait_for(lambda: list_quarantines(store))
    assert (quarantine.conversation_id, quarantine.tool, quarantine.finding) == (
        "conv-dup",
        "send_email",
        "duplicate_write",
    )
    sent: list[str] = []
    send = Tool("send_email", lambda to: sent.append(to) or {"sent": to}, side_effect="write")
    executor = Executor([send], safeguards=Safeguards(store=store))
    refused = executor.execute(
        ToolCall("send_email", "c3", {"to": "a@b.c"}, conversation_id="conv-dup")
    )
    elsewhere = executor.execute(
        ToolCall("send_email", "c4", {"to": "a@b.c"}, conversation_id="conv-2")
    )
    assert (refused.status, elsewhere.status, sent) == ("quarantined", "succeeded", ["a@b.c"])
    store.close()


def _toolspan(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolspan.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _results(out: Path) -> list[dict]:
    if not out.exists():  # the worker has not made its first call yet
        return []
    return [orjson.loads(line) for line in out.read_bytes().splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.serial  # a latency bound: measured alone on the machine
def test_a_looping_write_is_stopped_fleet_wide_and_lifting_restores_it(tmp_path):
    serve_log = tmp_path / "serve.log"
    with RedisServer() as redis:
        http_port = free_port()
        serve = subprocess.Popen(
            [
                sys.executable, "-m", "toolspan.cli", "serve", "--dir", str(tmp_path / "spool"),
                "--port", "0", "--http-port", str(http_port), "--grpc-port", str(free_port()),
                "--enforce", redis.url,
            ],
            cwd=ROOT,
            stdout=serve_log.open("wb"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        store = RedisStore(redis.url)
        stop_file = tmp_path / "stop"
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{http_port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        outs = [tmp_path / f"worker-{n}.jsonl" for n in range(WORKERS)]
        try:
            wait_for(lambda: _listening(http_port), timeout_s=60)
            workers = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tests.serve.enforce_worker",
                        redis.url,
                        str(n),
                        str(out),
                        str(stop_file),
                    ],
                    cwd=ROOT,
                    env=env,
                )
                for n, out in enumerate(outs)
            ]
            wait_for(lambda: list_quarantines(store), timeout_s=30)
            # Every worker is refused before anyone lifts anything.
            wait_for(
                lambda: all(
                    any(r["status"] == "quarantined" for r in _results(out)) for out in outs
                ),
                timeout_s=10,
            )
            # A loop and a duplicate_write name the same target: one quarantine.
            (quarantine,) = list_quarantines(store)
            lifted_at = time.time()  # the lift takes effect after this
            lifted = _toolspan("quarantine", "lift", "--all", "--store", redis.url)
            assert lifted.returncode == 0, lifted.stderr
            assert quarantine.id in lifted.stdout
            assert list_quarantines(store) == []
            wait_for(
                lambda: any(
                    r["conversation"] == "conv-loop" and r["status"] == "succeeded"
                    and r["t"] > lifted_at
                    for out in outs for r in _results(out)
                ),
                timeout_s=10,
            )  # fmt: skip
        finally:
            stop_file.touch()
            for worker in locals().get("workers", []):
                worker.wait(timeout=30)
            serve.terminate()
            serve.wait(timeout=30)
            store.close()
            print(serve_log.read_text())
    results = [r for out in outs for r in _results(out)]
    loop = sorted(
        (r for r in results if r["conversation"] == "conv-loop" and r["t"] < lifted_at),
        key=lambda r: r["t"],
    )
    ran = [r["t"] for r in loop if r["status"] == "succeeded"]
    # From the finding (the quarantine written) the fleet may open more tickets
    # only until every worker's next call reads the store.
    stopped_after_s = ran[-1] - quarantine.since
    print(
        f"fleet stopped {stopped_after_s:.2f} s after the finding, "
        f"{ran[-1] - ran[1]:.2f} s after the duplicate ({len(ran)} tickets opened)"
    )
    assert stopped_after_s <= STOPPED_WITHIN_S
    assert {r["status"] for r in loop} == {"succeeded", "quarantined"}
    others = [r for r in results if r["conversation"] != "conv-loop"]
    assert others and {r["status"] for r in others} == {"succeeded"}
    assert (quarantine.conversation_id, quarantine.tool) == ("conv-loop", "create_ticket")


def _listening(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/api/v1/summary", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
