"""Wiring for the runnable examples: telemetry, store, executor, one conversation."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from toolspan.tracer import Executor, MetricsHook, Safeguards, setup_telemetry
from toolspan.tracer.store import SQLiteStore

from .agent import Shape, run_conversation
from .scenario import EXAMPLE_FAULTS, EXAMPLE_REQUESTS
from .support_desk import SupportDesk, support_tools


def main(shape: Shape, argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=f"toolspan example agent ({shape} shape)")
    parser.add_argument("--out", default=f"out/{shape}_agent.jsonl", help="OTLP/JSON lines file")
    args = parser.parse_args(argv)

    # 1. Telemetry: a file always, a collector when OTEL_EXPORTER_OTLP_ENDPOINT is set.
    telemetry = setup_telemetry(f"support-desk-{shape}", json_path=args.out, metrics=True)
    # 2. The guard store: SQLite is the embedded default (Redis for many machines).
    with tempfile.TemporaryDirectory() as scratch:
        store = SQLiteStore(Path(scratch) / "idempotency.sqlite")
        desk = SupportDesk(faults=EXAMPLE_FAULTS)
        # 3. The executor: declared tools, safeguards, metrics.
        executor = Executor(
            support_tools(desk),
            safeguards=Safeguards(store=store),
            hooks=[MetricsHook(telemetry.meter_provider)],
            tracer_provider=telemetry.tracer_provider,
        )
        transcript = run_conversation(
            EXAMPLE_REQUESTS,
            executor,
            conversation_id=f"example-{shape}",
            shape=shape,
            tracer=telemetry.tracer_provider.get_tracer("toolspan.examples"),
        )
        store.close()
    telemetry.shutdown()

    for message in transcript:
        print(json.dumps(message)[:160])
    print(f"\nside effects: {dict(desk.side_effects)}")
    print(f"spans written to {args.out} ({', '.join(telemetry.exporters)})")
    return 0
