"""``make demo``: regenerate the sample traces, print the findings, then show
them arrive live: ``toolspan serve`` with its dashboard, and the example
agents exporting to it over OTLP/HTTP as they run.

    python -m sample_traces [--no-dashboard] [--port 8501] [--out sample_traces]

Everything runs offline on embedded defaults: fake services, fake clocks,
no collector needed.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from toolspan.cli import main as toolspan_main

from . import agent_run, bicycle, outage
from ._otel import DeterministicTelemetry

HERE = Path(__file__).resolve().parent
# How long each exported span waits: the dashboard fills over about half a minute.
LIVE_PAUSE_S = 0.15


def regenerate(out: Path, *, also_to: SpanExporter | None = None) -> list[bicycle.CaseResult]:
    """Write both sample trace sets under ``out``; returns the bicycle results.
    ``also_to`` also gets every span as it ends (the live demo)."""
    telemetry = DeterministicTelemetry(also_to=also_to)
    results = bicycle.run_cases(telemetry)
    bicycle.write_outputs(results, telemetry, out / "bicycle")
    agent_run.generate(out / "agent_run", also_to=also_to)
    outage.generate(out / "outage", also_to=also_to)
    return results


class _Paced(SpanExporter):
    """The OTLP exporter, a little slowed down so that the agents visibly run."""

    def __init__(self, exporter: SpanExporter, pause_s: float) -> None:
        self._exporter = exporter
        self._pause_s = pause_s

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        time.sleep(self._pause_s)
        return self._exporter.export(spans)

    def shutdown(self) -> None:
        self._exporter.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sample_traces", description=__doc__)
    parser.add_argument("--out", type=Path, default=HERE, help="where the trace sets go")
    parser.add_argument("--db", type=Path, default=Path("out/demo.duckdb"))
    parser.add_argument("--live-dir", type=Path, default=Path("out/demo-live"))
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--http-port", type=int, default=4318)
    parser.add_argument("--grpc-port", type=int, default=4317)
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
    return _live(args)


def _live(args: argparse.Namespace) -> int:
    print(
        "\n== 3. Live: toolspan serve, and the agents exporting to it over OTLP (Ctrl-C to stop)\n"
    )
    shutil.rmtree(args.live_dir, ignore_errors=True)
    command = [
        sys.executable, "-m", "toolspan.cli", "serve", "--dir", str(args.live_dir),
        "--port", str(args.port), "--http-port", str(args.http_port),
        "--grpc-port", str(args.grpc_port), "--write-tools", ",".join(agent_run.WRITE_TOOLS),
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        if not _wait_running(server):
            return 2
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = f"http://127.0.0.1:{args.http_port}/v1/traces"
        print(f"   the agents run now, exporting to {endpoint}: watch the dashboard fill up\n")
        exporter = _Paced(OTLPSpanExporter(endpoint=endpoint), LIVE_PAUSE_S)
        # The files written again on the way are not the point here: a scratch directory.
        with tempfile.TemporaryDirectory(prefix="toolspan-demo-") as scratch:
            regenerate(Path(scratch), also_to=exporter)
        print("   the agents are done; the dashboard keeps following (Ctrl-C to stop)")
        return server.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)


def _wait_running(server: subprocess.Popen[str]) -> bool:
    """Echo serve's start-up lines until it says it runs."""
    assert server.stdout is not None
    for line in server.stdout:
        print(f"   {line.rstrip()}", flush=True)
        if line.startswith("dashboard"):
            # The rest of serve's output, echoed as it comes (a full pipe would block it).
            threading.Thread(target=_echo, args=(server.stdout,), daemon=True).start()
            return True
    return False


def _echo(lines: Iterable[str]) -> None:
    for line in lines:
        print(f"   {line.rstrip()}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
