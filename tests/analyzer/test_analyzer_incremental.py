"""The live ingest's incremental refresh: after many small batches (as the
spool hands them over), the materialised calls and findings are exactly what
recomputing everything gives, whatever the batches hold; and a small batch
recomputes the findings of its own conversations only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolspan.analyzer import Analyzer

T0_NS = 1_767_225_600_000_000_000
_ORDERED_FINDINGS = "SELECT * FROM finding_rows ORDER BY ALL"
_RECOMPUTED_FINDINGS = "SELECT * FROM toolspan_findings(3) ORDER BY ALL"


def _attribute(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _span(trace: int, span: int, fields: dict[str, Any]) -> dict[str, Any]:
    """A GenAI tool span (or, with ``agent``, the agent span that names the
    trace's conversation) from generated fields."""
    start = T0_NS + fields["start_ms"] * 1_000_000
    attributes = []
    if fields.get("agent"):
        name = "invoke_agent"
        attributes.append(_attribute("gen_ai.conversation.id", fields["conversation"]))
    else:
        name = f"execute_tool {fields['tool']}"
        attributes += [
            _attribute("gen_ai.operation.name", "execute_tool"),
            _attribute("gen_ai.tool.name", fields["tool"]),
            _attribute("gen_ai.tool.call.arguments", fields["args"]),
        ]
        if fields["conversation"] is not None:
            attributes.append(_attribute("gen_ai.conversation.id", fields["conversation"]))
        for key, attribute in (
            ("key", "toolspan.idempotency.key"),
            ("request", "toolspan.request.id"),
            ("resource", "toolspan.resource.key"),
            ("error", "error.type"),
        ):
            if fields[key] is not None:
                attributes.append(_attribute(attribute, fields[key]))
    failed = not fields.get("agent") and fields["error"] is not None
    return {
        "traceId": f"{trace:032x}",
        "spanId": f"{span:016x}",
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + fields["duration_ms"] * 1_000_000),
        "attributes": attributes,
        "status": {"code": "STATUS_CODE_ERROR" if failed else "STATUS_CODE_OK"},
    }


def _call() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "trace": st.integers(1, 6),
            "conversation": st.sampled_from([None, "c1", "c2", "c3"]),
            "tool": st.sampled_from(["send_email", "search"]),
            "args": st.sampled_from(['{"a":1}', '{"a":2}']),
            "key": st.sampled_from([None, None, "k1", "k2"]),
            "request": st.sampled_from([None, "r1"]),
            "resource": st.sampled_from([None, "o1"]),
            "error": st.sampled_from([None, None, None, "timeout"]),
            "agent": st.just(False),
            "start_ms": st.integers(0, 6).map(lambda n: 5 * n),
            "duration_ms": st.sampled_from([0, 5, 10]),
        }
    )


def _agent() -> st.SearchStrategy[dict[str, Any]]:
    # A late agent span gives a trace's conversation-less tool spans their
    # conversation: their calls move out of the trace-id conversation.
    return st.fixed_dictionaries(
        {
            "trace": st.integers(1, 6),
            "conversation": st.sampled_from(["c1", "c2", "c3"]),
            "agent": st.just(True),
            "start_ms": st.just(0),
            "duration_ms": st.just(40),
        }
    )


def _write(path: Path, spans: list[dict[str, Any]]) -> Path:
    request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
    path.write_bytes(orjson.dumps(request) + b"\n")
    return path


def _numbered(batches: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    number = 0
    spans = []
    for batch in batches:
        spans.append([])
        for fields in batch:
            number += 1
            spans[-1].append(_span(fields["trace"], number, fields))
    return spans


# Calls of other conversations, each with its own arguments (no finding).
_BASE = [
    {
        **call,
        "trace": 100 + n,
        "conversation": f"base-{n % 5}",
        "args": f'{{"n":{n}}}',
        "start_ms": 5 * (n % 4),
    }
    for n, call in enumerate(
        [
            {
                "tool": "search",
                "args": '{"a":1}',
                "key": None,
                "request": None,
                "resource": None,
                "error": None,
                "duration_ms": 5,
            }
        ]
        * 40
    )
]


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    batches=st.lists(
        st.lists(st.one_of(_call(), _call(), _call(), _agent()), min_size=1, max_size=4),
        min_size=1,
        max_size=4,
    )
)
def test_small_batches_give_the_findings_of_a_full_recompute(
    tmp_path_factory: Any, batches: list[list[dict[str, Any]]]
) -> None:
    directory = tmp_path_factory.mktemp("batches")
    with Analyzer() as analyzer:
        analyzer.set_write_tools(["send_email"])
        # Enough calls before the small batches that a refresh scopes its findings.
        analyzer.ingest(
            [
                _write(
                    directory / "base.jsonl",
                    [_span(c["trace"], 10_000 + n, c) for n, c in enumerate(_BASE)],
                )
            ]
        )
        for number, spans in enumerate(_numbered(batches)):
            analyzer.ingest([_write(directory / f"batch-{number}.jsonl", spans)])
            stored = analyzer.query(_ORDERED_FINDINGS).rows
            assert stored == analyzer.query(_RECOMPUTED_FINDINGS).rows
        calls = "SELECT * FROM tool_call_rows ORDER BY ALL"
        incremental = analyzer.query(calls).rows
        files = sorted(directory.glob("*.jsonl"))
    with Analyzer() as once:
        once.set_write_tools(["send_email"])
        once.ingest(files)
        assert once.query(calls).rows == incremental


def test_a_small_batch_recomputes_only_the_findings_of_its_conversations(
    tmp_path: Path,
) -> None:
    base = [_span(c["trace"], 10_000 + n, c) for n, c in enumerate(_BASE)]
    with Analyzer() as analyzer:
        analyzer.ingest([_write(tmp_path / "base.jsonl", base)])
        # A finding of a conversation no later batch touches: a scoped refresh
        # leaves it; recomputing every finding would drop it (no call makes it).
        analyzer.connection.execute(
            "INSERT INTO finding_rows (kind, conversation_id, count) "
            "VALUES ('loop', 'elsewhere', 3)"
        )
        call = {**_BASE[1], "trace": 7}
        spans = [_span(7, n, {**call, "start_ms": 10 * n}) for n in (1, 2)]
        analyzer.ingest([_write(tmp_path / "small.jsonl", spans)])
        loops = analyzer.query("SELECT conversation_id FROM finding_rows WHERE kind = 'loop'").rows
        assert ("elsewhere",) in loops
        # ... and the conversation it touched is recomputed: with the base's
        # call of the same arguments, base-1 now loops.
        assert ("base-1",) in loops
