"""``make demo``: regenerate the sample traces, analyze them, open the dashboard.

    python -m sample_traces [--no-dashboard] [--port 8501] [--out sample_traces]

Everything runs offline on embedded defaults: fake services, fake clocks,
no collector needed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from toolspan.cli import main as toolspan_main

from . import agent_run, bicycle, outage
from ._otel import DeterministicTelemetry

HERE = Path(__file__).resolve().parent


def regenerate(out: Path) -> list[bicycle.CaseResult]:
    """Write both sample trace sets under ``out``; returns the bicycle results."""
    telemetry = DeterministicTelemetry()
    results = bicycle.run_cases(telemetry)
    bicycle.write_outputs(results, telemetry, out / "bicycle")
    agent_run.generate(out / "agent_run")
    outage.generate(out / "outage")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sample_traces", description=__doc__)
    parser.add_argument("--out", type=Path, default=HERE, help="where the trace sets go")
    parser.add_argument("--db", type=Path, default=Path("out/demo.duckdb"))
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--no-dashboard", action="store_true")
    args = parser.parse_args(argv)

    print("== 1. The 13 bicycle-share cases, through the real tracer\n")
    print(bicycle.format_table(regenerate(args.out)))
    print(
        f"\n   written: {args.out / 'bicycle'} (cases.csv, attempts.csv, results.csv, traces.jsonl)"
    )
    print(f"   and the support-desk agent run: {args.out / 'agent_run' / 'traces.jsonl'}")
    print(f"   and a carrier outage (budget, breaker): {args.out / 'outage' / 'traces.jsonl'}\n")

    print("== 2. The analyzer's findings (DuckDB over the OTLP/JSON files)\n")
    args.db.parent.mkdir(parents=True, exist_ok=True)
    args.db.unlink(missing_ok=True)
    code = toolspan_main(
        [
            "analyze",
            str(args.out / "bicycle"),
            str(args.out / "agent_run"),
            str(args.out / "outage"),
            "--db",
            str(args.db),
            "--write-tools",
            ",".join(agent_run.WRITE_TOOLS),
        ]
    )
    if code != 0 or args.no_dashboard:
        return code

    print("\n== 3. The dashboard (Ctrl-C to stop)\n")
    from toolspan.dashboard import launch

    return launch(args.db, port=args.port)


if __name__ == "__main__":
    sys.exit(main())
