"""Plain-text renderings (table, markdown, csv, json) for the command line."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import unicodedata
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

import orjson

from ._model import Finding

FINDING_COLUMNS = (
    "kind",
    "conversation_id",
    "tool",
    "idempotency_key",
    "count",
    "first_seen",
    "why",
)


def cell(value: Any) -> str:
    """One value as display text."""
    if type(value) is str:  # most cells: ahead of the isinstance checks below
        return value
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="milliseconds")
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def visible(text: str) -> str:
    """``text`` with every control or format character written as an escape.

    Trace values are untrusted: a newline would start a new table row, an ESC
    byte a terminal escape sequence, a bidi override would reorder the line.
    """
    if text.isprintable():
        return text
    return "".join(
        _ESCAPES.get(char) or (f"\\u{ord(char):04x}" if _hidden(char) else char) for char in text
    )


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Markdown that could make structure in a table cell: links and images, HTML,
# code, emphasis, strikethrough, entities, the cell separator, and the escape
# itself. "_" only at a word's edge (create_user stays as it is).
_MARKDOWN = re.compile(r"[\\`*\[\]<>|~&!]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown inline text: control characters and metacharacters escaped."""
    return _MARKDOWN.sub(lambda m: "\\" + m[0], visible(text))


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, markdown: bool = False) -> str:
    """An aligned text table, or a GitHub-flavoured markdown table; cells are
    shown literally (see :func:`visible`, :func:`markdown_text`)."""
    if markdown:
        head = "| " + " | ".join(markdown_text(c) for c in columns) + " |"
        rule = "|" + "|".join("---" for _ in columns) + "|"
        body = ["| " + " | ".join(markdown_text(cell(v)) for v in row) + " |" for row in rows]
        return "\n".join([head, rule, *body])
    columns = [visible(c) for c in columns]
    texts = [[visible(cell(v)) for v in row] for row in rows]
    widths = [max([len(c), *(len(row[i]) for row in texts)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(
        "  ".join(t.ljust(w) for t, w in zip(row, widths, strict=True)).rstrip() for row in texts
    )
    return "\n".join(lines)


def csv_text(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """RFC 4180 CSV with a header row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([[cell(v) for v in row] for row in rows])
    return out.getvalue().rstrip("\n")


def json_text(value: Any) -> str:
    """``value`` as the command line prints JSON: ``json.dumps(value, indent=2,
    ensure_ascii=False)``'s text, written by orjson, with NaN and infinities as
    null (JSON has neither). The standard library's encoder took 1.5-3 s of
    ``toolspan analyze --format json``'s 3.1 s for the 39,641 findings of
    bench/clickhouse_bench.py's 1M spans. Where orjson refuses a value (an
    integer beyond 64 bits), the standard library writes it."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONEncodeError:
        return json.dumps(_finite(value), indent=2, ensure_ascii=False)


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None, as orjson writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_value(value: Any) -> Any:
    """A JSON-serialisable form of a DuckDB value."""
    if isinstance(value, datetime):
        return value.isoformat() + ("Z" if value.tzinfo is None else "")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


def finding_why(finding: Finding) -> str:
    """A short, human explanation of a finding."""
    detail = finding.detail
    if finding.kind == "loop":
        cycle = [t for t in detail.get("cycle_tools") or [] if t != finding.tool]
        extra = f", cycling with {', '.join(cycle)}" if cycle else ""
        if detail.get("requested"):
            # Only the model's requests were recorded: no answer, no time to waste.
            return f"the model requested the same call {finding.count}x (no tool span){extra}"
        return (
            f"same call and answer {finding.count}x, answer={str(detail.get('answer'))[:16]}, "
            f"wasted {detail.get('wasted_ms')} ms{extra}"
        )
    if finding.kind == "duplicate_write":
        return f"write succeeded {finding.count}x for one action"
    if finding.kind == "idempotency_conflict":
        return f"key used with {len(detail.get('args_fingerprints') or [])} argument sets"
    if finding.kind == "unsafe_retry":
        return f"unkeyed write attempted {finding.count}x: {detail.get('attempt_outcomes')}"
    if finding.kind == "unverified_keyed_retry":
        outcomes = detail.get("attempt_outcomes")
        return f"keyed write ran again after an unknown outcome, unchecked: {outcomes}"
    if finding.kind == "key_churn":
        return f"same write under {len(detail.get('keys') or [])} different keys"
    if finding.kind == "write_after_unknown":
        return f"ended {detail.get('error_code')}, run again {finding.count - 1}x unchecked"
    if finding.kind == "retried_permanent":
        return f"permanent failure retried: {detail.get('attempt_outcomes')}"
    if finding.kind == "parallel_write":
        return f"{finding.count} overlapping writes on {detail.get('resource_key')}"
    return ""


def findings_rows(findings: Sequence[Finding]) -> list[tuple[Any, ...]]:
    return [
        (
            f.kind,
            f.conversation_id,
            f.tool,
            f.idempotency_key,
            f.count,
            f.first_seen,
            finding_why(f),
        )
        for f in findings
    ]


def summary_text(summary: dict[str, Any], *, markdown: bool = False) -> str:
    """The summary figures as a key/value table, the coverage, and statuses by tool."""
    scalar = [(k, v) for k, v in summary.items() if k not in ("statuses_by_tool", "coverage")]
    statuses = sorted({s for by in summary["statuses_by_tool"].values() for s in by})
    by_tool = [
        (tool, *(counts.get(s, 0) for s in statuses))
        for tool, counts in sorted(summary["statuses_by_tool"].items())
    ]
    parts = [table(("figure", "value"), scalar, markdown=markdown)]
    if "coverage" in summary:
        parts.append(
            table(("coverage", "value"), coverage_rows(summary["coverage"]), markdown=markdown)
        )
    if by_tool:
        parts.append(table(("tool", *statuses), by_tool, markdown=markdown))
    return "\n\n".join(parts)


def coverage_rows(cover: dict[str, Any]) -> list[tuple[str, int]]:
    """The coverage object as (figure, value) rows: one per source of tool calls
    (a source none was found from is not listed)."""
    return [
        ("spans read", cover["spans"]),
        ("GenAI spans", cover["genai_spans"]),
        ("GenAI spans in traces without a tool call", cover["genai_spans_without_calls"]),
        *((f"tool calls from {source}", calls) for source, calls in cover["tool_calls"].items()),
        *([("tool calls", 0)] if not cover["tool_calls"] else []),
        ("calls with arguments not recorded (unverifiable)", cover["unverifiable_calls"]),
    ]


def coverage_line(cover: dict[str, Any]) -> str:
    """The coverage in one line of plain text (the dashboard's caption)."""
    by_source = ", ".join(f"{calls:,} {source}" for source, calls in cover["tool_calls"].items())
    return (
        f"{cover['spans']:,} spans read, {cover['genai_spans']:,} GenAI-looking"
        f" ({cover['genai_spans_without_calls']:,} in traces without a tool call);"
        f" tool calls: {by_source or 'none recognised'};"
        f" {cover['unverifiable_calls']:,} with arguments not recorded (unverifiable)"
    )
