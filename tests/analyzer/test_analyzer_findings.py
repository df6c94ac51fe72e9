"""Every finding and every benign look-alike of the issue, on labelled traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolspan.analyzer import Analyzer, Finding

from .conftest import Recorder, gzip_copy, span_hex, trace_hex, zstd_copy


@pytest.fixture
def scenario(tmp_path: Path) -> dict[str, object]:
    """Record all labelled conversations, spread over files, batches and noise."""
    rec = Recorder()
    labels: dict[str, object] = {}
    # loop: the same search, same answer, three times in one conversation.
    with rec.conversation("c-loop"):
        rec.noise("c-loop")
        labels["loop"] = [
            span_hex(rec.toolspan_call("search", "c-loop", {"q": "x"}, result=["a"]))
            for _ in range(3)
        ]
    # benign: two identical calls only.
    with rec.conversation("c-twice"):
        for _ in range(2):
            rec.toolspan_call("search", "c-twice", {"q": "y"}, result=["b"])
    # benign: polling that makes progress (same args, different results).
    with rec.conversation("c-poll"):
        for progress in range(4):
            rec.toolspan_call("job_status", "c-poll", {"job": 1}, result={"done": progress})
    # benign: retries inside one logical call.
    with rec.conversation("c-retry"):
        rec.toolspan_call(
            "search", "c-retry", {"q": "z"}, result=[], outcomes=("timeout",) * 3 + ("ok",)
        )
    # benign: the same call across three conversations.
    for n in range(3):
        with rec.conversation(f"c-across-{n}"):
            rec.toolspan_call("search", f"c-across-{n}", {"q": "same"}, result=["s"])
    first_file = rec.take()
    # cycle A, B, A, B, A, B; half of it lands in another file.
    with rec.conversation("c-cycle"):
        for _ in range(3):
            rec.toolspan_call("open_page", "c-cycle", {"url": "u"}, result="page")
            rec.toolspan_call("go_back", "c-cycle", {}, result="home")
    # a failing loop: the model repeats a call that keeps failing.
    with rec.conversation("c-fail-loop"):
        for _ in range(3):
            rec.toolspan_call(
                "fetch", "c-fail-loop", {"id": 9}, outcomes=("http_404",), status="permanent_error"
            )
    # duplicate writes.
    with rec.conversation("c-write"):
        labels["dup_unkeyed"] = [
            span_hex(
                rec.toolspan_call(
                    "send_email", "c-write", {"to": "a"}, result="sent", side_effect="write"
                )
            )
            for _ in range(2)
        ]
        labels["dup_keyed"] = [
            span_hex(
                rec.toolspan_call(
                    "pay", "c-write", {"amount": n}, result="ok", side_effect="write", key="k-pay"
                )
            )
            for n in (5, 5)
        ]
        # benign: a keyed write executed once and then replayed.
        rec.toolspan_call(
            "refund", "c-write", {"id": 1}, result="ok", side_effect="write", key="k-ref"
        )
        rec.toolspan_call(
            "refund",
            "c-write",
            {"id": 1},
            result="ok",
            side_effect="write",
            key="k-ref",
            replayed=True,
        )
        # benign: same write with different arguments; and a failed repeat.
        rec.toolspan_call("send_email", "c-write", {"to": "b"}, result="sent", side_effect="write")
        rec.toolspan_call("post", "c-write", {"m": 1}, result="ok", side_effect="write")
        rec.toolspan_call(
            "post",
            "c-write",
            {"m": 1},
            outcomes=("http_400",),
            status="permanent_error",
            side_effect="write",
        )
    # idempotency conflict: one key, two different argument sets.
    with rec.conversation("c-conflict"):
        # The second use of the key is refused by the tracer: nothing ran.
        labels["conflict"] = [
            span_hex(
                rec.toolspan_call(
                    "book",
                    "c-conflict",
                    {"seat": "1A"},
                    result="ok",
                    side_effect="write",
                    key="k-book",
                )
            ),
            span_hex(
                rec.toolspan_call(
                    "book",
                    "c-conflict",
                    {"seat": "2B"},
                    outcomes=(),
                    status="idempotency_conflict",
                    side_effect="write",
                    key="k-book",
                )
            ),
        ]
        # benign: same key, same args (a replay).
        rec.toolspan_call(
            "book", "c-conflict", {"seat": "3C"}, result="ok", side_effect="write", key="k-same"
        )
        rec.toolspan_call(
            "book",
            "c-conflict",
            {"seat": "3C"},
            result="ok",
            side_effect="write",
            key="k-same",
            replayed=True,
        )
    # unsafe retry: an unkeyed write attempted twice inside one call.
    with rec.conversation("c-unsafe"):
        labels["unsafe"] = span_hex(
            rec.toolspan_call(
                "create_user",
                "c-unsafe",
                {"n": "x"},
                outcomes=("http_503", "ok"),
                result="u1",
                side_effect="write",
            )
        )
        # benign: keyed write retried; read-only call retried.
        rec.toolspan_call(
            "create_user",
            "c-unsafe",
            {"n": "y"},
            outcomes=("http_503", "ok"),
            result="u2",
            side_effect="write",
            key="k-u",
        )
        rec.toolspan_call(
            "lookup", "c-unsafe", {"n": "y"}, outcomes=("timeout", "timeout", "ok"), result="u2"
        )
    second_file = rec.take()
    # Foreign instrumentations: GenAI execute_tool and OpenInference TOOL spans.
    with rec.conversation("c-genai"):
        for text in ('{"a": 1, "b": 2}', '{"b":2,"a":1}', '{ "a":1 ,"b":2 }'):
            rec.genai_tool("weather", text, '{"temp": 20, "unit": "C"}', conversation="c-genai")
        for _ in range(2):
            rec.genai_tool("create_ticket", '{"title": "t"}', '"T-1"', conversation="c-genai")
    with rec.conversation(None):  # no conversation id anywhere: the trace id is the conversation
        labels["no_conv_calls"] = [
            rec.genai_tool("lookup_sku", '{"sku": 7}', "{}") for _ in range(3)
        ]
    labels["no_conv_trace"] = trace_hex(labels["no_conv_calls"][0])  # type: ignore[index]
    with rec.conversation(None):
        for _ in range(3):
            rec.openinference_tool("wiki", '{"page": "Paris"}', "Paris is...", session="s-oi")
    third_file = rec.take()

    # Files: the first split over two files at a batch boundary, the second gzip, the third zst.
    Recorder.write(tmp_path / "a.jsonl", first_file[: len(first_file) // 2], batch=3)
    (tmp_path / "sub").mkdir()
    Recorder.write(tmp_path / "sub" / "b.jsonl", first_file[len(first_file) // 2 :], batch=5)
    plain = Recorder.write(tmp_path / "c.tmp", second_file, batch=7)
    gzip_copy(plain, tmp_path / "c.jsonl.gz")
    plain.unlink()
    plain = Recorder.write(tmp_path / "d.tmp", third_file, batch=2)
    zstd_copy(plain, tmp_path / "sub" / "d.json.zst")
    plain.unlink()
    (tmp_path / "notes.txt").write_text("not a trace file\n")
    labels["dir"] = tmp_path
    return labels


def _by_kind(findings: list[Finding], kind: str) -> list[Finding]:
    return [f for f in findings if f.kind == kind]


def test_loops_are_found_and_look_alikes_are_not(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        loops = {(f.conversation_id, f.tool): f for f in _by_kind(az.findings(), "loop")}
    no_conv = scenario["no_conv_trace"]
    assert set(loops) == {
        ("c-loop", "search"),
        ("c-cycle", "open_page"),
        ("c-cycle", "go_back"),
        ("c-fail-loop", "fetch"),
        ("c-genai", "weather"),
        (no_conv, "lookup_sku"),
        ("s-oi", "wiki"),
    }
    loop = loops[("c-loop", "search")]
    assert loop.count == 3
    assert list(loop.span_ids) == scenario["loop"]
    assert len(loop.trace_ids) == 1
    assert loop.first_seen < loop.last_seen
    # Each call span lasts 23 ms (20 in the attempt, 1 ms clock ticks around it); two repeats.
    assert loop.detail["wasted_ms"] == pytest.approx(2 * 23.0)
    assert json.loads(loop.detail["arguments"]) == {"q": "x"}
    assert loops[("c-cycle", "open_page")].detail["cycle_tools"] == ["go_back", "open_page"]
    assert loops[("c-fail-loop", "fetch")].detail["answer"] == "http_404"
    assert loops[("c-genai", "weather")].count == 3


def test_min_repeats_changes_the_loop_threshold(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        loops2 = {(f.conversation_id, f.tool) for f in _by_kind(az.findings(min_repeats=2), "loop")}
        loops4 = _by_kind(az.findings(min_repeats=4), "loop")
    assert ("c-twice", "search") in loops2
    assert ("c-genai", "create_ticket") in loops2
    assert ("c-poll", "job_status") not in loops2  # progress: different results
    assert not any(c.startswith("c-across") for c, _ in loops2)
    assert ("c-retry", "search") not in loops2  # retries inside one call
    assert loops4 == []


def test_duplicate_writes(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        found = _by_kind(az.findings(), "duplicate_write")
        assert {(f.conversation_id, f.tool, f.idempotency_key) for f in found} == {
            ("c-write", "send_email", None),
            ("c-write", "pay", "k-pay"),
        }
        assert {f.span_ids for f in found} == {
            tuple(scenario["dup_unkeyed"]),  # type: ignore[arg-type]
            tuple(scenario["dup_keyed"]),  # type: ignore[arg-type]
        }
        # Foreign spans do not say they write until the user names the write tools.
        az.set_write_tools(["create_*"])
        found = _by_kind(az.findings(), "duplicate_write")
        assert ("c-genai", "create_ticket") in {(f.conversation_id, f.tool) for f in found}
        sides = az.query(
            "SELECT tool, any_value(side_effect) FROM tool_calls"
            " WHERE source = 'genai' GROUP BY tool"
        ).rows
        assert dict(sides) == {"weather": "none", "create_ticket": "write", "lookup_sku": "none"}
        az.set_write_tools([])
        assert az.query(
            "SELECT count(*) FROM tool_calls WHERE source <> 'toolspan' AND side_effect IS NOT NULL"
        ).rows == [(0,)]


def test_idempotency_conflicts_and_unsafe_retries(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        findings = az.findings()
    conflicts = _by_kind(findings, "idempotency_conflict")
    assert [(f.idempotency_key, f.tool, f.count) for f in conflicts] == [("k-book", "book", 2)]
    assert list(conflicts[0].span_ids) == scenario["conflict"]
    assert len(conflicts[0].detail["args_fingerprints"]) == 2
    unsafe = _by_kind(findings, "unsafe_retry")
    assert [(f.conversation_id, f.tool, f.count, f.span_ids) for f in unsafe] == [
        ("c-unsafe", "create_user", 2, (scenario["unsafe"],))
    ]
    assert unsafe[0].detail["attempt_outcomes"] == ["http_503", "ok"]


def test_findings_view_matches_the_api(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        api = [(f.kind, f.conversation_id, f.tool, f.count) for f in az.findings()]
        view = az.query("SELECT kind, conversation_id, tool, count FROM findings").rows
    assert view == api
    assert len(api) == 11


def test_tool_calls_come_from_tool_spans_only(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        per_source = dict(az.query("SELECT source, count(*) FROM tool_calls GROUP BY source").rows)
        # toolspan: 3 + 2 + 4 + 1 + 3 + 6 + 3 + 2 + 2 + 2 + 1 + 2 + 2 + 2 + 3 calls.
        assert per_source == {"toolspan": 38, "genai": 8, "openinference": 3}
        assert az.query("SELECT count(*) FROM tool_calls WHERE tool IS NULL").rows == [(0,)]
        summary = az.summary()
    assert summary["calls"] == 49
    assert summary["retries"] == 3 + 1 + 1 + 2
    assert summary["statuses_by_tool"]["fetch"] == {"permanent_error": 3}
    assert summary["bad_lines"] == 0
