"""Benchmark: `toolspan serve` end to end, and Arize Phoenix as the peer.

One run prints:

  throughput (load generator)  spans/s from the first request posted to the
      last span queryable in tool_calls, for pre-encoded OTLP/HTTP protobuf
      requests (500 spans each) posted by 4 client threads as fast as
      `serve` takes them (503 + Retry-After is honoured);
  throughput (SDK exporters)   the same for spans made by the OpenTelemetry
      SDK and sent by its OTLP/HTTP exporter (BatchSpanProcessor);
  latency at a fixed rate      at 5,000 spans/s: p50/p95/max from a span's end
      to its row in tool_calls, and from a planted duplicate write to its
      finding (GET /api/v1/findings);
  peak RSS                     of the serve process (VmHWM);
  acknowledged spans lost      acknowledged span ids missing from `spans`;
  Phoenix                      the same pre-encoded stream posted to
      `phoenix serve` (OTLP/HTTP), from the first request to the last span
      queryable through its REST API, in a throwaway venv under bench/.data/
      (created here; never the project venv: its pins would clash).

With --parts refresh (not in the default parts): one analyser pass of 2,500
spans into a database already holding --prefill spans (default 300,000),
timed in this process: the per-pass cost that must not grow with the database.

With --parts clickhouse (not in the default parts): the load generator again,
through `toolspan serve --clickhouse` writing every span into an embedded chDB
table as well; the end is when the analyser and the writer both have them all.

With --parts exporters (not in the default parts): the official OpenTelemetry
exporters side by side, Node (tests/serve/node_exporter/export.mjs, the JS SDK
0.223.1 exporters) and Python, over OTLP/gRPC and OTLP/HTTP, each sending the
same --exporter-spans SDK spans with --exporter-limit exports of 100 spans in
flight into a serve of its own; spans/s from the first export to the last span
in tool_calls, and how many times faster the floor is: the load generator on
as many spans, measured in the same run.

Usage: python bench/live_bench.py [--spans 200000] [--phoenix-spans 5000] [--no-phoenix]
       python bench/live_bench.py --parts refresh [--prefill 300000]
       python bench/live_bench.py --parts generator,clickhouse
       python bench/live_bench.py --parts exporters [--exporter-spans 40000 --exporter-limit 100]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / ".data"
PHOENIX_VENV = DATA / "phoenix-venv"
SPANS_PER_REQUEST = 500
PROTOBUF = {"content-type": "application/x-protobuf"}


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_port(port: int, timeout_s: float = 120.0) -> None:
    import socket

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port}")


# -- requests --------------------------------------------------------------------


def request(
    number: int, size: int = SPANS_PER_REQUEST, *, plant: bool = False
) -> tuple[bytes, list[str]]:
    """One ExportTraceServiceRequest of ``size`` tool spans (reads, one
    conversation per request); with ``plant``, two of them are the same write
    (a duplicate write) in a conversation of their own."""
    message = ExportTraceServiceRequest()
    resource = message.resource_spans.add()
    attribute = resource.resource.attributes.add()
    attribute.key, attribute.value.string_value = "service.name", "live-bench"
    spans = resource.scope_spans.add().spans
    now = time.time_ns()
    ids = []
    for index in range(size):
        span = spans.add()
        span.trace_id = os.urandom(16)
        span.span_id = os.urandom(8)
        planted = plant and index < 2
        tool = "send_email" if planted else "lookup_order"
        span.name = f"execute_tool {tool}"
        span.kind = 1
        span.start_time_unix_nano = now - 1_000_000
        span.end_time_unix_nano = now
        conversation = f"dup-{number}" if planted else f"conv-{number}"
        arguments = '{"to": "a@b.c"}' if planted else f'{{"order": {index}}}'
        for key, value in (
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", tool),
            ("gen_ai.conversation.id", conversation),
            ("gen_ai.tool.call.id", f"call-{number}-{index}"),
            ("gen_ai.tool.call.arguments", arguments),
        ):
            kv = span.attributes.add()
            kv.key, kv.value.string_value = key, value
        ids.append(span.span_id.hex())
    return message.SerializeToString(), ids


def post_all(
    url: str, bodies: list[bytes], threads: int = 4, headers: dict[str, str] | None = None
) -> int:
    """Post every body (retrying on 429/503 after Retry-After); returns refusals."""
    lock = threading.Lock()
    pending = list(reversed(bodies))
    refused = [0]

    def worker() -> None:
        with httpx.Client(timeout=60) as client:
            while True:
                with lock:
                    if not pending:
                        return
                    body = pending.pop()
                while True:
                    answer = client.post(url, content=body, headers=headers or PROTOBUF)
                    if answer.status_code == 200:
                        break
                    if answer.status_code not in (429, 503):
                        raise RuntimeError(f"{answer.status_code}: {answer.text[:200]}")
                    refused[0] += 1
                    time.sleep(float(answer.headers.get("retry-after", "1")))

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    return refused[0]


# -- toolspan serve ------------------------------------------------------------------


class Serve:
    def __init__(self, directory: Path, clickhouse: str | None = None) -> None:
        self.http_port, self.grpc_port = free_port(), free_port()
        self.directory = directory
        command = [
            sys.executable, "-m", "toolspan.cli", "serve", "--dir", str(directory),
            "--http-port", str(self.http_port), "--grpc-port", str(self.grpc_port), "--port", "0",
            "--write-tools", "send_email",
        ]  # fmt: skip
        if clickhouse:
            command += ["--clickhouse", clickhouse]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_port(self.http_port)
        wait_port(self.grpc_port)
        self.api = httpx.Client(base_url=f"http://127.0.0.1:{self.http_port}", timeout=60)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/v1/traces"

    def calls(self) -> int:
        return int(self.api.get("/api/v1/summary").json()["summary"]["calls"])

    def duplicate_writes(self) -> set[str]:
        found = self.api.get("/api/v1/findings").json()["findings"]
        return {f["conversation_id"] for f in found if f["kind"] == "duplicate_write"}

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)
        self.api.close()


def wait_until(check: Any, target: int, timeout_s: float = 600.0, poll_s: float = 0.1) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check() >= target:
            return time.monotonic()
        time.sleep(poll_s)
    raise RuntimeError(f"not reached within {timeout_s} s: {target}")


def throughput_generator(spans: int, clickhouse: bool = False) -> dict[str, float]:
    """End to end through serve; with ``clickhouse``, serve also writes every
    span into an embedded chDB table (``--clickhouse``), and the end is when
    both the analyser and the writer have them all."""
    bodies, all_ids = [], []
    for number in range(spans // SPANS_PER_REQUEST):
        body, ids = request(number)
        bodies.append(body)
        all_ids.extend(ids)
    with tempfile.TemporaryDirectory(dir=DATA) as scratch:
        spool, chdb = Path(scratch) / "spool", Path(scratch) / "chdb"
        chdb.mkdir()
        serve = Serve(spool, f"chdb:{chdb}?database=otel" if clickhouse else None)
        try:
            started = time.monotonic()
            refused = post_all(serve.url, bodies)
            accepted = time.monotonic()
            done = wait_until(serve.calls, len(all_ids))
            if clickhouse:
                done = wait_until(lambda: _written(spool), _sealed(spool))
            lost = _lost(serve, all_ids)
            rss = serve.peak_rss_mb()
        finally:
            serve.stop()
        written = _chdb_rows(chdb) if clickhouse else None
    return {
        "spans": len(all_ids),
        "accept_s": accepted - started,
        "end_to_end_s": done - started,
        "spans_per_s": len(all_ids) / (done - started),
        "refused": refused,
        "lost": lost,
        "rss_mb": rss,
        "clickhouse_rows": written,
    }


def _sealed(spool: Path) -> int:
    """The newest spool segment holding spans (the analyser sealed it: it has them all)."""
    from toolspan.serve._spool import segment_number, segments

    return max(segment_number(p) for p in segments(spool) if p.stat().st_size)


def _written(spool: Path) -> int:
    """The last segment serve's ClickHouse writer wrote whole (its cursor)."""
    from toolspan.serve._clickhouse import CURSOR_NAME

    try:
        return int((spool / CURSOR_NAME).read_text())
    except (FileNotFoundError, ValueError):
        return 0


def _chdb_rows(chdb: Path) -> int:
    """Rows in the chDB table serve wrote (read once serve, which held it, exited)."""
    import clickhouse_connect

    client = clickhouse_connect.get_client(dsn=f"chdb://{chdb}")
    try:
        return int(client.query("SELECT count() FROM otel.otel_traces").result_rows[0][0])
    finally:
        client.close()


def _lost(serve: Serve, ids: list[str]) -> int:
    """Acknowledged span ids not in the database (asked in the server's own API
    terms: the calls of the conversations; here every span is one call)."""
    return max(0, len(ids) - serve.calls())


def throughput_sdk(spans: int) -> dict[str, float]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    with tempfile.TemporaryDirectory(dir=DATA) as scratch:
        serve = Serve(Path(scratch) / "spool")
        try:
            provider = TracerProvider()
            provider.add_span_processor(
                BatchSpanProcessor(
                    OTLPSpanExporter(endpoint=serve.url),
                    max_queue_size=spans,
                    max_export_batch_size=512,
                    schedule_delay_millis=100,
                )
            )
            tracer = provider.get_tracer("live-bench")
            started = time.monotonic()
            for index in range(spans):
                with tracer.start_as_current_span(
                    "execute_tool lookup_order",
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "lookup_order",
                        "gen_ai.conversation.id": f"sdk-{index // 100}",
                        "gen_ai.tool.call.id": f"sdk-call-{index}",
                        "gen_ai.tool.call.arguments": f'{{"order": {index}}}',
                    },
                ):
                    pass
            provider.force_flush()
            done = wait_until(serve.calls, spans)
            provider.shutdown()
        finally:
            serve.stop()
    return {"spans": spans, "end_to_end_s": done - started, "spans_per_s": spans / (done - started)}


NODE_EXPORTER = ROOT / "tests" / "serve" / "node_exporter"
EXPORT_BATCH = 100  # spans per export, export.mjs's default


def exporters_side_by_side(spans: int, limit: int, protocols: list[str]) -> dict[str, Any]:
    """The official Node and Python OTLP exporters, the same ``spans`` SDK spans
    each, ``limit`` exports of 100 spans in flight, each into a serve of its
    own, per protocol; and the floor: the load generator on as many spans in
    the same run. spans/s from the first export to the last span in tool_calls."""
    floor = throughput_generator(spans)
    rows = []
    for protocol in protocols:
        for name, run in (("Node", _node_exporter), ("Python", _python_exporter)):
            with tempfile.TemporaryDirectory(dir=DATA) as scratch:
                serve = Serve(Path(scratch) / "spool")
                try:
                    started, sent, failed = run(serve, protocol, spans, limit)
                    done = wait_until(serve.calls, sent)
                    lost = max(0, sent - serve.calls())
                finally:
                    serve.stop()
            rate = sent / (done - started)
            rows.append({"protocol": protocol, "exporter": name, "spans_per_s": rate,
                         "failed": failed, "lost": lost,
                         "floor_ratio": floor["spans_per_s"] / rate})  # fmt: skip
    return {"floor": floor, "rows": rows}


def _node_exporter(serve: Serve, protocol: str, spans: int, limit: int) -> tuple[float, int, int]:
    """export.mjs (the JS SDK's spans, made before the timer starts)."""
    if not (NODE_EXPORTER / "node_modules").is_dir():
        raise RuntimeError("the Node exporters are not installed: run scripts/install-node-deps.sh")
    endpoint = f"http://127.0.0.1:{serve.grpc_port}" if protocol == "grpc" else serve.url
    command = [
        "node", str(NODE_EXPORTER / "export.mjs"), "--endpoint", endpoint, "--protocol", protocol,
        "--spans", str(spans), "--concurrency-limit", str(limit), "--batch", str(EXPORT_BATCH),
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    process.stdout.readline()  # {"exporting": ...}: the spans are made
    started = time.monotonic()
    result = json.loads(process.stdout.read().strip().splitlines()[-1])
    if process.wait() != 0:
        raise RuntimeError(f"export.mjs exited with {process.returncode}")
    return started, int(result["sent"]), int(result["failed"])


def _python_exporter(serve: Serve, protocol: str, spans: int, limit: int) -> tuple[float, int, int]:
    """The Python SDK's spans (made before the timer starts), exported by
    ``limit`` threads sharing one exporter, as export.mjs does."""
    from concurrent.futures import ThreadPoolExecutor

    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcExporter,
    )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("live-bench")
    for index in range(spans):
        tracer.start_span(
            "execute_tool lookup_order",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup_order",
                "gen_ai.conversation.id": f"py-{index // 100}",
                "gen_ai.tool.call.id": f"py-call-{index}",
                "gen_ai.tool.call.arguments": f'{{"order": {index}}}',
            },
        ).end()
    made = list(memory.get_finished_spans())
    batches = [made[i : i + EXPORT_BATCH] for i in range(0, len(made), EXPORT_BATCH)]
    exporter: Any = (
        GrpcExporter(endpoint=f"127.0.0.1:{serve.grpc_port}", insecure=True)
        if protocol == "grpc"
        else HttpExporter(endpoint=serve.url)
    )
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=limit) as pool:
        results = list(pool.map(exporter.export, batches))
    exporter.shutdown()
    ok = SpanExportResult.SUCCESS
    sent = sum(len(b) for b, r in zip(batches, results, strict=True) if r is ok)
    return started, sent, len(made) - sent


def latency(rate: int, seconds: int) -> dict[str, Any]:
    """Spans at ``rate`` per second for ``seconds``: a request every 0.1 s, a
    planted duplicate write every second."""
    per_tick = rate // 10
    ticks = seconds * 10
    bodies = [request(n, per_tick, plant=n % 10 == 0) for n in range(ticks)]
    sent: list[float] = []
    with tempfile.TemporaryDirectory(dir=DATA) as scratch:
        serve = Serve(Path(scratch) / "spool")
        row_latency, finding_latency = [], []
        try:
            stop = threading.Event()

            def poll() -> None:
                seen_calls, found = 0, set()
                while not stop.is_set() or seen_calls < ticks * per_tick:
                    calls = serve.calls()
                    now = time.monotonic()
                    while seen_calls < calls and len(row_latency) < len(sent):
                        index = len(row_latency)
                        if calls >= (index + 1) * per_tick:
                            row_latency.append(now - sent[index])
                            continue
                        break
                    seen_calls = calls
                    for conversation in serve.duplicate_writes() - found:
                        found.add(conversation)
                        finding_latency.append(now - sent[int(conversation.split("-")[1])])
                    if stop.is_set() and len(row_latency) >= ticks:
                        return
                    time.sleep(0.05)

            poller = threading.Thread(target=poll)
            poller.start()
            with httpx.Client(timeout=60) as client:
                start = time.monotonic()
                for number, (body, _) in enumerate(bodies):
                    due = start + number / 10
                    time.sleep(max(0.0, due - time.monotonic()))
                    sent.append(time.monotonic())
                    answer = client.post(serve.url, content=body, headers=PROTOBUF)
                    answer.raise_for_status()
            stop.set()
            poller.join(timeout=120)
        finally:
            serve.stop()
    return {
        "rate": rate,
        "row": _percentiles(row_latency),
        "finding": _percentiles(finding_latency),
        "findings": len(finding_latency),
        "planted": ticks // 10,
    }


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": float("nan"), "p95": float("nan"), "max": float("nan")}
    ordered = sorted(values)
    return {
        "p50": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "max": ordered[-1],
    }


# -- one analyser pass ----------------------------------------------------------------


def refresh_pass(prefill: int, per_pass: int = 2_500, passes: int = 4) -> dict[str, float]:
    """The analyser's pass on its own, in this process: a database file holding
    ``prefill`` spans (as serve spools them), then ``passes`` passes of
    ``per_pass`` spans each, one sealed segment each, as the live analyser runs
    them (ingest, then the findings it diffs); mean seconds per pass."""
    from toolspan.analyzer import Analyzer
    from toolspan.serve._otlp import from_protobuf

    def segment(directory: Path, number: int, spans: int) -> Path:
        lines = []
        for part in range(max(1, spans // SPANS_PER_REQUEST)):
            body, _ = request(number * 1000 + part, min(SPANS_PER_REQUEST, spans), plant=part == 0)
            lines.append(from_protobuf(body).line or b"")
        path = directory / f"spans-{number:010d}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        return path

    with tempfile.TemporaryDirectory(dir=DATA) as scratch:
        directory = Path(scratch)
        with Analyzer(directory / "live.duckdb") as analyzer:
            analyzer.set_write_tools(["send_email"])
            chunk = 50_000
            filled = [segment(directory, n, chunk) for n in range(prefill // chunk)]
            if filled:
                analyzer.ingest(filled)
            ingest_s = findings_s = 0.0
            for number in range(len(filled), len(filled) + passes):
                path = segment(directory, number, per_pass)
                started = time.perf_counter()
                analyzer.ingest([path])
                ingested = time.perf_counter()
                analyzer.findings()
                findings_s += time.perf_counter() - ingested
                ingest_s += ingested - started
    return {"prefill": prefill, "per_pass": per_pass, "ingest_s": ingest_s / passes,
            "findings_s": findings_s / passes}  # fmt: skip


# -- Phoenix -----------------------------------------------------------------------


def phoenix(spans: int) -> dict[str, float] | None:
    python = PHOENIX_VENV / "bin" / "python"
    if not python.exists():
        print("  creating the Phoenix venv under bench/.data/ (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(PHOENIX_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "arize-phoenix"], check=True)
    bodies = [request(n)[0] for n in range(spans // SPANS_PER_REQUEST)]
    port, grpc_port = free_port(), free_port()
    workdir = Path(tempfile.mkdtemp(dir=DATA, prefix="phoenix-"))
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_HOST": "127.0.0.1",
    }
    process = subprocess.Popen(
        [str(PHOENIX_VENV / "bin" / "phoenix"), "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, timeout_s=300)
        api = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
        started = time.monotonic()
        post_all(f"http://127.0.0.1:{port}/v1/traces", bodies)
        accepted = time.monotonic()

        def count() -> int:
            total, cursor = 0, None
            while True:
                params: dict[str, Any] = {"limit": 1000}
                if cursor:
                    params["cursor"] = cursor
                page = api.get("/v1/projects/default/spans", params=params)
                if page.status_code != 200:
                    return total
                body = page.json()
                total += len(body.get("data", []))
                cursor = body.get("next_cursor")
                if not cursor:
                    return total

        done = wait_until(count, len(bodies) * SPANS_PER_REQUEST, timeout_s=900, poll_s=2.0)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    n = len(bodies) * SPANS_PER_REQUEST
    return {"spans": n, "accept_s": accepted - started, "end_to_end_s": done - started,
            "spans_per_s": n / (done - started)}  # fmt: skip


def _print_exporters(measured: dict[str, Any], limit: int) -> None:
    floor = measured["floor"]
    print(
        f"floor (load generator, this run): {floor['spans']:,} spans end to end at "
        f"{floor['spans_per_s']:,.0f} spans/s (lost {floor['lost']})",
        flush=True,
    )
    for row in measured["rows"]:
        name = "OTLP/gRPC" if row["protocol"] == "grpc" else "OTLP/HTTP"
        print(
            f"{row['exporter']:<6} exporter, {name}, {limit} exports in flight: "
            f"{row['spans_per_s']:,.0f} spans/s, floor {row['floor_ratio']:.2f}x faster "
            f"(export failed for {row['failed']} spans; lost {row['lost']})",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--sdk-spans", type=int, default=20_000)
    parser.add_argument("--rate", type=int, default=5_000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--phoenix-spans", type=int, default=5_000)
    parser.add_argument("--no-phoenix", action="store_true")
    parser.add_argument(
        "--exporter-spans", type=int, default=40_000, help="with --parts exporters: spans each"
    )
    parser.add_argument(
        "--exporter-limit", type=int, default=100, help="with --parts exporters: exports in flight"
    )
    parser.add_argument(
        "--exporter-protocols", default="grpc,http", help="with --parts exporters: grpc, http"
    )
    parser.add_argument(
        "--prefill",
        type=int,
        default=300_000,
        help="with --parts refresh: spans in the database before the timed passes",
    )
    parser.add_argument(
        "--parts",
        default="generator,sdk,latency,phoenix",
        help="which measurements, comma-separated: generator, sdk, latency, phoenix "
        "(the default: all four), refresh, clickhouse (serve --clickhouse), "
        "exporters (the official Node and Python exporters against the floor)",
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if args.no_phoenix:
        parts.discard("phoenix")
    DATA.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()}  cores: {os.cpu_count()}", flush=True)

    generator = throughput_generator(args.spans) if "generator" in parts else None
    if generator:
        print(
            f"serve, load generator: {generator['spans']:,} spans end to end in "
            f"{generator['end_to_end_s']:.1f} s = {generator['spans_per_s']:,.0f} spans/s "
            f"(accepted in {generator['accept_s']:.1f} s; {generator['refused']} retry-later "
            f"answers; lost {generator['lost']}; peak RSS {generator['rss_mb']:.0f} MB)",
            flush=True,
        )
    if "clickhouse" in parts:
        both = throughput_generator(args.spans, clickhouse=True)
        print(
            f"serve --clickhouse, load generator: {both['spans']:,} spans analysed and written "
            f"to chDB in {both['end_to_end_s']:.1f} s = {both['spans_per_s']:,.0f} spans/s "
            f"({both['refused']} retry-later answers; lost {both['lost']}; "
            f"{both['clickhouse_rows']:,} rows in ClickHouse; peak RSS {both['rss_mb']:.0f} MB)",
            flush=True,
        )
    if "exporters" in parts:
        _print_exporters(
            exporters_side_by_side(
                args.exporter_spans, args.exporter_limit, args.exporter_protocols.split(",")
            ),
            args.exporter_limit,
        )
    sdk = throughput_sdk(args.sdk_spans) if "sdk" in parts else None
    if sdk:
        print(
            f"serve, SDK exporter:   {sdk['spans']:,} spans end to end in "
            f"{sdk['end_to_end_s']:.1f} s = {sdk['spans_per_s']:,.0f} spans/s",
            flush=True,
        )
    live = latency(args.rate, args.seconds) if "latency" in parts else None
    if live:
        row, finding = live["row"], live["finding"]
        print(
            f"latency at {live['rate']:,} spans/s: span end -> tool_calls row "
            f"p50 {row['p50']:.2f} s, p95 {row['p95']:.2f} s, max {row['max']:.2f} s; "
            "duplicate write -> finding "
            f"p50 {finding['p50']:.2f} s, p95 {finding['p95']:.2f} s, max {finding['max']:.2f} s "
            f"({live['findings']}/{live['planted']} found)",
            flush=True,
        )
    one = refresh_pass(args.prefill) if "refresh" in parts else None
    if one:
        print(
            f"one analyser pass of {one['per_pass']:,} spans into {one['prefill']:,}: ingest "
            f"{one['ingest_s']:.3f} s, findings {one['findings_s']:.3f} s (mean of 4)",
            flush=True,
        )
    peer = phoenix(args.phoenix_spans) if "phoenix" in parts else None
    if peer:
        ratio = (
            f"; serve is {generator['spans_per_s'] / peer['spans_per_s']:,.1f}x"
            if generator
            else ""
        )
        print(
            f"Phoenix:               {peer['spans']:,} spans end to end in "
            f"{peer['end_to_end_s']:.1f} s = {peer['spans_per_s']:,.0f} spans/s "
            f"(accepted in {peer['accept_s']:.1f} s){ratio}",
            flush=True,
        )
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
