"""Benchmark: RSS of `toolspan serve` under many concurrent OTLP/gRPC calls.

For each body size, a `toolspan serve` process of its own (no dashboard) is
sent --calls Export calls at once (over 4 channels, all started before any
answer is read), each carrying the same pre-encoded ExportTraceServiceRequest
of about that many bytes. A call refused "retry later" (RESOURCE_EXHAUSTED or
UNAVAILABLE) is sent again after its RetryInfo (else 1 s) until every call is
acknowledged, as the Python and Go exporters do. Printed per size: serve's RSS
idle (VmRSS before the first call), its peak (VmHWM after the last), the
first round's answers, the rounds and seconds until all were acknowledged.

With --breakdown, where the memory is: the same calls into a serve started in
a child process of this script (`Server`, no dashboard), which samples every
20 ms its RSS and the receiver's own counts (calls in flight, bodies read and
waiting, spool lines not yet written, the analyser's lag) and prints their
peaks and their values at the RSS peak; once with the analyser and once
without it (its pass replaced by sealing only, the lag bound lifted), so the
receiver's share and the analyser's are seen apart.

Usage: python bench/grpc_memory_bench.py [--calls 200] [--sizes 320000,1300000] [--breakdown]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
from google.rpc.error_details_pb2 import RetryInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench")]

from live_bench import DATA, Serve, free_port, request  # noqa: E402

METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
CHANNELS = 4
RETRIED = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE)


def body_of(size: int) -> bytes:
    """One request of about ``size`` bytes (live_bench's tool spans)."""
    one, _ = request(0, 100)
    spans = max(1, round(size / (len(one) / 100)))
    body, _ = request(0, spans)
    return body


def rss_mb(pid: int, field: str) -> float:
    """``field`` of /proc/PID/status in MiB (pid 0: this process)."""
    for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def retry_delay_s(error: Any) -> float:
    for key, value in error.trailing_metadata() or ():
        if key == "google.rpc.retryinfo-bin":
            delay = RetryInfo.FromString(value).retry_delay
            return float(delay.seconds + delay.nanos / 1e9)
    return 1.0


def send_all(port: int, body: bytes, calls: int) -> dict[str, Any]:
    """Every call acknowledged at last: the first round's codes, the rounds, the seconds."""
    channels = [grpc.insecure_channel(f"127.0.0.1:{port}") for _ in range(CHANNELS)]
    stubs = [
        channel.unary_unary(METHOD, request_serializer=bytes, response_deserializer=bytes)
        for channel in channels
    ]
    started, waiting, rounds, first = time.monotonic(), calls, 0, Counter[str]()
    try:
        while waiting:
            rounds += 1
            futures: list[Future[Any]] = [
                stubs[n % CHANNELS].future(body, timeout=300) for n in range(waiting)
            ]
            codes = [future.code() for future in futures]
            if rounds == 1:
                first.update(code.name for code in codes)
            refused = [f for f, code in zip(futures, codes, strict=True) if code in RETRIED]
            other = [code for code in codes if code not in RETRIED and code != grpc.StatusCode.OK]
            if other:
                odd = [f for f in futures if f.code() in other]
                details = Counter(f"{f.code().name}: {f.details()}" for f in odd)
                raise RuntimeError(f"unexpected answers in round {rounds}: {details}")
            waiting = len(refused)
            if refused:
                time.sleep(max(retry_delay_s(f) for f in refused))
    finally:
        for channel in channels:
            channel.close()
    return {"first": dict(first), "rounds": rounds, "seconds": time.monotonic() - started}


def measure(size: int, calls: int) -> dict[str, Any]:
    body = body_of(size)
    DATA.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=DATA) as scratch:
        serve = Serve(Path(scratch) / "spool")
        try:
            time.sleep(1.0)  # settle after start-up
            idle = rss_mb(serve.process.pid, "VmRSS")
            result = send_all(serve.grpc_port, body, calls)
            peak = rss_mb(serve.process.pid, "VmHWM")
        finally:
            serve.stop()
    return {"bytes": len(body), "idle_mb": idle, "peak_mb": peak, **result}


def child(directory: Path, port: int, analyse: bool) -> None:
    """In the child: serve on ``port``, sample until stdin has a line, print the peaks."""
    from toolspan.serve import Server, Settings
    from toolspan.serve._live import LiveAnalyser

    if not analyse:  # the spool is sealed as the analyser would, never ingested

        def seal_only(self: LiveAnalyser) -> bool:
            self._spool.seal(min_age_s=0.5)
            return False

        LiveAnalyser.cycle = seal_only  # type: ignore[method-assign]
    settings = Settings(
        directory=directory, grpc_port=port, http_port=free_port(), dashboard_port=0,
        max_lag_bytes=256 * 1024 * 1024 if analyse else 1 << 50,
    )  # fmt: skip
    server = Server(settings).start()
    peaks: dict[str, Any] = {}
    stop = threading.Event()

    def sample() -> None:
        assert server.grpc is not None
        while not stop.is_set():
            admission, mib = server.grpc.admission, 1024 * 1024
            now = {
                "rss_mb": round(rss_mb(0, "VmRSS")),
                "calls": admission.calls,
                "queued_mb": round(admission.queued_bytes / mib),
                "pending_mb": round(server.spool._pending / mib),
                "lag_mb": round(server.spool.lag_bytes() / mib),
            }
            for key, value in now.items():
                peaks[key] = max(peaks.get(key, 0), value)
            if now["rss_mb"] >= peaks["rss_mb"]:
                peaks["at_rss_peak"] = now
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    print("ready", flush=True)
    sys.stdin.readline()
    stop.set()
    sampler.join()
    print(json.dumps(peaks), flush=True)
    server.stop()


def breakdown(size: int, calls: int, analyse: bool) -> dict[str, Any]:
    body = body_of(size)
    DATA.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=DATA) as scratch:
        port = free_port()
        command = [sys.executable, __file__, "--child", scratch, str(port)]
        command += [] if analyse else ["--no-analyse"]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert process.stdin is not None and process.stdout is not None
        try:
            if process.stdout.readline().strip() != "ready":
                raise RuntimeError("the child serve did not start")
            time.sleep(1.0)  # settle after start-up
            result = send_all(port, body, calls)
            process.stdin.write("\n")
            process.stdin.flush()
            peaks = json.loads(process.stdout.readline())
        finally:
            process.stdin.close()
            process.wait(timeout=120)
    return {"bytes": len(body), **result, **peaks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sizes", default="320000,1300000", help="body bytes, comma-separated")
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("DIR", "PORT"), help=argparse.SUPPRESS)
    parser.add_argument("--no-analyse", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]) / "spool", int(args.child[1]), not args.no_analyse)
        return
    for size in (int(value) for value in args.sizes.split(",")):
        if args.breakdown:
            for analyse in (True, False):
                row = breakdown(size, args.calls, analyse)
                print(
                    f"{args.calls} calls of {row['bytes']:,} B, analyser "
                    f"{'on' if analyse else 'off'}: peak RSS {row['rss_mb']} MiB; peaks: "
                    f"calls in flight {row['calls']}, bodies waiting {row['queued_mb']} MiB, "
                    f"spool pending {row['pending_mb']} MiB, lag {row['lag_mb']} MiB; "
                    f"at the RSS peak {row['at_rss_peak']}; first round {row['first']}",
                    flush=True,
                )
            continue
        row = measure(size, args.calls)
        print(
            f"{args.calls} calls of {row['bytes']:,} B: idle {row['idle_mb']:.0f} MiB, "
            f"peak {row['peak_mb']:.0f} MiB; first round {row['first']}; "
            f"all acknowledged after {row['rounds']} round(s), {row['seconds']:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
