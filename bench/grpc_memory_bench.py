"""Benchmark: RSS of `toolspan serve` under many concurrent OTLP/gRPC calls.

For each body size, a `toolspan serve` process of its own (no dashboard) is
sent --calls Export calls at once (over 4 channels, all started before any
answer is read), each carrying the same pre-encoded ExportTraceServiceRequest
of about that many bytes. A call refused "retry later" (RESOURCE_EXHAUSTED or
UNAVAILABLE) is sent again after its RetryInfo (else 1 s) until every call is
acknowledged, as the Python and Go exporters do. Printed per size: serve's RSS
idle (VmRSS before the first call), its peak (VmHWM after the last), the
first round's answers, the rounds and seconds until all were acknowledged.

Usage: python bench/grpc_memory_bench.py [--calls 200] [--sizes 320000,1300000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
from google.rpc.error_details_pb2 import RetryInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench")]

from live_bench import DATA, Serve, request  # noqa: E402

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
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sizes", default="320000,1300000", help="body bytes, comma-separated")
    args = parser.parse_args()
    for size in (int(value) for value in args.sizes.split(",")):
        row = measure(size, args.calls)
        print(
            f"{args.calls} calls of {row['bytes']:,} B: idle {row['idle_mb']:.0f} MiB, "
            f"peak {row['peak_mb']:.0f} MiB; first round {row['first']}; "
            f"all acknowledged after {row['rounds']} round(s), {row['seconds']:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
