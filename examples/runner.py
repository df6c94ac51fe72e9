"""Wiring for the runnable examples: telemetry, store, executor, one conversation.

Every example module (``examples.<stack>_agent``) has a ``run(wiring)`` that
drives its stack's agent loop through the executors :class:`Wiring` builds,
and ends with ``sys.exit(main("<stack>", sys.argv[1:]))``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from toolspan.tracer import (
    AsyncExecutor,
    Executor,
    Hook,
    MetricsHook,
    Safeguards,
    Tool,
    setup_telemetry,
)
from toolspan.tracer.store import SQLiteStore
from toolspan.tracer.testing import FakeClock

from .scenario import EXAMPLE_FAULTS, EXAMPLE_REQUESTS
from .support_desk import SupportDesk

__all__ = ["Wiring", "main"]


@dataclass
class Wiring:
    """What every example shares: the services, the guards, telemetry, the script."""

    shape: str
    desk: SupportDesk
    safeguards: Safeguards
    hooks: Sequence[Hook]
    tracer_provider: TracerProvider
    conversation_id: str
    clock: FakeClock | None = None
    requests: Sequence[Any] = EXAMPLE_REQUESTS

    @property
    def tracer(self) -> Tracer:
        return self.tracer_provider.get_tracer("toolspan.examples")

    def executor(self, tools: Iterable[Tool]) -> Executor:
        """The boundary: declared tools, safeguards, metrics (a fake clock in tests)."""
        time: dict[str, Any] = {}
        if self.clock is not None:
            time = {"sleep": self.clock.sleep, "clock": self.clock}
        return Executor(tools, **self._options(), **time)

    def async_executor(self, tools: Iterable[Tool]) -> AsyncExecutor:
        time: dict[str, Any] = {}
        if self.clock is not None:
            time = {"sleep": self.clock.async_sleep, "clock": self.clock}
        return AsyncExecutor(tools, **self._options(), **time)

    def _options(self) -> dict[str, Any]:
        return {
            "safeguards": self.safeguards,
            "hooks": self.hooks,
            "tracer_provider": self.tracer_provider,
        }


def main(shape: str, argv: Sequence[str], *, clock: FakeClock | None = None) -> int:
    """Run ``examples.<shape>_agent`` once; ``clock`` replaces real sleeps (tests)."""
    parser = argparse.ArgumentParser(description=f"toolspan example agent ({shape})")
    parser.add_argument("--out", default=f"out/{shape}_agent.jsonl", help="OTLP/JSON lines file")
    args = parser.parse_args(argv)
    run: Callable[[Wiring], list[Any]] = importlib.import_module(f"examples.{shape}_agent").run

    # 1. Telemetry: a file always, a collector when OTEL_EXPORTER_OTLP_ENDPOINT is set.
    # One run, one file: a rerun must not look like the same conversation twice.
    Path(args.out).unlink(missing_ok=True)
    telemetry = setup_telemetry(f"support-desk-{shape}", json_path=args.out, metrics=True)
    # 2. The guard store: SQLite is the embedded default (Redis for many machines).
    with tempfile.TemporaryDirectory() as scratch:
        store = SQLiteStore(Path(scratch) / "idempotency.sqlite")
        desk = SupportDesk(faults=EXAMPLE_FAULTS)
        # 3. The executor(s), built by the example from its stack's tools.
        wiring = Wiring(
            shape=shape,
            desk=desk,
            safeguards=Safeguards(store=store),
            hooks=[MetricsHook(telemetry.meter_provider)],
            tracer_provider=telemetry.tracer_provider,
            conversation_id=f"example-{shape}",
            clock=clock,
        )
        transcript = run(wiring)
        store.close()
    telemetry.shutdown()

    for message in transcript:
        print(json.dumps(message, default=_plain)[:160])
    print(f"\nside effects: {dict(desk.side_effects)}")
    print(f"spans written to {args.out} ({', '.join(telemetry.exporters)})")
    return 0


def _plain(value: Any) -> Any:
    """SDK objects in a transcript (pydantic models) as JSON."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", exclude_none=True) if dump is not None else str(value)
