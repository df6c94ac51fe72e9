"""Labelled traces for the retry-safety findings (issue 11): every new kind and
every benign look-alike, recorded with the real OpenTelemetry SDK. Shared by the
analyzer tests and the dashboard's Findings page test."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from .conftest import Recorder, span_hex


def _request(request_id: str, **more: Any) -> dict[str, Any]:
    return {"toolspan.request.id": request_id, **more}


def _side_by_side(rec: Recorder, *calls: Callable[[], ReadableSpan]) -> list[str]:
    """Record the calls so that each starts 5 ms after the one before: they overlap
    (each call span lasts 23 ms). Returns their span ids."""
    start, ends, ids = rec.now, [], []
    for number, record in enumerate(calls):
        rec.now = start + number * 5_000_000
        ids.append(span_hex(record()))
        ends.append(rec.now)
    rec.now = max(ends)
    return ids


def _key_churn(rec: Recorder, labels: dict[str, Any]) -> None:
    refund = {"order": 1, "amount": 5}

    def write(conversation: str, args: dict[str, Any], key: str, **options: Any) -> ReadableSpan:
        return rec.toolspan_call(
            "create_refund",
            conversation,
            args,
            result="ok",
            side_effect="write",
            key=key,
            **options,
        )

    with rec.conversation("c-churn"):
        # Three attempts at one refund, each under a freshly minted key.
        labels["churn"] = [
            span_hex(write("c-churn", refund, f"k-{n}", extra=_request("r1"))) for n in range(3)
        ]
        # benign: different arguments under different keys, same request.
        write("c-churn", {"order": 2, "amount": 5}, "k-a", extra=_request("r1"))
        write("c-churn", {"order": 3, "amount": 5}, "k-b", extra=_request("r1"))
        # benign: the same refund in two different requests (two user asks).
        write("c-churn", refund, "k-r2", extra=_request("r2"))
        write("c-churn", refund, "k-r3", extra=_request("r3"))
        # benign: one key, the second use replayed.
        write("c-churn", refund, "k-same", extra=_request("r4"))
        write("c-churn", refund, "k-same", extra=_request("r4"), replayed=True)
        # benign: a failed attempt under one key, then a success under another.
        rec.toolspan_call(
            "create_refund",
            "c-churn",
            refund,
            outcomes=("http_400",),
            status="permanent_error",
            side_effect="write",
            key="k-failed",
            extra=_request("r5"),
        )
        write("c-churn", refund, "k-ok", extra=_request("r5"))
        # benign: a read with churning keys is not a write.
        for n in range(2):
            rec.toolspan_call("quote", "c-churn", refund, result=1, extra=_request("r1", n=n))
    with rec.conversation("c-churn-no-request"):
        # No request id at all: NULL-safe equal, still one request.
        labels["churn_no_request"] = [
            span_hex(write("c-churn-no-request", refund, key)) for key in ("k-x", "k-y")
        ]


def _write_after_unknown(rec: Recorder, labels: dict[str, Any]) -> None:
    charge = {"amount": 7}

    def call(conversation: str, args: dict[str, Any], **options: Any) -> ReadableSpan:
        options.setdefault("side_effect", "write")
        options.setdefault("result", "charged")
        return rec.toolspan_call("charge", conversation, args, **options)

    unknown: dict[str, Any] = {"outcomes": ("unknown_outcome",), "status": "unsafe_retry"}
    with rec.conversation("c-unknown"):
        first = span_hex(call("c-unknown", charge, **unknown))
        # The model asks again twice; nothing read the first charge back.
        labels["unknown"] = [
            first,
            span_hex(call("c-unknown", charge)),
            span_hex(call("c-unknown", charge)),
        ]
        # benign: different arguments after an unknown outcome.
        call("c-unknown", {"amount": 8}, **unknown)
        call("c-unknown", {"amount": 9})
    with rec.conversation("c-unknown-read-back"):
        # benign: the repeat read the effect back first (toolspan's own path).
        call("c-unknown-read-back", charge, outcomes=("timeout",), status="unsafe_retry")
        call("c-unknown-read-back", charge, extra={"toolspan.read_back": "absent"})
    with rec.conversation("c-unknown-benign"):
        # benign: a read that timed out and was asked again.
        rec.toolspan_call("lookup", "c-unknown-benign", charge, outcomes=("timeout",))
        rec.toolspan_call("lookup", "c-unknown-benign", charge, result=1)
        # benign: a repeat that returned the stored result, and one that never ran.
        call("c-unknown-benign", charge, outcomes=("connection_error",), status="unsafe_retry")
        call("c-unknown-benign", charge, key="k-c", replayed=True)
        call("c-unknown-benign", charge, outcomes=(), status="in_progress")
        # benign: the same write before the unknown outcome, never after it.
        call("c-unknown-benign", {"amount": 10})
        call("c-unknown-benign", {"amount": 10}, outcomes=("timeout",), status="unsafe_retry")
    with rec.conversation("c-connection"):
        first = span_hex(
            call("c-connection", charge, outcomes=("connection_error",), status="unsafe_retry")
        )
        labels["connection"] = [first, span_hex(call("c-connection", charge))]
    # Another instrumentation: GenAI execute_tool spans whose error.type is timeout.
    with rec.conversation("c-genai-unknown"):
        timed_out = rec.genai_tool(
            "book_flight",
            '{"flight": "LH1"}',
            None,
            conversation="c-genai-unknown",
            error="timeout",
        )
        again = rec.genai_tool(
            "book_flight", '{ "flight":"LH1" }', '"booked"', conversation="c-genai-unknown"
        )
        labels["genai_unknown"] = [span_hex(timed_out), span_hex(again)]
        # benign: a GenAI read that timed out and was asked again.
        rec.genai_tool(
            "weather", '{"city": "Oslo"}', None, conversation="c-genai-unknown", error="timeout"
        )
        rec.genai_tool("weather", '{"city": "Oslo"}', "cold", conversation="c-genai-unknown")


def _retried_permanent(rec: Recorder, labels: dict[str, Any]) -> None:
    with rec.conversation("c-permanent"):
        labels["permanent_404"] = span_hex(
            rec.toolspan_call(
                "get_order",
                "c-permanent",
                {"id": 404},
                outcomes=("http_404", "http_404", "http_404"),
                status="attempt_limit",
            )
        )
        labels["permanent_args"] = span_hex(
            rec.toolspan_call(
                "update_order",
                "c-permanent",
                {"id": 1},
                outcomes=("http_503", "invalid_arguments", "ok"),
                result="ok",
                side_effect="write",
                key="k-upd",
                # A service known to honour keys: the retry of the 503 is no finding.
                extra={"toolspan.tool.keys_honoured": "true"},
            )
        )
        # benign: 429 and 503 are worth waiting for.
        rec.toolspan_call(
            "get_order", "c-permanent", {"id": 2}, outcomes=("http_429", "http_503", "ok"), result=1
        )
        # benign: a permanent error that ended the call (it was the last attempt).
        rec.toolspan_call(
            "get_order",
            "c-permanent",
            {"id": 3},
            outcomes=("http_503", "http_404"),
            status="permanent_error",
        )
        # benign: one attempt only; and a 409 (not in the rule's list) retried.
        rec.toolspan_call(
            "get_order", "c-permanent", {"id": 4}, outcomes=("http_400",), status="permanent_error"
        )
        rec.toolspan_call(
            "get_order", "c-permanent", {"id": 5}, outcomes=("http_409", "ok"), result=1
        )


def _parallel_write(rec: Recorder, labels: dict[str, Any]) -> None:
    def write(
        tool: str, conversation: str, resource: str, **options: Any
    ) -> Callable[[], ReadableSpan]:
        options.setdefault("side_effect", "write")
        return lambda: rec.toolspan_call(
            tool,
            conversation,
            {"order_id": resource, "n": rec.next_id("")},
            result="ok",
            extra={"toolspan.resource.key": resource},
            **options,
        )

    with rec.conversation("c-parallel"):
        # A refund and a cancel of order-1 at the same time, then a third write later.
        labels["parallel_mixed"] = _side_by_side(
            rec,
            write("refund_order", "c-parallel", "order-1"),
            write("cancel_order", "c-parallel", "order-1"),
            write("refund_order", "c-parallel", "order-1"),
        )
        write("refund_order", "c-parallel", "order-1")()  # after them: overlaps nothing
        labels["parallel_same_tool"] = _side_by_side(
            rec,
            write("refund_order", "c-parallel", "order-2"),
            write("refund_order", "c-parallel", "order-2"),
        )
        # benign: sequential writes on one resource.
        for _ in range(3):
            write("refund_order", "c-parallel", "order-3")()
        # benign: overlapping writes on different resources.
        _side_by_side(
            rec,
            write("refund_order", "c-parallel", "order-4"),
            write("refund_order", "c-parallel", "order-5"),
        )
        # benign: overlapping reads of one resource.
        _side_by_side(
            rec,
            write("get_order", "c-parallel", "order-6", side_effect="none"),
            write("get_order", "c-parallel", "order-6", side_effect="none"),
        )
        # benign: overlapping writes that never ran (refused: nothing executed).
        _side_by_side(
            rec,
            write("refund_order", "c-parallel", "order-7", outcomes=(), status="in_progress"),
            write("refund_order", "c-parallel", "order-7", outcomes=(), status="in_progress"),
        )
    # benign: the same resource written at the same time in two conversations.
    start = rec.now
    with rec.conversation("c-parallel-a"):
        write("refund_order", "c-parallel-a", "order-8")()
    rec.now = start
    with rec.conversation("c-parallel-b"):
        write("refund_order", "c-parallel-b", "order-8")()


def _unverified_keyed_retry(rec: Recorder, labels: dict[str, Any]) -> None:
    # One order per call (its own key): no churn, loop or conflict among them.
    def write(key: str, outcomes: tuple[str, ...], **extra: Any) -> ReadableSpan:
        return rec.toolspan_call(
            "refund_order",
            "c-keyed",
            {"order": key, "amount": 5},
            result="ok",
            side_effect="write",
            key=key,
            outcomes=outcomes,
            extra=_request("r1", **extra),
        )

    with rec.conversation("c-keyed"):
        # The newcomer's refund: timed out (committed), then 429, then ok, under one
        # key nobody verified the service honours.
        labels["keyed_timeout"] = span_hex(write("kv-1", ("timeout", "http_429", "ok")))
        # A key whose earlier run ended unknown, run again without a read-back.
        labels["keyed_required"] = span_hex(
            write("kv-2", ("ok",), **{"toolspan.read_back": "required"})
        )
        # The service said it honours keys (False is no better than unknown).
        labels["keyed_false"] = span_hex(
            write("kv-3", ("http_503", "ok"), **{"toolspan.tool.keys_honoured": "false"})
        )
        # benign: declared keys_honoured=True; a read-back found the effect absent;
        # a 429 commits nothing; the ambiguous attempt was the last one; a replay.
        write("kv-4", ("timeout", "ok"), **{"toolspan.tool.keys_honoured": "true"})
        write("kv-5", ("timeout", "ok"), **{"toolspan.read_back": "absent"})
        write("kv-6", ("http_429", "ok"))
        write("kv-7", ("ok", "timeout"))
        rec.toolspan_call(
            "refund_order",
            "c-keyed",
            {"order": "kv-1", "amount": 5},
            result="ok",
            side_effect="write",
            key="kv-1",
            replayed=True,
            outcomes=(),
            extra=_request("r1", **{"toolspan.read_back": "required"}),
        )


def write_retry_traces(directory: Path) -> dict[str, Any]:
    """Record every labelled conversation into two files under ``directory``;
    returns the labels (span ids of the calls each finding must list)."""
    rec = Recorder()
    labels: dict[str, Any] = {}
    for record in (
        _key_churn,
        _write_after_unknown,
        _retried_permanent,
        _parallel_write,
        _unverified_keyed_retry,
    ):
        record(rec, labels)
    spans = rec.take()
    Recorder.write(directory / "a.jsonl", spans[: len(spans) // 2], batch=5)
    Recorder.write(directory / "b.jsonl", spans[len(spans) // 2 :], batch=3)
    labels["dir"] = directory
    return labels
