"""Every ```python block of README.md, run as written.

Each block runs alone, as the program it is, in a fresh namespace and an
empty working directory, against the real libraries: the real ``httpx``
client whose transport is replaced by an ``httpx.MockTransport`` answering
for the scripted services at the README's made-up addresses, and the real
OpenAI SDK answered by the examples' scripted model (its ``httpx2``
transport replaced the same way). Only sleeping is faked (the executor's
backoff waits on a fake clock).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest

from examples.agent import Planned, Request
from examples.scripted_api import ScriptedAPI
from toolspan.tracer import Executor
from toolspan.tracer.testing import FakeClock

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks() -> list[tuple[str, str]]:
    """(the heading above it, the code) of every python block, in order."""
    text = README.read_text(encoding="utf-8")
    blocks = []
    for match in BLOCK.finditer(text):
        headings = re.findall(r"^#+ (.+)$", text[: match.start()], re.M)
        blocks.append((headings[-1], match.group(1)))
    return blocks


@dataclass
class Services:
    """The remote services the README talks to, scripted and deterministic.

    The payments API honours ``Idempotency-Key`` as real payments APIs do, and
    loses the response of the first refund after committing it; the SMS
    gateway sends the first message, then times out before answering.
    """

    calls: Counter[str] = field(default_factory=Counter)
    refunds: list[dict[str, Any]] = field(default_factory=list)
    by_key: dict[str, dict[str, Any]] = field(default_factory=dict)
    keys_seen: list[str | None] = field(default_factory=list)
    sms_sent: list[dict[str, Any]] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        route = f"{request.method} {request.url.host}{request.url.path}"
        self.calls[route] += 1
        host = request.url.host
        if host == "weather.example" and request.url.path == "/now":
            if self.calls[route] == 1:
                return httpx.Response(503)
            return httpx.Response(200, json={"city": request.url.params["city"], "temp_c": 21})
        if host == "payments.example":
            return self._payments(request, route)
        if host == "sms.example":
            return self._sms(request)
        return httpx.Response(404, json={"error": f"no route {route}"})

    def _payments(self, request: httpx.Request, route: str) -> httpx.Response:
        path = request.url.path
        if request.method == "POST" and path == "/refunds":
            key = request.headers.get("Idempotency-Key")
            self.keys_seen.append(key)
            if key is not None and key in self.by_key:
                return httpx.Response(200, json=self.by_key[key])  # replayed, not refunded again
            refund = {"refund_id": f"rf-{len(self.refunds) + 1}", **json.loads(request.content)}
            self.refunds.append(refund)
            if key is not None:
                self.by_key[key] = refund
            if len(self.refunds) == 1:
                raise httpx.ReadTimeout("response lost after the refund committed", request=request)
            return httpx.Response(201, json=refund)
        if request.method == "GET" and path.startswith("/refunds/"):
            order_id = path.removeprefix("/refunds/")
            found = [r for r in self.refunds if r["order_id"] == order_id]
            return httpx.Response(200, json=found[-1]) if found else httpx.Response(404)
        if request.method == "GET" and path.startswith("/balances/"):
            if self.calls[route] == 1:
                return httpx.Response(503)
            return httpx.Response(200, json={"account": path.rsplit("/", 1)[1], "cents": 1299})
        return httpx.Response(404)

    def _sms(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            message = json.loads(request.content)
            self.sms_sent.append(message)
            if len(self.sms_sent) == 1:
                raise httpx.ReadTimeout("the gateway sent it, then did not answer", request=request)
            return httpx.Response(201, json={"queued": True})
        to = request.url.params["to"]
        return httpx.Response(200, json={"sent": [m for m in self.sms_sent if m["to"] == to]})


@dataclass
class Run:
    services: Services
    model: ScriptedAPI
    clock: FakeClock
    scope: dict[str, Any]
    output: str


@pytest.fixture
def run_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Runs one README block as a program; returns what it did and printed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted")
    services = Services()
    model = ScriptedAPI("chat", [Request("weather?", [[Planned("get_weather", {"city": "Oslo"})]])])
    # Every client the blocks build gets the scripted services as its transport.
    monkeypatch.setattr(
        httpx._client, "HTTPTransport", lambda **_: httpx.MockTransport(services.handle)
    )
    monkeypatch.setattr(
        httpx2._client, "HTTPTransport", lambda **_: httpx2.MockTransport(model.handle)
    )
    clock = FakeClock()
    monkeypatch.setattr(Executor, "_default_sleep", staticmethod(clock.sleep))

    def run(code: str) -> Run:
        scope: dict[str, Any] = {"__name__": "__main__"}
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(README), "exec"), scope)
        telemetry = scope.get("telemetry")
        if telemetry is not None:
            telemetry.shutdown()
        return Run(services, model, clock, scope, printed.getvalue())

    return run


def _block(heading: str) -> str:
    (code,) = [code for title, code in python_blocks() if title.startswith(heading)]
    return code


def test_the_readme_has_its_python_blocks_under_the_tour_and_adoption() -> None:
    titles = [title for title, _ in python_blocks()]
    assert titles == [
        "1. Instrument a tool",
        "2. Writes that never happen twice",
        "3. Tell the model what to do next",
        "7. Retries that cannot become a storm",
        "Adopting toolspan in your stack",
    ]


@pytest.mark.parametrize("heading", [title for title, _ in python_blocks()])
def test_every_python_block_runs_as_written(run_block, heading: str) -> None:
    run_block(_block(heading))


def test_1_a_read_retried_after_a_503_through_the_openai_sdk(run_block) -> None:
    done = run_block(_block("1. Instrument a tool"))
    assert done.output == "succeeded 2 {'city': 'Oslo', 'temp_c': 21}\n"
    assert done.services.calls["GET weather.example/now"] == 2
    assert len(done.clock.slept) == 1
    (sent,) = done.model.bodies
    assert sent["tools"][0]["function"]["name"] == "get_weather"
    message = done.scope["messages"][-1]
    assert json.loads(message["content"])["status"] == "succeeded"
    assert Path("traces/agent.jsonl").exists()
    # (What the file holds is not checked: setup_telemetry installs the global
    # tracer provider, which an earlier test in this process may have set.)


def test_2_a_lost_response_is_read_back_and_each_order_refunded_once(run_block) -> None:
    done = run_block(_block("2. Writes that never happen twice"))
    refunded = Counter(refund["order_id"] for refund in done.services.refunds)
    assert refunded == {"R-441": 1, "R-442": 1}
    # The key reached the service: one per action and resource.
    keys = [key for key in done.services.keys_seen if key]
    assert len(set(keys)) == 2 and len(keys) == len(done.services.keys_seen)
    assert done.output.splitlines() == ["R-441 succeeded 1 True", "R-442 succeeded 1 False"]


def test_3_a_timed_out_sms_is_not_sent_again_before_its_check(run_block) -> None:
    done = run_block(_block("3. Tell the model what to do next"))
    assert done.output.splitlines() == [
        "send_sms unsafe_retry ('get_sms_status',)",
        "send_sms in_progress ()",  # held while the first request may still commit
        "get_sms_status succeeded ",
    ]
    assert len(done.services.sms_sent) == 1


def test_7_a_read_through_the_fleet_guards(run_block) -> None:
    done = run_block(_block("7. Retries that cannot become a storm"))
    assert done.output == "succeeded 2\n"
    assert Path("fleet.sqlite").exists()
