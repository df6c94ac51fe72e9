"""The proxy's declarations: a small TOML file, read with the standard library.

::

    timeout_s = 30              # per upstream call
    startup_timeout_s = 30      # more for the first answer of a (re)started server
    input_timeout_s = 600       # for a client's answer to input the server asked for mid-call
    trust_annotations = false   # the server's readOnlyHint/idempotentHint count only when true
    conversation_header = "x-conversation-id"   # optional, streamable HTTP clients
    error_code_field = "error_code"    # an isError result's structuredContent names its code
    retry_after_field = "retry_after"  # ... and the delay the server asks for (seconds or a date)
    loop_threshold = 3                 # the same answer to the same call N times: refused (0: off)
    max_attempts_per_action = 5        # attempts of one action per request (0: off)
    guard_reads = false                # the two guards above count reads too (default: writes only)
    sse_replay_events = 256            # HTTP: events kept per session for a resume ...
    sse_replay_bytes = 1048576         # ... and their bytes at most (the newest always kept)
    sse_retry_ms = 1000                # HTTP: the reconnection delay the streams ask for (optional)

    [tools.get_order]
    side_effect = "read"

    [tools.refund_order]
    side_effect = "write"
    idempotent = true
    key_arguments = ["order_id", "amount_cents"]   # default: every argument
    resource_key = "order_id"

    [tools.ship_order]
    side_effect = "write"
    task = true                # run as a task: a lost answer is read back, not repeated

    [tools.send_email]
    side_effect = "write"
    check_with = "get_outbox"  # a read that says whether an unknown send happened
    commit_window_s = 30       # how long the server may still act after a timeout (default 30)

Every mistake is a :class:`~toolspan.tracer.ConfigurationError` whose message
is one line naming the file and the key.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from ..._canonical import canonical_json
from ..._errors import ConfigurationError
from ..._tool import DEFAULT_COMMIT_WINDOW_S
from .._common import Declaration, Declarations
from ._replay import DEFAULT_REPLAY_BYTES, DEFAULT_REPLAY_EVENTS

__all__ = ["ProxyConfig", "ToolConfig", "load_config", "parse_config"]

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_STARTUP_TIMEOUT_S = 30.0
# A person may be answering (an elicitation): minutes, not the seconds of a call.
DEFAULT_INPUT_TIMEOUT_S = 600.0
_TOP_KEYS = frozenset(
    {
        "timeout_s",
        "trust_annotations",
        "conversation_header",
        "error_code_field",
        "retry_after_field",
        "loop_threshold",
        "max_attempts_per_action",
        "guard_reads",
        "service",
        "startup_timeout_s",
        "input_timeout_s",
        "sse_replay_events",
        "sse_replay_bytes",
        "sse_retry_ms",
        "tools",
        "retry_budget",
        "circuit_breaker",
    }
)
_TOOL_KEYS = frozenset(
    {
        "side_effect",
        "idempotent",
        "key_arguments",
        "check_with",
        "resource_key",
        "retryable_codes",
        "task",
        "commit_window_s",
    }
)
_SIDE_EFFECTS = {"read": "none", "write": "write"}
# The per-upstream retry budget's and circuit breaker's settings, and their types.
_BUDGET_KEYS: Mapping[str, type] = {"ratio": float, "min_retries_per_s": float, "window_s": float}
_BREAKER_KEYS: Mapping[str, type] = {
    "failure_ratio": float,
    "min_calls": int,
    "window_s": float,
    "open_s": float,
    "half_open_calls": int,
}


@dataclass(frozen=True, slots=True)
class ToolConfig:
    """One ``[tools.NAME]`` table: what the operator states about one upstream tool.

    ``key_arguments`` names the arguments an idempotent write's key is derived
    from, with the conversation (``None``: all of them); ``check_with`` is the
    read tool that says whether an unknown write happened; ``resource_key``
    the argument naming the resource it touches; ``task`` runs each call as
    a task of the upstream's tasks extension (read back through ``tasks/get``).
    """

    side_effect: str = "write"
    idempotent: bool = False
    key_arguments: tuple[str, ...] | None = None
    check_with: str | None = None
    resource_key: str | None = None
    retryable_codes: frozenset[str] | None = None
    task: bool = False
    commit_window_s: float = DEFAULT_COMMIT_WINDOW_S

    def declaration(self, name: str) -> Declaration:
        """The tool as the adapters' :class:`Declaration` (its key's step included)."""
        if self.side_effect == "read":
            return Declaration.read(retryable_codes=self.retryable_codes)
        return Declaration.write(
            idempotent=self.idempotent,
            resource_key=None if self.resource_key is None else _argument(self.resource_key),
            step=_step(name, self.key_arguments) if self.idempotent else None,
            retryable_codes=self.retryable_codes,
            commit_window_s=self.commit_window_s,
        )


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """The whole file; ``ProxyConfig()`` is the empty file (every tool an unrepeated write)."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    input_timeout_s: float = DEFAULT_INPUT_TIMEOUT_S
    trust_annotations: bool = False
    conversation_header: str | None = None
    error_code_field: str | None = None
    retry_after_field: str | None = None
    service: str | None = None
    loop_threshold: int | None = 3
    max_attempts_per_action: int | None = 5
    # A long-lived client polls reads: by default only writes meet the two guards above.
    guard_reads: bool = False
    # HTTP serving: what a session keeps of its SSE streams for a client's resume
    # (``Last-Event-ID``), and the reconnection delay its streams ask for (``retry``).
    sse_replay_events: int = DEFAULT_REPLAY_EVENTS
    sse_replay_bytes: int = DEFAULT_REPLAY_BYTES
    sse_retry_ms: int | None = None
    tools: Mapping[str, ToolConfig] = field(default_factory=dict)
    retry_budget: Mapping[str, Any] = field(default_factory=dict)
    circuit_breaker: Mapping[str, Any] = field(default_factory=dict)

    def declarations(self) -> Declarations:
        """Every declared tool as a :class:`Declarations` (undeclared: unrepeated writes)."""
        return Declarations({name: t.declaration(name) for name, t in self.tools.items()})

    def check_with(self, name: str) -> str | None:
        declared = self.tools.get(name)
        return None if declared is None else declared.check_with

    def runs_as_task(self, name: str) -> bool:
        declared = self.tools.get(name)
        return declared is not None and declared.task


def load_config(path: str | Path | None) -> ProxyConfig:
    """Read and check the proxy's TOML file (``None``: the defaults)."""
    if path is None:
        return ProxyConfig()
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read it ({exc.strerror})") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return parse_config(raw)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{path}: {exc}") from exc


def parse_config(raw: Mapping[str, Any]) -> ProxyConfig:
    """Check a parsed TOML document; errors name the key (one line each)."""
    _no_unknown(raw, _TOP_KEYS, "")
    timeout_s = _number(raw, "timeout_s", DEFAULT_TIMEOUT_S, "")
    tables = raw.get("tools", {})
    if not isinstance(tables, dict):
        raise ConfigurationError("tools must be a table of [tools.NAME] tables")
    tools = {name: _tool(name, table) for name, table in tables.items()}
    for name, declared in tools.items():
        check = declared.check_with
        if check is not None and (check not in tools or tools[check].side_effect != "read"):
            raise ConfigurationError(
                f"tools.{name}.check_with: {check!r} must be declared as a read "
                f'([tools.{check}] side_effect = "read")'
            )
    return ProxyConfig(
        timeout_s=timeout_s,
        startup_timeout_s=_number(raw, "startup_timeout_s", DEFAULT_STARTUP_TIMEOUT_S, ""),
        input_timeout_s=_number(raw, "input_timeout_s", DEFAULT_INPUT_TIMEOUT_S, ""),
        trust_annotations=_bool(raw, "trust_annotations", False, ""),
        conversation_header=_text(raw, "conversation_header", ""),
        error_code_field=_text(raw, "error_code_field", ""),
        retry_after_field=_text(raw, "retry_after_field", ""),
        service=_text(raw, "service", ""),
        loop_threshold=_guard(raw, "loop_threshold", 3),
        max_attempts_per_action=_guard(raw, "max_attempts_per_action", 5),
        guard_reads=_bool(raw, "guard_reads", False, ""),
        sse_replay_events=_count(raw, "sse_replay_events", DEFAULT_REPLAY_EVENTS),
        sse_replay_bytes=_count(raw, "sse_replay_bytes", DEFAULT_REPLAY_BYTES),
        sse_retry_ms=_count(raw, "sse_retry_ms"),
        tools=tools,
        retry_budget=_numbers(raw, "retry_budget", _BUDGET_KEYS),
        circuit_breaker=_numbers(raw, "circuit_breaker", _BREAKER_KEYS),
    )


def _tool(name: str, table: Any) -> ToolConfig:
    where = f"tools.{name}."
    if not isinstance(table, dict):
        raise ConfigurationError(f"tools.{name} must be a table")
    _no_unknown(table, _TOOL_KEYS, where)
    side_effect = table.get("side_effect")
    if side_effect not in _SIDE_EFFECTS:
        raise ConfigurationError(
            f'{where}side_effect must be "read" or "write", not {side_effect!r}'
        )
    idempotent = _bool(table, "idempotent", False, where)
    key_arguments = _names(table, "key_arguments", where)
    check_with = _text(table, "check_with", where)
    if side_effect == "read":
        for key in ("idempotent", "key_arguments", "check_with", "resource_key", "commit_window_s"):
            if table.get(key) not in (None, False):
                raise ConfigurationError(f"{where}{key} is for writes (side_effect is read)")
    if key_arguments is not None and not idempotent:
        raise ConfigurationError(f"{where}key_arguments derive a key: only with idempotent = true")
    codes = _names(table, "retryable_codes", where)
    return ToolConfig(
        side_effect=side_effect,
        idempotent=idempotent,
        key_arguments=key_arguments,
        check_with=check_with,
        resource_key=_text(table, "resource_key", where),
        retryable_codes=None if codes is None else frozenset(codes),
        task=_bool(table, "task", False, where),
        # How long the upstream may still act on a call after the proxy gave up on
        # it: 0 for a server that never does (docs/durability.md, the commit window).
        commit_window_s=_number(
            table, "commit_window_s", DEFAULT_COMMIT_WINDOW_S, where, allow_zero=True
        ),
    )


def _no_unknown(table: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigurationError(
            f"unknown key {where}{unknown[0]} (known: {', '.join(sorted(known))})"
        )


def _number(
    table: Mapping[str, Any], key: str, default: float, where: str, *, allow_zero: bool = False
) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{where}{key} must be a number, not {value!r}")
    if not (math.isfinite(value) and (value > 0 or (allow_zero and value == 0))):
        kind = "a number of at least 0" if allow_zero else "a positive number"
        raise ConfigurationError(f"{where}{key} must be {kind}, not {value!r}")
    return float(value)


def _numbers(raw: Mapping[str, Any], key: str, known: Mapping[str, type]) -> dict[str, Any]:
    """Settings of the retry budget or the circuit breaker (they check the values)."""
    table = raw.get(key, {})
    if not isinstance(table, dict):
        raise ConfigurationError(f"{key} must be a table")
    _no_unknown(table, frozenset(known), f"{key}.")
    return {name: known[name](_number(table, name, 0.0, f"{key}.")) for name in table}


def _guard(raw: Mapping[str, Any], key: str, default: int) -> int | None:
    """A guard's count; 0 turns the guard off."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{key} must be a whole number (0: off), not {value!r}")
    return value or None


@overload
def _count(raw: Mapping[str, Any], key: str, default: int) -> int: ...
@overload
def _count(raw: Mapping[str, Any], key: str, default: None = None) -> int | None: ...
def _count(raw: Mapping[str, Any], key: str, default: int | None = None) -> int | None:
    """A whole number of at least 1 (``default`` when absent)."""
    value = raw.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{key} must be a whole number of at least 1, not {value!r}")
    return value


def _bool(table: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ConfigurationError(f"{where}{key} must be true or false, not {value!r}")
    return value


def _text(table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is not None and not (isinstance(value, str) and value):
        raise ConfigurationError(f"{where}{key} must be a non-empty string, not {value!r}")
    return value


def _names(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    value = table.get(key)
    if value is None:
        return None
    if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
        raise ConfigurationError(f"{where}{key} must be a list of names, not {value!r}")
    return tuple(value)


def _argument(name: str) -> Callable[[Mapping[str, Any]], str]:
    def resource(arguments: Mapping[str, Any]) -> str:
        return str(arguments[name])

    return resource


def _step(tool: str, names: tuple[str, ...] | None) -> Callable[[Mapping[str, Any]], str]:
    """The action within the conversation: the tool and the named arguments' values."""

    def step(arguments: Mapping[str, Any]) -> str:
        chosen = arguments if names is None else {n: arguments[n] for n in names}
        return f"{tool}:{canonical_json(chosen).decode()}"

    return step
