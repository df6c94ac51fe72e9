"""The newcomer's refund agent (issue 40): a key the service ignores is not "succeeded" in silence.

An Anthropic SDK agent (the real client, the model scripted behind
``httpx2.MockTransport``), a payments service on loopback that ignores
``Idempotency-Key``, a real Redis store, and ``refund_order`` declared
idempotent with its key sent as that header. The service commits the refund,
then times out; then answers 429; then ok. The tracer retries under one key, as
declared, and the ledger has two refunds: toolspan must say so (a warning when
the tool is declared, the analyzer's ``unverified_keyed_retry`` finding). The
variant with a ``read_back`` finds the first refund and stops: one refund, no
finding.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest

from examples.agent import Planned, Request
from examples.scripted_api import MODEL, ScriptedAPI
from sample_traces._otel import DeterministicTelemetry
from toolspan.analyzer import Analyzer
from toolspan.cli import main
from toolspan.tracer import (
    Executor,
    Safeguards,
    raise_for_httpx_status,
    send_idempotency_key,
)
from toolspan.tracer.integrations import Declaration, Declarations
from toolspan.tracer.integrations import anthropic as ts_anthropic
from toolspan.tracer.store import RedisStore
from toolspan.tracer.testing import FakeClock

from ..redis_server import RedisServer
from .payments_service import PaymentsService

pytestmark = pytest.mark.slow  # a redis-server process

REFUND = {
    "name": "refund_order",
    "description": "Refund an order.",
    "input_schema": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}},
        "required": ["order_id", "amount"],
    },
}
# The client gives up this fast on the hung response (the only real wait).
CLIENT_TIMEOUT_S = 0.2


@pytest.fixture(scope="module")
def redis_server():
    with RedisServer() as server:
        yield server


def _run_agent(
    service: PaymentsService,
    redis_url: str,
    telemetry: DeterministicTelemetry,
    declaration: Declaration,
    prefix: str,
    http_library: Any = httpx2,
) -> dict[str, Any]:
    """The newcomer's ~24 lines: one user request, one refund, the model's answer. The
    tool's client is httpx2 by default, the library the Anthropic SDK already brought."""
    http = http_library.Client(
        base_url=service.url,
        timeout=CLIENT_TIMEOUT_S,
        event_hooks={"request": [send_idempotency_key()]},
    )

    def refund_order(order_id: str, amount: int) -> Any:
        response = http.post("/refunds", json={"order_id": order_id, "amount": amount})
        return raise_for_httpx_status(response)

    declarations = Declarations({"refund_order": declaration})
    tools = ts_anthropic.tools_from_definitions(
        [REFUND], {"refund_order": refund_order}, declarations
    )
    clock = FakeClock()
    executor = Executor(
        tools,
        safeguards=Safeguards(store=RedisStore(redis_url, prefix=prefix, clock=clock)),
        tracer_provider=telemetry.provider,
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(0),
    )
    model = ScriptedAPI(
        "anthropic",
        [
            Request(
                "refund A-1001", [[Planned("refund_order", {"order_id": "A-1001", "amount": 25})]]
            )
        ],
    )
    client = model.anthropic_client()
    specs = [ts_anthropic.tool_spec(t) for t in tools]
    messages: list[Any] = [{"role": "user", "content": "refund A-1001"}]
    message = client.messages.create(model=MODEL, max_tokens=64, messages=messages, tools=specs)
    messages.append({"role": "assistant", "content": message.content})
    results = ts_anthropic.answer(
        executor,
        message,
        conversation_id="conv-1",
        request_id="req-1",
        declarations=declarations,
    )
    messages.append(results)
    final = client.messages.create(model=MODEL, max_tokens=64, messages=messages, tools=specs)
    assert final.content[0].text == "Done."
    http.close()
    (block,) = results["content"]
    return block


def _traces(tmp_path: Path, telemetry: DeterministicTelemetry) -> Path:
    telemetry.write_jsonl(tmp_path / "traces.jsonl")
    return tmp_path


def test_a_service_that_ignores_the_key_refunds_twice_and_toolspan_reports_it(
    tmp_path, redis_server, caplog, capsys
):
    telemetry = DeterministicTelemetry()
    declaration = Declaration.write(idempotent=True, key_passed="Idempotency-Key header")
    with (
        PaymentsService(honours_keys=False, faults=["commit_then_hang", "429"]) as service,
        caplog.at_level(logging.WARNING, logger="toolspan.tracer"),
    ):
        block = _run_agent(service, redis_server.url, telemetry, declaration, "ignored:")
        refunds = service.refunds("A-1001")
        keys = list(service.keys_seen)
    # What the newcomer met: every view says fine ...
    assert block["is_error"] is False
    assert '"status":"succeeded"' in block["content"] and '"attempts":3' in block["content"]
    assert len(set(keys)) == 1 and keys[0] is not None and len(keys) == 3
    # ... while the ledger has two refunds.
    assert len(refunds) == 2
    # The declaration was warned about (once; this name may be warned about earlier).
    warned = [r.getMessage() for r in caplog.records if "refund_order relies" in r.getMessage()]
    assert len(warned) <= 1
    # The analyzer reports it.
    folder = _traces(tmp_path, telemetry)
    with Analyzer() as az:
        az.ingest([folder])
        (found,) = [f for f in az.findings() if f.kind == "unverified_keyed_retry"]
        (call,) = az.query("SELECT status, attempts, idempotency_key FROM tool_calls").rows
    assert call == ("succeeded", 3, keys[0])
    assert (found.tool, found.idempotency_key, found.count) == ("refund_order", keys[0], 3)
    assert found.detail["attempt_outcomes"] == ["timeout", "http_429", "ok"]
    assert main(["analyze", str(folder), "--fail-on", "unverified_keyed_retry"]) == 1
    assert main(["analyze", str(folder), "--fail-on", "any"]) == 1
    # duplicate_write cannot see it: toolspan saw one call, succeeded.
    assert main(["analyze", str(folder), "--fail-on", "duplicate_write"]) == 0
    capsys.readouterr()


def test_the_warning_names_the_header(caplog):
    # Declared in a fresh name, so the once-per-process warning is this test's.
    with caplog.at_level(logging.WARNING, logger="toolspan.tracer"):
        Declarations(
            {
                "refund_order_e2e": Declaration.write(
                    idempotent=True, key_passed="Idempotency-Key header"
                )
            }
        ).tool("refund_order_e2e", lambda order_id, amount: None)
    (message,) = [r.getMessage() for r in caplog.records if "refund_order_e2e" in r.getMessage()]
    assert message.startswith(
        "refund_order_e2e relies on the service honouring Idempotency-Key; add read_back or "
        "declare keys_honoured=True"
    )


def test_with_a_read_back_the_same_service_refunds_once_and_nothing_is_found(
    tmp_path, redis_server
):
    telemetry = DeterministicTelemetry()
    with PaymentsService(honours_keys=False, faults=["commit_then_hang", "429"]) as service:

        def refund_found(order_id: str, amount: int) -> Any:
            found = raise_for_httpx_status(
                httpx.get(f"{service.url}/refunds", params={"order_id": order_id})
            )["refunds"]
            return found[0] if found else None

        declaration = Declaration.write(
            idempotent=True, key_passed="Idempotency-Key header", read_back=refund_found
        )
        block = _run_agent(
            service, redis_server.url, telemetry, declaration, "read_back:", http_library=httpx
        )
        refunds = service.refunds("A-1001")
    assert len(refunds) == 1
    assert block["is_error"] is False and '"reconciled":true' in block["content"]
    folder = _traces(tmp_path, telemetry)
    with Analyzer() as az:
        az.ingest([folder])
        assert az.findings() == []
    assert main(["analyze", str(folder), "--fail-on", "any"]) == 0


LOOKUP = {
    "name": "get_refunds",
    "description": "The refunds of an order.",
    "input_schema": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
}
# The model's step, the same on every delivery: look the order up, refund it.
STEP = {
    "role": "assistant",
    "content": [
        {"type": "tool_use", "id": "t1", "name": "get_refunds", "input": {"order_id": "A-1"}},
        {
            "type": "tool_use",
            "id": "t2",
            "name": "refund_order",
            "input": {"order_id": "A-1", "amount": 25},
        },
    ],
}


@pytest.mark.parametrize("per", ["run", "executor"])
def test_a_request_redelivered_five_times_refunds_once_and_blocks_nothing(
    tmp_path, redis_server, per
):
    """A queue hands request req-9 over five times (each time a new worker on the
    shared Redis, or one worker opening a new run): every delivery gets its answers,
    the refund runs once and replays after, and nothing is loop_blocked."""
    telemetry = DeterministicTelemetry()
    with PaymentsService(honours_keys=True, faults=[]) as service:
        http = httpx2.Client(
            base_url=service.url, event_hooks={"request": [send_idempotency_key()]}
        )

        def get_refunds(order_id: str) -> Any:
            return raise_for_httpx_status(http.get("/refunds", params={"order_id": order_id}))

        def refund_order(order_id: str, amount: int) -> Any:
            response = http.post("/refunds", json={"order_id": order_id, "amount": amount})
            return raise_for_httpx_status(response)

        declarations = Declarations(
            {
                "get_refunds": Declaration.read(),
                "refund_order": Declaration.write(
                    idempotent=True, key_passed="Idempotency-Key header", keys_honoured=True
                ),
            }
        )
        tools = ts_anthropic.tools_from_definitions(
            [LOOKUP, REFUND],
            {"get_refunds": get_refunds, "refund_order": refund_order},
            declarations,
        )
        prefix = f"redelivery-{per}:"

        def worker() -> Executor:
            clock = FakeClock()
            return Executor(
                tools,
                safeguards=Safeguards(
                    store=RedisStore(redis_server.url, prefix=prefix, clock=clock)
                ),
                tracer_provider=telemetry.provider,
                sleep=clock.sleep,
                clock=clock,
            )

        shared = worker()
        deliveries = []
        for _ in range(5):
            executor = shared if per == "run" else worker()
            with executor.run("refund-agent", request_id="req-9", conversation_id="conv-9"):
                answered = ts_anthropic.answer(executor, STEP, conversation_id="conv-9")
            deliveries.append([block["is_error"] for block in answered["content"]])
        refunds = service.refunds("A-1")
        http.close()
    assert deliveries == [[False, False]] * 5
    assert len(refunds) == 1
    folder = _traces(tmp_path, telemetry)
    with Analyzer() as az:
        az.ingest([folder])
        statuses = az.query(
            "SELECT tool, status, replayed, count(*) FROM tool_calls GROUP BY ALL ORDER BY ALL"
        ).rows
        traces = az.query("SELECT count(DISTINCT trace_id) FROM tool_calls").rows
    assert statuses == [
        ("get_refunds", "succeeded", False, 5),
        ("refund_order", "succeeded", False, 1),
        ("refund_order", "succeeded", True, 4),
    ]
    assert traces == [(5,)]  # one trace per delivery
