"""The analyzer over ClickHouse: findings, views and summary computed inside
ClickHouse on the OpenTelemetry Collector's ``otel_traces`` table (the contrib
``clickhouseexporter``), with the rules of the DuckDB path.

One client code path for a server and for embedded chDB: ``clickhouse-connect``
(HTTP), which also drives chDB in-process for ``chdb:PATH`` sources. Only tool
spans are read out of the collector's table, into temporary tables of this
client's session; tool-call rows, aggregates and findings are what leave
ClickHouse. The collector's table is only ever read.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from string import Template
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from .._extras import install_hint
from .._sql import Statements, load_statements
from ._errors import DatabaseError, QueryError
from ._model import (
    DEFAULT_MIN_REPEATS,
    Finding,
    QueryResult,
    collector_paused,
    coverage,
    finding_from_row,
)

DEFAULT_TABLE = "otel_traces"
DEFAULT_VIEWS_DATABASE = "toolspan"
SCHEMES = ("clickhouse://", "clickhouses://", "chdb:")
# Settings every statement runs with: a LEFT JOIN without a match reads NULL (as
# in DuckDB); IN compares NULLs as equal (IS NOT DISTINCT FROM); a column's
# name means the column even where a SELECT alias has the same name (as in
# DuckDB: `min(tool) AS tool ... GROUP BY tool`); 64-bit integers in the
# findings' JSON detail stay numbers; JSON strings keep "/" as orjson writes
# it (canonical JSON).
_SETTINGS: dict[str, Any] = {
    "join_use_nulls": 1,
    "transform_null_in": 1,
    "prefer_column_name_to_alias": 1,
    "output_format_json_quote_64bit_integers": 0,
    "output_format_json_escape_forward_slashes": 0,
}
# Columns of the exporter's otel_traces that the analysis reads, and the type
# family each must have.
_REQUIRED_COLUMNS = {
    "Timestamp": "DateTime64",
    "TraceId": "String",
    "SpanId": "String",
    "ParentSpanId": "String",
    "SpanName": "String",
    "ScopeName": "String",
    "SpanAttributes": "Map|JSON",
    "Duration": "Int",
    "StatusCode": "String",
}
# The temporary tables of one analysis, in the order they are built, and the
# derive.sql statement that fills each.
_STAGES = (
    ("_toolspan_tool_spans", "tool_spans"),
    ("_toolspan_trace_conversations", "trace_conversations"),
    ("tool_calls", "tool_calls"),
    ("_toolspan_attempt_rows", "attempt_rows"),
)
# The stages only the later stages read, dropped once those are built: on 10M
# spans the tool spans were 2.6 of the session's 4.5 GB, held while the
# findings were computed and fetched (peak RSS 6.7 GB).
_BUILD_ONLY = ("_toolspan_tool_spans", "_toolspan_trace_conversations")
# `clickhouse init`'s narrow copies of the collector's table (clickhouse_views.sql),
# the statement that fills each, and the stage an analysis reads from it instead.
_COPIES = {
    "_toolspan_tool_span_rows": ("clickhouse_derive", "tool_spans"),
    "_toolspan_conversation_rows": ("clickhouse_views", "conversation_ids"),
}
_COPIED_STAGES = {"tool_spans": "start_time", "trace_conversations": "Timestamp"}


def statements(file_stem: str) -> Statements:
    """The named statements of ``sql/<file_stem>.sql``."""
    return load_statements(__package__, f"sql/{file_stem}.sql")


def statement(file_stem: str, name: str) -> str:
    return statements(file_stem)[name]


_CANONICAL_CALL = re.compile(r"toolspan_canonical_json\((\w+)\)")
# toolspan_attr(Column, 'key') / toolspan_has(Column, 'key') in the SQL files:
# an attribute as Nullable(String) and its presence, expanded per layout.
_ATTRIBUTE_CALL = re.compile(r"toolspan_(attr|has)\((\w+), '([^'\\]*)'\)")
# The exporter's two table layouts, told apart by the type of SpanAttributes:
# "map" (traces_table.sql, Map(LowCardinality(String), String), every value
# already text) and "json" (traces_json_table.sql, a JSON column of typed values).
LAYOUTS = ("map", "json")
# Per event of a span, its exception.type when it is an exception event
# ('exception' when it names none), '' otherwise: the Events column's
# attributes are a Map of text, or JSON (a dotted key is a path there).
_EXCEPTION_TYPES = {
    "map": "arrayMap((n, a) -> if(n = 'exception', if(a['exception.type'] <> '', "
    "a['exception.type'], 'exception'), ''), Events.Name, Events.Attributes)",
    "json": "arrayMap((n, a) -> if(n = 'exception', coalesce(nullIf(CAST(a.exception.type, "
    "'Nullable(String)'), ''), 'exception'), ''), Events.Name, Events.Attributes)",
}
# An execute_tool span's first event of a name, one attribute of it as text
# (NULL when absent): Strands Agents' arguments and result (read_batch.sql).
_EVENT_ATTRIBUTE = {
    "map": "nullIf(Events.Attributes[indexOf(Events.Name, '{event}')]['{key}'], '')",
    "json": "CAST(Events.Attributes[indexOf(Events.Name, '{event}')].{key}, 'Nullable(String)')",
}
# The model's requested tool calls in the flattened output messages of an LLM
# span (derive.sql, requested_positions): any key of one, and the name keys.
_FLAT_REQUEST_KEY = (
    "'^(llm[.]output_messages[.][0-9]+[.]message[.]tool_calls[.][0-9]+[.]tool_call[.]"
    "(function[.]name|function[.]arguments|id)"
    "|gen_ai[.]completion[.][0-9]+[.]tool_calls[.][0-9]+[.](name|arguments|id))$'"
)
_FLAT_REQUEST_NAME = (
    "'^(llm[.]output_messages[.][0-9]+[.]message[.]tool_calls[.][0-9]+[.]tool_call[.]function[.]name"
    "|gen_ai[.]completion[.][0-9]+[.]tool_calls[.][0-9]+[.]name)$'"
)
_ATTRIBUTE_KEYS = {"map": "SpanAttributes.keys", "json": "JSONAllPaths(SpanAttributes)"}


def _map_value(key: str) -> str:
    return f"arrayElementOrNull(SpanAttributes.values, indexOf(SpanAttributes.keys, {key}))"


def _json_calls(parent: tuple[str, ...], calls: tuple[str, ...], fields: tuple[str, ...]) -> str:
    """The (name, id, arguments) of every call below ``parent`` (the JSON layout
    nests a dotted key: its text is objects keyed "0", "1", ...)."""
    path = ", ".join(f"'{p}'" for p in parent)
    inner = ", ".join(f"'{p}'" for p in calls)
    values = ", ".join(
        f"JSONExtract(c.2, {', '.join(repr(f) for f in field.split('.'))}, 'Nullable(String)')"
        for field in fields
    )
    return (
        f"arrayFlatten(arrayMap(m -> arrayMap(c -> ({values}), "
        f"JSONExtractKeysAndValuesRaw(m.2, {inner})), "
        f"JSONExtractKeysAndValuesRaw(toJSONString(SpanAttributes), {path})))"
    )


# A name key's id and arguments keys (OpenInference's function.name, OpenLLMetry's name).
_ID_KEY = "replaceRegexpOne(k, '(function[.])?name$', 'id')"
_ARGUMENTS_KEY = "replaceRegexpOne(k, 'name$', 'arguments')"
# (name, id, arguments) of each requested call, per layout: the Map's keys are
# the flat attribute keys; the JSON layout's text nests them.
_FLAT_REQUESTS = {
    "map": (
        f"arrayMap(k -> ({_map_value('k')}, "
        f"{_map_value(_ID_KEY)}, {_map_value(_ARGUMENTS_KEY)}), "
        f"arrayFilter(k -> match(k, {_FLAT_REQUEST_NAME}), SpanAttributes.keys))"
    ),
    "json": (
        "arrayConcat("
        + _json_calls(
            ("llm", "output_messages"),
            ("message", "tool_calls"),
            ("tool_call.function.name", "tool_call.id", "tool_call.function.arguments"),
        )
        + ", "
        + _json_calls(("gen_ai", "completion"), ("tool_calls",), ("name", "id", "arguments"))
        + ")"
    ),
}
# How deep canonical JSON sorts keys; deeper values compare as written.
CANONICAL_DEPTH = 6


@dataclass(frozen=True)
class ClickHouseSource:
    """Where the collector's table lives: a server over HTTP(S), or a chDB directory."""

    kind: str  # "http" | "chdb"
    database: str
    host: str = ""
    port: int = 0
    secure: bool = False
    username: str = ""
    password: str = field(default="", repr=False)
    path: str = ""

    def display(self) -> str:
        """The source without credentials, for messages."""
        if self.kind == "chdb":
            return f"chdb:{self.path} (database {self.database})"
        scheme = "clickhouses" if self.secure else "clickhouse"
        return f"{scheme}://{self.host}:{self.port}/{self.database}"


def is_clickhouse_source(text: str) -> bool:
    """Whether ``text`` names a ClickHouse or chDB source rather than trace files."""
    return text.startswith(SCHEMES)


def parse_source(text: str, env: Mapping[str, str] | None = None) -> ClickHouseSource:
    """``clickhouse://user:password@host:8123/database``, ``clickhouses://...``
    (TLS) or ``chdb:PATH[?database=NAME]``. User and password missing from the
    URL come from ``CLICKHOUSE_USER`` / ``CLICKHOUSE_PASSWORD``; the database,
    from ``CLICKHOUSE_DATABASE``, else ``default``."""
    env = os.environ if env is None else env
    database_default = env.get("CLICKHOUSE_DATABASE") or "default"
    if text.startswith("chdb:"):
        rest = text.removeprefix("chdb:").removeprefix("//")
        path, _, query = rest.partition("?")
        if not path:
            raise DatabaseError("a chdb source needs a directory: chdb:PATH")
        database = (parse_qs(query).get("database") or [database_default])[0]
        return ClickHouseSource("chdb", database, path=str(Path(unquote(path)).resolve()))
    try:
        parts = urlsplit(text)
        parts.hostname  # noqa: B018 (parsed on access: a broken IPv6 literal raises here)
    except ValueError as exc:
        # The reason only: the text holds the password.
        raise DatabaseError(f"not a ClickHouse source URL ({exc})") from None
    if parts.scheme not in ("clickhouse", "clickhouses"):
        raise DatabaseError("a ClickHouse source is clickhouse://host:8123/database")
    if not parts.hostname:
        raise DatabaseError("a ClickHouse source needs a host: clickhouse://host:8123/database")
    secure = parts.scheme == "clickhouses"
    try:
        port = parts.port or (8443 if secure else 8123)
    except ValueError as exc:
        raise DatabaseError(f"bad port in the ClickHouse source: {exc}") from None
    return ClickHouseSource(
        "http",
        unquote(parts.path.strip("/")) or database_default,
        host=parts.hostname,
        port=port,
        secure=secure,
        username=unquote(parts.username or "") or env.get("CLICKHOUSE_USER", "default"),
        password=unquote(parts.password or "") or env.get("CLICKHOUSE_PASSWORD", ""),
    )


def parse_time(text: str, *, now: datetime | None = None) -> datetime:
    """An ISO 8601 time or date (UTC unless it says otherwise), or a time ago:
    ``30m``, ``24h``, ``7d``. Returns an aware UTC datetime."""
    match = re.fullmatch(r"(\d+)\s*([smhd])", text.strip())
    if match:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[match[2]]
        try:
            return (now or datetime.now(UTC)) - timedelta(**{unit: int(match[1])})
        except OverflowError:
            raise DatabaseError(f"not a time: {text!r} reaches before the year 1") from None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise DatabaseError(
            f"not a time: {text!r} (use ISO 8601 such as 2026-01-31T12:00, or 30m, 24h, 7d)"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def glob_regex(pattern: str) -> str:
    """A write-tools glob (``*``, ``?``, ``[...]``, as DuckDB's GLOB) as an
    anchored RE2 regular expression."""
    out, i = ["^"], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            negate = body.startswith(("!", "^"))
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out) + "$"


def table_layout(attributes_type: str) -> str | None:
    """The exporter layout of a table whose ``SpanAttributes`` has this type
    (``system.columns.type``), or None if it is neither."""
    type_ = _strip_type(attributes_type)
    if type_.startswith("Map("):
        return "map"
    if type_.startswith("JSON"):
        return "json"
    return None


def attribute_sql(layout: str, column: str, key: str, *, presence: bool = False) -> str:
    """SQL for one attribute of ``column`` as text (Nullable(String), NULL when
    absent), or with ``presence`` whether it is there, in either layout.

    In the JSON layout a dotted key is one path (the exporter's keys are flat:
    ``toolspan.attempt`` and ``toolspan.attempt.outcome`` are two paths), and
    the value is typed: integers, booleans and doubles are cast to the text the
    Map layout holds (``42``, ``true``, ``0.5``), arrays to JSON text."""
    if layout == "map":
        # The map's keys and values subcolumns, one scan of the keys per
        # attribute: four times faster than mapContains() then m[key] (measured
        # on chDB 26.9), and index 0 (absent) reads NULL.
        if presence:
            return f"has({column}.keys, {_sql(key)})"
        return f"arrayElementOrNull({column}.values, indexOf({column}.keys, {_sql(key)}))"
    if layout != "json":
        raise ValueError(f"unknown layout {layout!r} (one of {', '.join(LAYOUTS)})")
    path = f"{column}.{_identifier(key)}"
    if presence:
        return f"({path} IS NOT NULL)"
    return (
        f"if(startsWith(dynamicType({path}), 'Array'), toJSONString({path}), "
        f"CAST({path}, 'Nullable(String)'))"
    )


def expand_attributes(sql: str, layout: str) -> str:
    """``toolspan_attr(Column, 'key')`` and ``toolspan_has(Column, 'key')`` in
    ``sql``, expanded for the layout (:func:`attribute_sql`)."""
    return _ATTRIBUTE_CALL.sub(
        lambda m: attribute_sql(layout, m[2], m[3], presence=m[1] == "has"), sql
    )


def canonical_json_sql(column: str, depth: int = CANONICAL_DEPTH) -> str:
    """SQL for the canonical JSON of a text column, as the DuckDB path's
    ``orjson.dumps(orjson.loads(text), option=OPT_SORT_KEYS)``: keys sorted,
    no whitespace, strings re-escaped, floats as Python writes them (``2.0``,
    ``1e-7``); text that is not JSON stays as it is. Objects and arrays deeper
    than ``depth`` keep their inner key order.

    Three steps, so that only a short one repeats per level (ClickHouse's
    planning time grows with the expression's length, and was seconds when
    every level re-escaped its strings and printed its floats):

    1. ClickHouse's JSON functions write an integral double as an integer (2.0
       as ``2``), which orjson does not: numbers with a fraction or an exponent
       are turned into marked strings (string values that could be read as
       marks are marked as strings);
    2. keys sorted, ``depth`` levels deep, every key and leaf written as
       ClickHouse writes it;
    3. once over the result's string tokens: marks undone (floats printed as
       Python does) and escapes written as orjson does."""
    text = f"ifNull({column}, '')"
    top = f"p{depth + 1}"
    ordered = _once(top, f"JSONExtractRaw({_marked_sql(text)})", _sorted_sql(top, depth))
    return (
        f"if({column} IS NULL, NULL, if(isValidJSON({text}), "
        f"{_once('c', ordered, _orjson_text_sql('c'))}, {text}))"
    )


# Regular expressions (RE2) and replacements as ClickHouse receives them.
# A JSON string token, or a run of anything else (numbers, punctuation, space).
_JSON_TOKEN = r'"(?:[^"\\]|\\.)*"|[^"]+'  # noqa: S105 (a regular expression)
# A number with a fraction or an exponent (a double to orjson), and its mark:
# a string "\u0001f<number>". A string value of the text's own that starts with
# U+0001 gets an "s" after it, so that it cannot be read as a mark, and loses it
# at the end. Keys never: they are sorted in between, and never marks.
_JSON_FLOAT = r"(-?[0-9]+(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+))"
_FLOAT_MARK = r'"\\u0001f\1"'
_MARKED = '"\\u0001'  # how ClickHouse writes the start of such a string
_AFTER_MARK = len(_MARKED) + 1  # where "f" or "s" is
# What follows a key: a colon, after JSON's spaces.
_BEFORE_COLON = r"^[ \t\n\r]*:"
_ZEROS_AFTER_POINT = r"^0\.0*"
_PLUS_EXPONENT = r"e+\1"
# One piece of a JSON string token: an escape (\uXXXX or \ and a character) or
# a run without backslashes. Taken in order, so that after an escaped backslash
# "u2028" is text, not an escape.
_STRING_PIECE = r"\\u[0-9A-Fa-f]{4}|\\.|[^\\]+"
# Where ClickHouse's JSON strings differ from orjson's: it escapes U+2028 and
# U+2029 (orjson writes them as they are), and writes \u001F where orjson
# writes \u001f.
_LINE_SEPARATORS = (("\\u2028", "\u2028"), ("\\u2029", "\u2029"))


def _sql(text: str) -> str:
    """A ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _once(name: str, value: str, body: str) -> str:
    """``body`` with ``name`` bound to ``value``: written once, evaluated once."""
    return f"arrayMap({name} -> {body}, [{value}])[1]"


def _by_token_sql(text: str, body: str) -> str:
    """``text``'s JSON tokens, each replaced by ``body`` (of ``tok``, and of
    ``next``, the token after it or '')."""
    tokens = f"extractAll({text}, {_sql(_JSON_TOKEN)})"
    each = (
        f"arrayStringConcat(arrayMap((tok, next) -> {body}, "
        f"toks, arrayResize(arrayPopFront(toks), length(toks), '')))"
    )
    return _once("toks", tokens, each)


def _marked_sql(text: str) -> str:
    """Step 1: the JSON ``text`` with its floats marked (and its string values
    that start with U+0001 told apart)."""
    return _by_token_sql(
        text,
        f"multiIf(NOT startsWith(tok, '\"'), "
        f"replaceRegexpAll(tok, {_sql(_JSON_FLOAT)}, {_sql(_FLOAT_MARK)}), "
        f"startsWith(tok, {_sql(_MARKED)}) AND NOT match(next, {_sql(_BEFORE_COLON)}), "
        f"concat({_sql(_MARKED + 's')}, substring(tok, {_AFTER_MARK})), tok)",
    )


def _sorted_sql(raw: str, depth: int) -> str:
    """Step 2: the JSON value ``raw`` (a name) compacted, keys sorted ``depth``
    levels deep; keys, strings and numbers as ClickHouse writes them."""
    if depth == 0:
        return raw
    item = f"p{depth}"
    kind = f"JSONType({raw})"
    children = (
        f"if({kind} = 'Object', "
        f"arrayMap(kv -> (concat(toJSONString(kv.1), ':'), kv.2), "
        f"arraySort(kv -> kv.1, JSONExtractKeysAndValuesRaw({raw}))), "
        f"arrayMap(e -> ('', e), JSONExtractArrayRaw({raw})))"
    )
    return (
        f"if({kind} IN ('Object', 'Array'), "
        f"concat(if({kind} = 'Object', '{{', '['), arrayStringConcat(arrayMap({item} -> "
        f"concat({item}.1, {_sorted_sql(f'{item}.2', depth - 1)}), {children}), ','), "
        f"if({kind} = 'Object', '}}', ']')), {raw})"
    )


def _orjson_text_sql(text: str) -> str:
    """Step 3: the compact JSON ``text`` (a name) with its marks undone and its
    strings as orjson writes them. A string followed by ':' is a key, never
    marked. Text without a backslash has neither marks nor escapes."""
    marked = f"NOT startsWith(next, ':') AND startsWith(tok, {_sql(_MARKED)})"
    number = f"substring(tok, {_AFTER_MARK + 1}, length(tok) - {_AFTER_MARK + 1})"
    string = f"if({marked}, concat({_sql(_MARKED)}, substring(tok, {_AFTER_MARK + 1})), tok)"
    each = (
        f"multiIf(NOT startsWith(tok, '\"') OR position(tok, '\\\\') = 0, tok, "
        f"{marked} AND substring(tok, {_AFTER_MARK}, 1) = 'f', "
        f"{_python_float_sql(f'toFloat64OrZero({number})')}, "
        f"{_orjson_escapes_sql(string)})"
    )
    return f"if(position({text}, '\\\\') = 0, {text}, {_by_token_sql(text, each)})"


def _orjson_escapes_sql(token: str) -> str:
    """A JSON string token as ClickHouse writes it, as orjson does: U+2028 and
    U+2029 unescaped, other \\u escapes in lowercase hex."""
    unescaped = ", ".join(
        f"piece = {_sql(escape)}, {_sql(sep)}" for escape, sep in _LINE_SEPARATORS
    )
    return (
        f"arrayStringConcat(arrayMap(piece -> multiIf({unescaped}, "
        f"startsWith(piece, '\\\\u'), lower(piece), piece), "
        f"extractAll({token}, {_sql(_STRING_PIECE)})))"
    )


def _python_float_sql(value: str) -> str:
    """orjson's text of a double: positional with a ``.0`` from 1e-5 up to 1e16,
    ``1e+16`` / ``1.5e-7`` style outside. ClickHouse prints the same shortest
    digits, positional up to 1e21. Each part is bound once (``_once``): ``f``
    the double, ``s`` ClickHouse's text of it, ``u`` that without its sign,
    ``d`` its significant digits where orjson writes an exponent."""
    big = "abs(f) >= 1e16"
    digits = f"if({big}, trimRight(u, '0'), replaceRegexpOne(u, {_sql(_ZEROS_AFTER_POINT)}, ''))"
    exponent = (
        f"if({big}, concat('e+', toString(length(u) - 1)), "
        f"concat('e-', toString(length(u) - length(d) - 1)))"
    )
    scientific = (
        f"concat(if(f < 0, '-', ''), substring(d, 1, 1), "
        f"if(length(d) > 1, concat('.', substring(d, 2)), ''), {exponent})"
    )
    formatted = (
        f"multiIf(position(s, 'e') > 0, replaceRegexpOne(s, 'e([0-9])', {_sql(_PLUS_EXPONENT)}), "
        f"{big} OR (abs(f) < 1e-5 AND f != 0), {scientific}, "
        f"position(s, '.') > 0, s, concat(s, '.0'))"
    )
    unsigned = _once("u", "replaceRegexpOne(s, '^-', '')", _once("d", digits, formatted))
    return _once("f", value, _once("s", "toString(f)", unsigned))


class ClickHouseAnalyzer:
    """The analyzer's summary, findings and SQL over a ClickHouse ``otel_traces``."""

    def __init__(
        self,
        source: str | ClickHouseSource,
        *,
        table: str = DEFAULT_TABLE,
        since: datetime | None = None,
        until: datetime | None = None,
        write_tools: Sequence[str] = (),
        read_copies: bool = True,
    ) -> None:
        """``read_copies``: read the tool spans from the copies ``toolspan
        clickhouse init`` keeps of this table, when there are current ones
        (:attr:`copies` then names their database), instead of extracting
        them from the raw spans again; the results are the same."""
        self.source = parse_source(source) if isinstance(source, str) else source
        self._table_database, _, self._table = table.rpartition(".")
        self._table_database = self._table_database or self.source.database
        self._since, self._until = since, until
        self._write_regexes: list[str] = []
        self._materialized = False
        self._made: set[str] = set()  # the temporary tables made in this session
        self.layout = "map"  # of the collector's table; set by _check_table
        self.copies: str | None = None
        self._client = _connect(self.source)
        try:
            self._check_table()
            if read_copies:
                self.copies = self._find_copies()
            self.set_write_tools(write_tools)
        except BaseException:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------

    @property
    def table(self) -> str:
        """The collector's table, ``database.table``."""
        return f"{self._table_database}.{self._table}"

    def close(self) -> None:
        """Close the connection (temporary tables go with the session)."""
        self._client.close()

    def __enter__(self) -> ClickHouseAnalyzer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- analysis --------------------------------------------------------------

    def set_write_tools(self, patterns: Sequence[str]) -> None:
        """Name the tools that write (names or glob patterns), as ``Analyzer.set_write_tools``."""
        if isinstance(patterns, str):
            raise TypeError("set_write_tools takes a sequence of patterns, not a string")
        wanted = sorted(dict.fromkeys(p.strip() for p in patterns if p.strip()))
        regexes = [glob_regex(p) for p in wanted]
        if regexes != self._write_regexes or not self._materialized:
            self._write_regexes = regexes
            self._materialized = False

    def findings(self, *, min_repeats: int = DEFAULT_MIN_REPEATS) -> list[Finding]:
        """Loops, duplicate writes, idempotency conflicts and unsafe retries."""
        if min_repeats < 2:
            raise ValueError("min_repeats must be at least 2")
        self._materialize()
        sql = self._render(
            statement("clickhouse_findings", "findings"), min_repeats="{min_repeats:UInt32}"
        )
        # Fetched and built with the collector paused (see collector_paused):
        # 396,410 findings took 3.4-3.9 s with it running, 1.7-2.8 s paused.
        with collector_paused():
            rows = self._rows(sql, {"min_repeats": min_repeats})
            return [finding_from_row(row) for row in rows]

    def summary(self) -> dict[str, Any]:
        """The summary figures of ``Analyzer.summary``; ``spans`` counts the rows in range."""
        self._materialize()
        queries = statements("clickhouse_summary")
        totals = self._named_row(self._render(queries["totals"]))
        spans = self._named_row(self._render(queries["spans"]))
        by_tool: dict[str, dict[str, int]] = {}
        for tool, status, calls in self._rows(self._render(queries["statuses_by_tool"])):
            by_tool.setdefault(tool, {})[status] = int(calls)
        by_source = self._rows(self._render(queries["calls_by_source"]))
        return {
            "table": self.table,
            **{k: int(v) for k, v in spans.items()},
            **{k: int(v) for k, v in totals.items() if k != "scheduled_wait_s"},
            "scheduled_wait_s": float(totals["scheduled_wait_s"]),
            "statuses_by_tool": by_tool,
            # `spans` counts the rows in range, as the summary's; every other
            # figure counts each span once.
            "coverage": coverage(
                spans=spans["spans"],
                calls_by_source={source: int(calls) for source, calls in by_source},
                genai=self._named_row(self._render(queries["genai_spans"])),
                unverifiable=totals["unverifiable"],
            ),
        }

    def tool_calls(self) -> QueryResult:
        """The tool calls in range (the rows of the ``tool_calls`` view)."""
        self._materialize()
        return self._query("SELECT * FROM tool_calls ORDER BY start_time, span_id")

    # -- views -----------------------------------------------------------------

    def create_views(self, database: str = DEFAULT_VIEWS_DATABASE) -> list[str]:
        """Create the views ``tool_calls``, ``attempts``, ``conversations``,
        ``findings`` in ``database``, over the collector's whole table and the
        current write tools (``clickhouse_views.sql``): two materialized views
        copy each new block's tool spans and conversation ids into narrow
        tables there, filled now from the spans already stored. Running it
        again replaces the views (new write tools) and keeps the copied rows.
        Returns the names of the views."""
        if database == self._table_database:
            raise DatabaseError(
                f"the views need a database of their own, not the collector's ({database})"
            )
        db = _identifier(database)
        self._command(f"CREATE DATABASE IF NOT EXISTS {db}")
        sql = statements("clickhouse_views")
        copies = self._copy_statements()
        versions = {name: _version(body) for name, body in copies.items()}
        parts = {
            "db": db,
            "tool_spans": copies["_toolspan_tool_span_rows"],
            "conversations": copies["_toolspan_conversation_rows"],
            "tool_spans_version": versions["_toolspan_tool_span_rows"],
            "conversations_version": versions["_toolspan_conversation_rows"],
            "source": f"{_identifier(self._table_database)}.{_identifier(self._table)}",
            "settings": ", ".join(f"{k} = {v}" for k, v in _SETTINGS.items()),
        }
        made = self._copy_versions(database)
        fresh = made != versions
        if fresh and made:
            # Copies made by other statements (another table layout, another
            # version of toolspan): made again from the collector's table.
            for name in ("tool_spans_mv", "conversations_mv"):
                self._command(f"DROP VIEW IF EXISTS {db}.{_identifier('_toolspan_' + name)}")
            for name in made:
                self._command(f"DROP TABLE IF EXISTS {db}.{_identifier(name)}")
        for name in ("tool_span_rows", "conversation_rows"):
            self._command(Template(sql[name]).substitute(parts))
        for name in ("tool_spans_mv", "conversations_mv"):
            self._command(f"DROP VIEW IF EXISTS {db}.{_identifier('_toolspan_' + name)}")
            self._command(Template(sql[name]).substitute(parts))
        if fresh:
            # After the materialized views exist: a block inserted meanwhile is
            # copied twice at worst, and read once (FINAL).
            for name in ("backfill_tool_spans", "backfill_conversations"):
                self._command(Template(sql[name]).substitute(parts))
        write_tools = "[" + ", ".join(_sql(r) for r in self._write_regexes) + "]"
        # Each body is substituted once, its own placeholders and the database's
        # together: a name holding "$" must not be read as a placeholder later.
        bodies = {
            "_toolspan_tool_spans": sql["tool_spans_view"],
            "_toolspan_trace_conversations": sql["trace_conversations_view"],
            "tool_calls": statement("clickhouse_derive", "tool_calls"),
            "_toolspan_attempt_rows": statement("clickhouse_derive", "attempt_rows"),
            "attempts": statement("clickhouse_derive", "attempts"),
            "conversations": statement("clickhouse_derive", "conversations"),
            "findings": statement("clickhouse_findings", "findings"),
        }
        for name, body in bodies.items():
            rendered = _qualify(
                self._render(
                    body,
                    range_sql="1",
                    write_tools=write_tools,
                    min_repeats=str(DEFAULT_MIN_REPEATS),
                    db=db,
                ),
                db,
            )
            self._command(
                f"CREATE OR REPLACE VIEW {db}.{_identifier(name)} AS {rendered}\n"
                f"SETTINGS {parts['settings']}"
            )
        return list(bodies)

    # -- SQL -------------------------------------------------------------------

    def _render(
        self,
        sql: str,
        *,
        range_sql: str | None = None,
        write_tools: str = "{write_tools:Array(String)}",
        min_repeats: str = "{min_repeats:UInt32}",
        db: str = "",
    ) -> str:
        source = f"{_identifier(self._table_database)}.{_identifier(self._table)}"
        sql = _CANONICAL_CALL.sub(lambda m: canonical_json_sql(m[1]), sql)
        sql = expand_attributes(sql, self.layout)
        return Template(sql).substitute(
            source=source,
            exception_types=_EXCEPTION_TYPES[self.layout],
            event_arguments=_EVENT_ATTRIBUTE[self.layout].format(
                event="gen_ai.tool.message", key="content"
            ),
            event_result=_EVENT_ATTRIBUTE[self.layout].format(event="gen_ai.choice", key="message"),
            flat_request_key=_FLAT_REQUEST_KEY,
            flat_requests=_FLAT_REQUESTS[self.layout],
            attribute_keys=_ATTRIBUTE_KEYS[self.layout],
            range=self._range_sql() if range_sql is None else range_sql,
            write_tools=write_tools,
            min_repeats=min_repeats,
            db=db,
        )

    def _range_sql(self, column: str = "Timestamp") -> str:
        conditions = []
        if self._since:
            conditions.append(column + " >= {since:DateTime64(9, 'UTC')}")
        if self._until:
            conditions.append(column + " < {until:DateTime64(9, 'UTC')}")
        return " AND ".join(conditions) or "1"

    def _stage_sql(self, stem: str) -> str:
        """The statement of one stage: from init's copies where they serve."""
        if self.copies is None or stem not in _COPIED_STAGES:
            return self._render(statement("clickhouse_derive", stem))
        return self._render(
            statement("clickhouse_views", "copied_" + stem),
            range_sql=self._range_sql(_COPIED_STAGES[stem]),
            db=_identifier(self.copies),
        )

    def _copy_statements(self) -> dict[str, str]:
        """The statement that fills each of init's copies, for this table."""
        return {
            name: self._render(statement(stem, name_), range_sql="1")
            for name, (stem, name_) in _COPIES.items()
        }

    def _copy_versions(self, database: str) -> dict[str, str]:
        """The versions (table comments) of the copies in ``database``, by name."""
        rows = self._rows(
            "SELECT name, comment FROM system.tables"
            " WHERE database = {db:String} AND name IN {names:Array(String)}",
            {"db": database, "names": list(_COPIES)},
        )
        return {name: comment for name, comment in rows}

    def _find_copies(self) -> str | None:
        """The database of init's copies of this table, if its materialized
        views feed them and they were made by this analysis' statements (the
        same table, layout and version of toolspan); else None."""
        rows = self._rows(
            "SELECT dependencies_database, dependencies_table FROM system.tables"
            " WHERE database = {db:String} AND name = {t:String}",
            {"db": self._table_database, "t": self._table},
        )
        if not rows:
            return None
        fed: dict[str, set[str]] = {}
        for database, view in zip(*rows[0], strict=True):
            fed.setdefault(database, set()).add(view)
        mvs = {"_toolspan_tool_spans_mv", "_toolspan_conversations_mv"}
        candidates = sorted(db for db, views in fed.items() if mvs <= views)
        if not candidates:
            return None  # the usual case: rendered statements are not needed
        wanted = {name: _version(body) for name, body in self._copy_statements().items()}
        return next((db for db in candidates if self._copy_versions(db) == wanted), None)

    def _parameters(self) -> dict[str, Any]:
        params: dict[str, Any] = {"write_tools": self._write_regexes}
        for name, moment in (("since", self._since), ("until", self._until)):
            if moment:
                params[name] = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        return params

    def _materialize(self) -> None:
        """The tool spans, conversations, calls and attempts in range, into
        temporary tables of this session: every later query reads those."""
        if self._materialized:
            return
        for name, stem in _STAGES:
            if name in self._made:  # a DROP costs 5 ms even where there is no table
                self._command(f"DROP TEMPORARY TABLE {name}")
                self._made.discard(name)
            body = self._stage_sql(stem)
            self._command(
                f"CREATE TEMPORARY TABLE {name} ENGINE = Memory AS {body}", self._parameters()
            )
            self._made.add(name)
        for name in _BUILD_ONLY:
            self._command(f"DROP TEMPORARY TABLE {name}")
            self._made.discard(name)
        self._materialized = True

    def _check_table(self) -> None:
        rows = self._rows(
            "SELECT name, type FROM system.columns"
            " WHERE database = {db:String} AND table = {t:String}",
            {"db": self._table_database, "t": self._table},
        )
        if not rows:
            raise DatabaseError(
                f"no table {self.table} in {self.source.display()}: name the collector's traces "
                "table with --table (clickhouseexporter's traces_table_name, default otel_traces)"
            )
        types = {name: type_ for name, type_ in rows}
        wrong = [
            f"{name} ({types.get(name, 'missing')})"
            for name, families in _REQUIRED_COLUMNS.items()
            if not any(f in _strip_type(types.get(name, "")) for f in families.split("|"))
        ]
        layout = table_layout(types.get("SpanAttributes", ""))
        if layout is None and "SpanAttributes" in types:
            wrong.append(f"SpanAttributes ({types['SpanAttributes']})")
        if wrong:
            expected = ", ".join(
                f"{k} {v.replace('|', ' or ')}" for k, v in _REQUIRED_COLUMNS.items()
            )
            raise DatabaseError(
                f"{self.table} does not have the clickhouseexporter's otel_traces schema: "
                f"{', '.join(dict.fromkeys(wrong))} (expected {expected})"
            )
        self.layout = layout or "map"

    def query(self, sql: str) -> QueryResult:
        """Run one SQL query over the analysis' tables (``tool_calls`` and the
        internal ``_toolspan_attempt_rows``; the views of ``create_views`` live
        in their database)."""
        self._materialize()
        return self._query(sql, user=True)

    def _query(
        self, sql: str, params: Mapping[str, Any] | None = None, *, user: bool = False
    ) -> QueryResult:
        try:
            result = self._client.query(sql, parameters=dict(params or {}), settings=_SETTINGS)
        except Exception as exc:
            error = QueryError if user else DatabaseError
            raise error(_message(exc, self.source)) from None
        return QueryResult(tuple(result.column_names), [tuple(row) for row in result.result_rows])

    def _rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        return self._query(sql, {**self._parameters(), **(params or {})}).rows

    def _named_row(self, sql: str) -> dict[str, Any]:
        result = self._query(sql, self._parameters())
        row = result.rows[0] if result.rows else ()
        return dict(zip(result.columns, row, strict=True))

    def _command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        try:
            self._client.command(sql, parameters=dict(params or {}) or None, settings=_SETTINGS)
        except Exception as exc:
            raise DatabaseError(_message(exc, self.source)) from None


def run_sql(
    source: str | ClickHouseSource,
    sql: str,
    *,
    database: str = DEFAULT_VIEWS_DATABASE,
    limits: SqlLimits | None = None,
) -> QueryResult:
    """Run one read-only, bounded query over the views of ``database``
    (``toolspan clickhouse init``): the server's own guards, per query (see
    :class:`SqlLimits`)."""
    parsed = parse_source(source) if isinstance(source, str) else source
    client = _connect(parsed, database=database)
    try:
        result = client.query(sql, settings=(limits or SqlLimits()).settings())
    except Exception as exc:
        message = _message(exc, parsed)
        if "UNKNOWN_TABLE" in message or "Unknown table" in message:
            message += (
                f" (create the views with: toolspan clickhouse init SOURCE --database {database})"
            )
        elif "READONLY" in message:
            message += " (toolspan sql --source only reads: SELECT over the views)"
        raise QueryError(message) from None
    finally:
        client.close()
    return QueryResult(tuple(result.column_names), [tuple(row) for row in result.result_rows])


@dataclass(frozen=True)
class SqlLimits:
    """The bounds of one ``toolspan sql --source`` query, as ClickHouse settings.

    ``readonly = 1``: reads only, and the query cannot change a setting (its
    own ``SETTINGS`` clause included), so it cannot lift these limits; ClickHouse
    also refuses table functions then (``file``, ``url``, ``s3``, ``remote``,
    ``mysql``, ``executable``, ...: no file, URL or other server is reached).
    ``timeout_s`` is ``max_execution_time``; ``max_memory_bytes`` is
    ``max_memory_usage``; ``max_rows``/``max_bytes`` bound the result
    (``result_overflow_mode = 'throw'``: a clear error, never a silent cut).
    """

    timeout_s: int = 60
    max_memory_bytes: int = 2_000_000_000
    max_rows: int = 1_000_000
    max_bytes: int = 200_000_000

    def settings(self) -> dict[str, Any]:
        # readonly last: the ones before it are set while settings may still change.
        return {
            **_SETTINGS,
            "max_execution_time": self.timeout_s,
            "max_memory_usage": self.max_memory_bytes,
            "max_result_rows": self.max_rows,
            "max_result_bytes": self.max_bytes,
            "result_overflow_mode": "throw",
            "readonly": 1,
        }


def _connect(source: ClickHouseSource, *, database: str | None = None) -> Any:
    if source.kind == "chdb" and not Path(source.path).is_dir():
        # chDB would make an empty database there: a mistyped path would
        # then analyze nothing and pass.
        raise DatabaseError(f"no chDB data directory at {source.path} (chdb:PATH reads one)")
    try:
        import clickhouse_connect
    except ImportError:
        raise DatabaseError(
            "ClickHouse sources need clickhouse-connect (and chdb for chdb: sources): "
            + install_hint("clickhouse")
        ) from None
    try:
        if source.kind == "chdb":
            return clickhouse_connect.get_client(
                dsn=f"chdb://{source.path}", database=database or source.database
            )
        return clickhouse_connect.get_client(
            host=source.host,
            port=source.port,
            secure=source.secure,
            username=source.username,
            password=source.password,
            database=database or source.database,
            connect_timeout=10,
        )
    except Exception as exc:
        raise DatabaseError(
            f"cannot connect to {source.display()}: {_message(exc, source)}"
        ) from None


def _message(exc: BaseException, source: ClickHouseSource) -> str:
    """The error's text, first lines only, with the credentials never in it.

    A server may echo the password or the ``Authorization`` header it got:
    both are masked before the text is folded and cut, which would split them.
    """
    text = str(exc)
    for secret in _credentials(source):
        text = text.replace(secret, "***")
    text = " ".join(text.split())
    if len(text) > 600:
        text = text[:600] + " ..."
    return f"{type(exc).__name__}: {text}"


def _credentials(source: ClickHouseSource) -> list[str]:
    """The password as a driver or server may write it: as is, URL-quoted, in Basic auth."""
    if not source.password:
        return []
    basic = base64.b64encode(f"{source.username}:{source.password}".encode()).decode()
    forms = {basic, source.password, quote(source.password, safe=""), quote(source.password)}
    return sorted(forms, key=len, reverse=True)  # the longest first: none hides in another


def _version(sql: str) -> str:
    """The comment that names the statement filling a copy."""
    return "toolspan " + hashlib.sha256(sql.encode()).hexdigest()[:16]


def _identifier(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def _strip_type(type_: str) -> str:
    # LowCardinality(String) and Nullable(...) are Strings too; UInt64 is an Int.
    return type_.replace("LowCardinality(", "").replace("Nullable(", "").replace("UInt", "Int")


def _qualify(sql: str, database: str) -> str:
    """Name the views' own tables with their database (views resolve names at use)."""
    names = "|".join(name for name, _ in _STAGES)
    # Comments, quoted names and string literals first, left as they are (a
    # database may be called "x tool_calls"; a comment may hold an apostrophe).
    skipped = r"--[^\n]*|/\*.*?\*/|`(?:[^`\\]|\\.)*`|'(?:[^'\\]|\\.)*'"
    pattern = rf"{skipped}|(?<![\w.$])({names})\b"
    return re.sub(pattern, lambda m: f"{database}.{m[1]}" if m[1] else m[0], sql, flags=re.S)


__all__ = [
    "DEFAULT_TABLE",
    "DEFAULT_VIEWS_DATABASE",
    "LAYOUTS",
    "ClickHouseAnalyzer",
    "ClickHouseSource",
    "SqlLimits",
    "attribute_sql",
    "canonical_json_sql",
    "expand_attributes",
    "glob_regex",
    "is_clickhouse_source",
    "parse_source",
    "parse_time",
    "run_sql",
    "table_layout",
]
