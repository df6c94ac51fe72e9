"""End to end over the network: executor -> SDK -> rotel collector -> receiver.

The executor's spans leave the process through ``setup_telemetry`` over
OTLP/gRPC or OTLP/HTTP, pass through a real collector (the ``rotel`` agent,
started here as a subprocess) and arrive at an OTLP receiver built on
opentelemetry-proto's ``TraceService``. What arrives is decoded with the
official protobuf classes and checked against docs/trace-contract.md.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from toolspan.tracer import ToolCall, ToolError, ToolResult, setup_telemetry

from ..otlp_receiver import OtlpReceiver, ReceivedSpan
from .collector import RotelCollector
from .contract import declared_attributes
from .fake_service import FakeBikeShare, executor_for

pytestmark = pytest.mark.slow

SERVICE = "toolspan-e2e"
CONVERSATION = "conv-e2e-1"

# Present on every span of the given kind, whatever the outcome.
CALL_ALWAYS = {
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.type",
    "gen_ai.conversation.id",
    "gen_ai.tool.call.arguments",
    "toolspan.request.id",
    "toolspan.turn.id",
    "toolspan.side_effect",
    "toolspan.args.hash",
    "toolspan.status",
    "toolspan.retryable",
    "toolspan.attempts",
    "toolspan.total_wait_s",
}
ATTEMPT_ALWAYS = {
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.type",
    "gen_ai.conversation.id",
    "toolspan.request.id",
    "toolspan.turn.id",
    "toolspan.side_effect",
    "toolspan.attempt",
    "http.request.resend_count",
    "toolspan.attempt.outcome",
    "toolspan.retry.delay_s",
    "toolspan.retry.elapsed_wait_s",
}


@dataclass
class Secrets:
    """Unique per run, so a hit in the received bytes can only be a leak."""

    api_key: str
    bearer: str

    @classmethod
    def fresh(cls) -> Secrets:
        return cls(
            api_key="sk-live-" + secrets.token_hex(16),
            bearer="Bearer " + secrets.token_urlsafe(24),
        )

    def all_forms(self) -> list[bytes]:
        # The distinctive bodies too: a leak that kept only part of a token
        # is still a leak.
        forms = [self.api_key, self.bearer, self.api_key[8:], self.bearer[7:]]
        return [form.encode() for form in forms]


@dataclass
class Scenario:
    """The calls made, their results and what the fake service saw."""

    results: dict[str, ToolResult]
    slept: list[float]
    service: FakeBikeShare
    secrets: Secrets


def run_calls(tracer_provider: Any, planted: Secrets) -> Scenario:
    service = FakeBikeShare()
    executor, clock = executor_for(service, tracer_provider, seed=1)
    service.fail_next("D1", ToolError.from_status(503, "dock service overloaded"))
    service.fail_next("D2", ToolError("timeout", "hold request timed out"))
    service.fail_next("D3", ToolError.from_status(503, f"upstream refused {planted.bearer}"))
    service.fail_next("D404", ToolError.from_status(404, "no such dock"))

    def call(call_id: str, name: str, arguments: Any, key: str | None = None) -> ToolCall:
        return ToolCall(name, call_id, arguments, CONVERSATION, "req-1", "turn-1", key)

    calls = [
        call("call-read-retry", "get_dock_status", {"dock_id": "D1"}),
        call("call-write-keyed", "hold_bicycle", {"dock_id": "D2", "rider_id": "R7"}, "hold-R7-D2"),
        # Arguments as the JSON text a model produces, with a secret inside.
        call(
            "call-secret",
            "get_dock_status",
            json.dumps({"dock_id": "D3", "api_key": planted.api_key, "note": planted.bearer}),
        ),
        call("call-permanent", "get_dock_status", {"dock_id": "D404"}),
    ]
    results = {c.call_id: executor.execute(c) for c in calls}
    return Scenario(results, clock.slept, service, planted)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


def export_through_collector(
    receiver: OtlpReceiver, tmp_path: Path, protocol: Literal["grpc", "http/protobuf"]
) -> Scenario:
    forward: Literal["grpc", "http"] = "grpc" if protocol == "grpc" else "http"
    target = receiver.grpc_endpoint if forward == "grpc" else receiver.http_endpoint
    with RotelCollector(target, tmp_path, forward_protocol=forward) as collector:
        endpoint = collector.grpc_endpoint if protocol == "grpc" else collector.http_endpoint
        telemetry = setup_telemetry(
            SERVICE,
            otlp=True,
            protocol=protocol,
            endpoint=endpoint,
            set_global=False,
            export_timeout_s=5.0,
        )
        scenario = run_calls(telemetry.tracer_provider, Secrets.fresh())
        assert telemetry.force_flush(), "the SDK could not hand the spans to the collector"
        telemetry.shutdown()
        try:
            receiver.wait_for_spans(11, timeout_s=10.0)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}; collector said:\n{collector.output()}") from exc
    return scenario


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_spans_cross_a_real_collector_as_the_contract_says(
    receiver: OtlpReceiver, tmp_path: Path, protocol: Literal["grpc", "http/protobuf"]
) -> None:
    scenario = export_through_collector(receiver, tmp_path, protocol)
    received = receiver.spans()

    outcomes = {k: (r.status, r.attempts) for k, r in scenario.results.items()}
    assert outcomes == {
        "call-read-retry": ("succeeded", 2),
        "call-write-keyed": ("succeeded", 2),
        "call-secret": ("succeeded", 2),
        "call-permanent": ("permanent_error", 1),
    }
    assert len(received) == 4 + 7  # a call span per call, an attempt span per attempt
    assert {span.transport for span in received} == {"grpc" if protocol == "grpc" else "http"}
    for span in received:
        assert span.scope_name == "toolspan"
        assert span.resource["service.name"] == ("string_value", SERVICE)
        assert span.span.kind == Span.SpanKind.SPAN_KIND_INTERNAL
        check_declared(span)

    trees = call_trees(received)
    assert set(trees) == set(scenario.results)
    for call_id, (call_span, attempts) in trees.items():
        check_call_tree(call_span, attempts, scenario.results[call_id])

    check_retry_schedule(trees, scenario.slept)
    check_write_with_key(trees["call-write-keyed"])
    check_permanent_failure(trees["call-permanent"])
    check_secrets(receiver, scenario)


def check_declared(received: ReceivedSpan) -> None:
    """Every attribute is in the contract, on the right span, with its type."""
    contract = declared_attributes()
    is_call = received.span.name.startswith("execute_tool ")
    for name, (wire_type, _) in received.attributes.items():
        assert name in contract, f"{name} is not in docs/trace-contract.md"
        declared = contract[name]
        assert declared.on_call if is_call else declared.on_attempt, (
            f"{name} is not declared on {'call' if is_call else 'attempt'} spans"
        )
        assert wire_type == declared.wire_type, f"{name}: {wire_type} on the wire"
    required = CALL_ALWAYS if is_call else ATTEMPT_ALWAYS
    assert required <= received.attributes.keys(), required - received.attributes.keys()


Tree = tuple[ReceivedSpan, list[ReceivedSpan]]


def call_trees(received: list[ReceivedSpan]) -> dict[str, Tree]:
    """Call spans by call id, each with its attempt spans in order."""
    calls = {span.span.span_id: span for span in received if span.span.name.startswith("exec")}
    children: dict[bytes, list[ReceivedSpan]] = {span_id: [] for span_id in calls}
    for span in received:
        if span.span.span_id not in calls:
            assert span.span.parent_span_id in calls, f"orphan attempt {span.span.name}"
            children[span.span.parent_span_id].append(span)
    return {
        value(span, "gen_ai.tool.call.id"): (
            span,
            sorted(children[span_id], key=lambda s: value(s, "toolspan.attempt")),
        )
        for span_id, span in calls.items()
    }


def value(span: ReceivedSpan, name: str) -> Any:
    return span.attributes[name][1]


def check_call_tree(call: ReceivedSpan, attempts: list[ReceivedSpan], result: ToolResult) -> None:
    tool = result.tool
    assert call.span.name == f"execute_tool {tool}"
    assert call.span.parent_span_id == b""  # no agent span around these calls
    assert value(call, "gen_ai.operation.name") == "execute_tool"
    assert value(call, "gen_ai.tool.type") == "function"
    assert value(call, "gen_ai.conversation.id") == CONVERSATION
    assert value(call, "toolspan.status") == result.status
    assert value(call, "toolspan.retryable") is result.retryable
    assert value(call, "toolspan.attempts") == result.attempts == len(attempts)
    assert value(call, "toolspan.total_wait_s") == result.total_wait_s

    arguments = value(call, "gen_ai.tool.call.arguments")
    canonical = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    assert arguments == canonical
    assert value(call, "toolspan.args.hash") == sha256(arguments.encode())
    if result.ok:
        assert call.span.status.code == Status.StatusCode.STATUS_CODE_OK
        data = json.dumps(result.data, sort_keys=True, separators=(",", ":"))
        assert value(call, "toolspan.result.hash") == sha256(data.encode())
        assert "toolspan.error_code" not in call.attributes
    else:
        assert call.span.status.code == Status.StatusCode.STATUS_CODE_ERROR
        assert value(call, "toolspan.error_code") == result.error_code
        assert value(call, "error.type") == result.error_code
        assert "toolspan.result.hash" not in call.attributes

    for number, attempt in enumerate(attempts, start=1):
        assert attempt.span.name == f"attempt {number} {tool}"
        assert attempt.span.trace_id == call.span.trace_id
        assert attempt.span.parent_span_id == call.span.span_id
        assert call.span.start_time_unix_nano <= attempt.span.start_time_unix_nano
        assert attempt.span.end_time_unix_nano <= call.span.end_time_unix_nano
        assert value(attempt, "toolspan.attempt") == number
        assert value(attempt, "http.request.resend_count") == number - 1
        for shared in ("gen_ai.tool.name", "gen_ai.tool.call.id", "toolspan.side_effect"):
            assert attempt.attributes[shared] == call.attributes[shared]
        check_attempt_status(attempt, last=number == len(attempts), result=result)


def check_attempt_status(attempt: ReceivedSpan, *, last: bool, result: ToolResult) -> None:
    outcome = value(attempt, "toolspan.attempt.outcome")
    if last and result.ok:
        assert outcome == "ok"
        assert attempt.span.status.code != Status.StatusCode.STATUS_CODE_ERROR
        assert "error.type" not in attempt.attributes
    else:
        assert attempt.span.status.code == Status.StatusCode.STATUS_CODE_ERROR
        assert attempt.span.status.message  # the (redacted) reason
        assert value(attempt, "error.type") == outcome != "ok"
    if not last:
        assert value(attempt, "toolspan.retry.delay_s") > 0


def check_retry_schedule(trees: dict[str, Tree], slept: list[float]) -> None:
    """Delays on the spans are the ones the executor actually slept."""
    retried = [trees[c] for c in ("call-read-retry", "call-write-keyed", "call-secret")]
    assert len(slept) == len(retried)
    for (call, (first, second)), delay in zip(retried, slept, strict=True):
        assert value(first, "toolspan.retry.elapsed_wait_s") == 0.0
        assert value(first, "toolspan.retry.delay_s") == delay
        assert value(second, "toolspan.retry.elapsed_wait_s") == delay
        assert value(second, "toolspan.retry.delay_s") == 0.0
        assert value(call, "toolspan.total_wait_s") == delay
        assert "toolspan.retry.initiator" not in first.attributes
        assert value(second, "toolspan.retry.initiator") == "orchestrator"
    first_503 = retried[0][1][0]
    assert value(first_503, "http.response.status_code") == 503
    assert value(first_503, "error.type") == "http_503"
    # First delay: base 0.5 s plus up to 25 % jitter, on a 0.01 s grid.
    assert all(0.5 <= delay <= 0.63 and round(delay, 2) == delay for delay in slept)


def check_write_with_key(tree: Tree) -> None:
    call, attempts = tree
    assert value(call, "toolspan.side_effect") == "write"
    for span in (call, *attempts):
        assert value(span, "toolspan.idempotency.key") == "hold-R7-D2"
    assert value(attempts[0], "error.type") == "timeout"
    assert "http.response.status_code" not in attempts[0].attributes


def check_permanent_failure(tree: Tree) -> None:
    call, (attempt,) = tree
    assert value(call, "toolspan.status") == "permanent_error"
    assert value(call, "http.response.status_code") == 404
    assert value(attempt, "http.response.status_code") == 404
    assert value(attempt, "toolspan.retry.delay_s") == 0.0


def check_secrets(receiver: OtlpReceiver, scenario: Scenario) -> None:
    planted = scenario.secrets
    # The tool itself got the original arguments...
    assert {"dock_id": "D3", "api_key": planted.api_key, "note": planted.bearer} in (
        scenario.service.received
    )
    # ...and nothing secret crossed the network, in any request body.
    wire = b"".join(receiver.raw_bytes)
    for form in planted.all_forms():
        assert form not in wire
    call, attempts = call_trees(receiver.spans())["call-secret"]
    arguments = json.loads(value(call, "gen_ai.tool.call.arguments"))
    assert arguments == {"api_key": "[REDACTED]", "dock_id": "D3", "note": "[REDACTED]"}
    assert "[REDACTED]" in attempts[0].span.status.message


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_the_standard_otlp_environment_variables_are_honoured(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    endpoint = receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    telemetry = setup_telemetry(SERVICE, set_global=False)  # otlp=None: decided by the env
    scenario = run_calls(telemetry.tracer_provider, Secrets.fresh())
    telemetry.force_flush()
    telemetry.shutdown()

    received = receiver.wait_for_spans(11, timeout_s=10.0)
    assert {span.transport for span in received} == {"grpc" if protocol == "grpc" else "http"}
    assert set(call_trees(received)) == set(scenario.results)
    check_secrets(receiver, scenario)
