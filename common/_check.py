"""``toolspan check MODULE:BUILD``: every declared tool through a scripted fault matrix.

``BUILD`` is a function ``build(kit: FaultKit) -> Executor | CheckTarget`` that
builds the executor with its tools' clients on ``kit``'s transports (or
``kit.wrap``-ped callables) and ``**kit.executor_options()``. It is called
afresh for every (tool, scenario), so each logical call starts from an empty
ledger. A row is unsafe when one logical call caused two or more effects on
one resource; the table says what to declare to fix it, and the exit code is
1 on any unsafe row (a CI gate), or when a tool refused the check's arguments
(then nothing was tested), 0 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolspan.tracer import AsyncExecutor, Executor, RetryPolicy, Tool, ToolCall, ToolResult
from toolspan.tracer.integrations import Declarations
from toolspan.tracer.store import derive_key

from ._faults import Fault

if TYPE_CHECKING:
    from ._faultkit import FaultKit

__all__ = [
    "FAULT_MATRIX",
    "CheckReport",
    "CheckRow",
    "CheckTarget",
    "Scenario",
    "check",
    "format_report",
    "register",
]

EXIT_UNSAFE = 1
EXIT_BAD_TARGET = 2


@dataclass(frozen=True)
class Scenario:
    """One row of the matrix: the faults of the first requests, then ``then`` for the rest."""

    name: str
    faults: tuple[Fault, ...] = ()
    then: Fault = field(default_factory=Fault.ok)


FAULT_MATRIX: tuple[Scenario, ...] = (
    Scenario("ok"),
    Scenario("timeout after commit", (Fault.timeout_after_commit(),)),
    Scenario("response lost", (Fault.response_lost(),)),
    Scenario("connection reset", (Fault.connection_reset(),)),
    Scenario("408", (Fault.http_status(408),)),
    Scenario("429 Retry-After 2 s", (Fault.http_status(429, retry_after_s=2),)),
    Scenario(
        "503 Retry-After HTTP-date", (Fault.http_status(503, retry_after_s=1, http_date=True),)
    ),
    Scenario("503 every time", then=Fault.http_status(503)),
    Scenario("slow 3 s", (Fault.slow(3),)),
    Scenario("late commit 0.5 s", (Fault.late_commit(0.5),)),
    Scenario("timeout after commit, twice,", (Fault.timeout_after_commit(),) * 2),
)


# Runs one logical call the way a framework does (may return an awaitable).
Run = Callable[[ToolCall], Any]


@dataclass
class CheckTarget:
    """What ``build`` may return instead of a bare executor.

    ``arguments``: a valid call's arguments per tool (default: made up from
    its JSON Schema). ``applies_to(request)``: which requests the faults hit
    (default: all, read-backs included).

    ``run(call)``: the check's logical call driven through an adapter (the
    framework's own tool object, an MCP session) instead of
    ``executor.execute``. It may return an awaitable (run under
    ``asyncio.run``); a :class:`ToolResult` is the row's result, anything
    else (the framework's native answer) means the result is the one the
    kit's hook saw: build the adapter with ``hooks=[kit.hook]``. An adapter
    that keeps its executors to itself names its tools by ``declarations``
    (then give ``arguments``, as there is no schema to make them up from).
    """

    executor: Executor | AsyncExecutor | None = None
    arguments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    applies_to: Callable[[Any], bool] | None = None
    run: Run | None = None
    declarations: Declarations | None = None

    def tools(self) -> Mapping[str, Tool]:
        """The tools to check: the executor's, or the declared ones (no function of their own)."""
        if self.executor is not None:
            return self.executor.tools
        declared = self.declarations or Declarations()
        return {name: declared.tool(name, _not_called) for name in declared.names}

    @property
    def budget_s(self) -> float:
        """One call's wait budget: the executor's, else the default policy's."""
        policy = self.executor.policy if self.executor is not None else RetryPolicy()
        return policy.max_total_wait_s


def _not_called(**_arguments: Any) -> Any:
    raise AssertionError("a declared tool is described, never called, by the check")


@dataclass(frozen=True)
class CheckRow:
    """One logical call of one tool under one scenario, and what really happened."""

    tool: str
    scenario: str
    status: str
    attempts: int
    effects: int  # the most effects on one resource: 2 or more is a double effect
    effect_name: str
    requests: int
    wait_s: float
    budget_s: float
    fix: str = ""

    @property
    def unsafe(self) -> bool:
        """One logical call did the work twice (or crashed the executor)."""
        return self.effects >= 2 or self.status.startswith("crashed")

    @property
    def untested(self) -> bool:
        """The tool refused the made-up arguments: the row proves nothing."""
        return self.status == "invalid_arguments"


@dataclass
class CheckReport:
    """Every row, by tool; :attr:`unsafe` is what fails the gate."""

    rows: list[CheckRow]

    @property
    def unsafe(self) -> list[CheckRow]:
        """The rows with a double effect (or a crash)."""
        return [row for row in self.rows if row.unsafe]

    @property
    def untested(self) -> list[str]:
        """The tools whose calls were refused as invalid (give them ``arguments``)."""
        return list(dict.fromkeys(row.tool for row in self.rows if row.untested))

    @property
    def passed(self) -> bool:
        """The gate: no double effect, no crash, and every tool really called."""
        return not self.unsafe and not self.untested

    def by_tool(self) -> dict[str, list[CheckRow]]:
        """The rows grouped per tool, in declaration order."""
        grouped: dict[str, list[CheckRow]] = {}
        for row in self.rows:
            grouped.setdefault(row.tool, []).append(row)
        return grouped


Build = Callable[["FaultKit"], "Executor | AsyncExecutor | CheckTarget"]


def check(build: Build, scenarios: Sequence[Scenario] = FAULT_MATRIX) -> CheckReport:
    """Run every tool ``build`` declares through ``scenarios``; one row per pair."""
    from ._faultkit import FaultKit

    nonce = uuid.uuid4().hex[:12]  # a store that persists must not replay an earlier run
    probe = FaultKit()
    tools = _target(build(probe), probe).tools()
    rows = []
    for name in tools:
        for index, scenario in enumerate(scenarios):
            kit = FaultKit(scenario.faults, then=scenario.then)
            rows.append(_run_one(build, kit, name, scenario, f"{nonce}-{name}-{index}"))
    return CheckReport(rows)


def _target(built: Executor | AsyncExecutor | CheckTarget, kit: FaultKit) -> CheckTarget:
    target = built if isinstance(built, CheckTarget) else CheckTarget(built)
    executor = target.executor
    if executor is None:
        if target.run is None or target.declarations is None:
            raise TypeError(
                "a CheckTarget without an executor needs run= (how to call through the "
                "adapter) and declarations= (which tools it has)"
            )
        return target
    if not isinstance(executor, Executor | AsyncExecutor):
        raise TypeError(
            "build(kit) must return an Executor, an AsyncExecutor or a CheckTarget, "
            f"not {type(built).__name__}"
        )
    asynchronous = isinstance(executor, AsyncExecutor)
    ours = kit.clock.async_sleep if asynchronous else kit.clock.sleep
    # The executor's sleeper is ours to compare: a real one would sleep through the matrix.
    if getattr(executor, "_sleep", None) != ours:
        option = "asynchronous=True" if asynchronous else ""
        raise TypeError(
            f"build(kit) must build its {type(executor).__name__} with "
            f"**kit.executor_options({option}): otherwise every backoff sleeps for real"
        )
    return target


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _invoke(target: CheckTarget, call: ToolCall) -> Any:
    """One logical call: through ``run`` when given, else the executor."""
    if target.run is not None:
        answer = target.run(call)
    else:
        assert target.executor is not None  # _target guarantees one of the two
        answer = target.executor.execute(call)
    return asyncio.run(_awaited(answer)) if inspect.isawaitable(answer) else answer


def _result_of(answer: Any, kit: FaultKit, started: float) -> ToolResult:
    """The call's result: the answer itself, else what the kit's hook saw."""
    result: ToolResult | None = answer if isinstance(answer, ToolResult) else None
    if result is None and kit.results:
        result = kit.results[-1]
    if result is None:
        raise TypeError(
            f"run(call) answered {type(answer).__name__} and no result reached kit.hook: "
            "build the adapter with hooks=[kit.hook] (or return the ToolResult)"
        )
    # An adapter built without the kit's sleeper waits on the real clock instead.
    if result.total_wait_s > kit.clock() - started + 1e-9:
        raise TypeError(
            "the adapter's executor waited off the kit's clock: build it with "
            "**kit.executor_options(asynchronous=...)"
        )
    return result


def _run_one(build: Build, kit: FaultKit, name: str, scenario: Scenario, ids: str) -> CheckRow:
    target = _target(build(kit), kit)
    kit.plan.applies_to = target.applies_to
    declared = target.tools()[name]
    arguments = dict(target.arguments.get(name) or example_arguments(declared.parameters))
    call = ToolCall(
        name,
        f"call-{ids}",
        arguments,
        conversation_id=f"check-{ids}",
        request_id=f"check-{ids}",
        idempotency_key=derive_key(f"check-{ids}", f"{name}:check") if declared.is_write else None,
    )
    budget = target.budget_s
    started = kit.clock()
    try:
        answer = _invoke(target, call)
    except Exception as exc:  # a failure the executor could not classify: a bug to show
        kit.settle()
        return _row(kit, name, scenario, f"crashed: {type(exc).__name__}: {exc}", 0, 0.0, budget)
    kit.settle()
    result = _result_of(answer, kit, started)
    row = _row(kit, name, scenario, result.status, result.attempts, result.total_wait_s, budget)
    if row.unsafe:
        row = _with_fix(row, declared)
    return row


def _row(
    kit: FaultKit,
    name: str,
    scenario: Scenario,
    status: str,
    attempts: int,
    wait_s: float,
    budget_s: float,
) -> CheckRow:
    ledger = kit.ledger
    most = max(ledger.effects.items(), key=lambda item: item[1], default=(("effect", ""), 0))
    return CheckRow(
        tool=name,
        scenario=scenario.name,
        status=status,
        attempts=attempts,
        effects=most[1],
        effect_name=most[0][0],
        requests=ledger.requests,
        wait_s=wait_s,
        budget_s=budget_s,
    )


def _with_fix(row: CheckRow, declared: Tool) -> CheckRow:
    """The row with what to declare so that this scenario does the work once."""
    if row.status.startswith("crashed"):
        fix = (
            f"{row.tool}: a {row.scenario} crashes the executor ({row.status}) — "
            "raise ToolError (or an httpx/built-in timeout or connection error) from the tool"
        )
        return _replace_fix(row, fix)
    gives = f"{row.tool}: a {row.scenario} gives {row.effects} {_plural(row.effect_name)}"
    if declared.read_back is None:
        advice = "add read_back or pass the key"
        if declared.key_route is not None:
            advice += (
                f" (declared as passed by {declared.key_route}, yet the service did the "
                "work again: the key never reaches it, or the service ignores it)"
            )
    elif row.scenario.startswith("late commit"):
        advice = "raise commit_window_s above the service's late commits, or pass the key"
    else:
        advice = "make read_back find what the write commits, or pass the key"
    return _replace_fix(row, f"{gives} — {advice}")


def _replace_fix(row: CheckRow, fix: str) -> CheckRow:
    return replace(row, fix=fix)


def _plural(noun: str) -> str:
    return noun if noun.endswith("s") else f"{noun}s"


def example_arguments(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """Arguments made up from a JSON Schema: every required property, simplest value."""
    if not schema:
        return {}
    properties = schema.get("properties") or {}
    return {name: _example(properties.get(name) or {}) for name in schema.get("required") or ()}


def _example(schema: Mapping[str, Any]) -> Any:
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type", "string")
    kind = kind[0] if isinstance(kind, list) else kind
    simple: dict[str, Any] = {"integer": 1, "number": 1.0, "boolean": True, "null": None}
    if kind in simple:
        return simple[kind]
    if kind == "object":
        return example_arguments(schema)
    if kind == "array":
        return []
    return "example-1"


def format_report(report: CheckReport) -> str:
    """The report as one table per tool, then the fixes, then the verdict line."""
    lines: list[str] = []
    for tool, rows in report.by_tool().items():
        lines += [f"{tool}", _table(rows), ""]
    fixes = [row.fix for row in report.unsafe]
    if fixes:
        lines += ["What to declare:", *(f"  {fix}" for fix in dict.fromkeys(fixes)), ""]
    lines += [
        f"{tool}: the check's arguments were refused (invalid_arguments), so nothing was "
        f"tested — give valid ones: CheckTarget(executor, arguments={{{tool!r}: {{...}}}})"
        for tool in report.untested
    ]
    lines.append(_verdict(report))
    return "\n".join(lines)


def _verdict(report: CheckReport) -> str:
    if report.unsafe:
        tools = ", ".join(sorted({row.tool for row in report.unsafe}))
        return (
            f"UNSAFE: {len(report.unsafe)} of {len(report.rows)} calls did the work twice ({tools})"
        )
    if report.untested:
        return f"UNTESTED: {', '.join(report.untested)}"
    return f"safe: {len(report.rows)} calls, at most one effect each"


_HEADER = ("scenario", "status", "attempts", "requests", "max effects", "wait/budget s", "")


def _table(rows: Sequence[CheckRow]) -> str:
    cells = [_HEADER] + [
        (
            row.scenario,
            row.status if len(row.status) < 40 else row.status[:37] + "...",
            str(row.attempts),
            str(row.requests),
            str(row.effects),
            f"{row.wait_s:.2f}/{row.budget_s:g}" + (" OVER" if row.wait_s > row.budget_s else ""),
            _mark(row),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_HEADER))]
    return "\n".join(
        "  "
        + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )


def _mark(row: CheckRow) -> str:
    if row.effects >= 2:
        return "DOUBLE"
    if row.unsafe:
        return "CRASH"
    return "UNTESTED" if row.untested else "ok"


def load_target(spec: str) -> Build:
    """``MODULE:ATTR`` (``ATTR`` may be dotted) as the build function it names."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"expected MODULE:BUILD (e.g. myapp.checks:build), got {spec!r}")
    # As `python -m` would: modules in the current directory are importable.
    here = str(Path.cwd())
    if here not in sys.path:
        sys.path.insert(0, here)
    found: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        found = getattr(found, part)
    if isinstance(found, Executor | AsyncExecutor) or not callable(found):
        raise ValueError(
            f"{spec} must name a function build(kit) -> Executor, so the check can put "
            "the kit's fault transports under its tools' clients"
        )
    build: Build = found
    return build


def register(subparsers: Any) -> None:
    """Add ``toolspan check`` to the command line."""
    parser = subparsers.add_parser(
        "check",
        help="run every tool through a fault matrix; exit 1 on any double side effect",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("target", metavar="MODULE:BUILD", help="e.g. myapp.checks:build")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON lines")
    parser.set_defaults(handler=_run_cli)


def _run_cli(args: argparse.Namespace) -> int:
    try:
        build = load_target(args.target)
        report = check(build)
    except (ValueError, TypeError, ImportError, AttributeError) as exc:
        print(f"toolspan check: {exc}", file=sys.stderr)
        return EXIT_BAD_TARGET
    if args.json:
        for row in report.rows:
            print(json.dumps({**row.__dict__, "unsafe": row.unsafe, "untested": row.untested}))
    else:
        print(format_report(report))
    return 0 if report.passed else EXIT_UNSAFE
