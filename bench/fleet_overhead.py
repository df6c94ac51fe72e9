"""Per-call cost of the retry budget and the circuit breaker on the success path.

The same read tool, spans and executor as ``tracer_overhead.py``; the floor is the
executor without a budget or breaker, measured in the same run. Each other variant adds
a ``RetryBudget``, a ``CircuitBreaker`` or both, their state in a store of each kind:

* memory: a ``MemoryStore`` (one lock, this process);
* SQLite: a ``SQLiteStore`` in a temporary file (one ``BEGIN IMMEDIATE`` transaction
  per check; the fleet tables skip the per-commit fsync);
* Redis: a ``RedisStore`` on a real ``redis-server`` started on loopback (one Lua
  script round trip per check).

On the success path a call makes at most three checks: the breaker admits the attempt,
the budget counts the first attempt, the breaker records the outcome. Variants are
interleaved in every repeat; figures are medians. Wall time by default (the store
round trips are the cost); ``--cpu-time`` counts this thread's CPU only.

    .venv/bin/python bench/fleet_overhead.py [--iterations 2000] [--repeats 7] [--no-redis]
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.redis_server
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tracer_overhead

from tracer_overhead import CALL, DiscardingExporter, read_tool

from toolspan.tracer import CircuitBreaker, Executor, RetryBudget
from toolspan.tracer.store import IdempotencyStore, MemoryStore, SQLiteStore

_clock_ns: Callable[[], int] = time.perf_counter_ns


@dataclass
class Variant:
    label: str
    executor: Executor
    samples: list[float] = field(default_factory=list)

    def measure(self, iterations: int) -> float:
        execute = self.executor.execute
        gc.collect()
        started = _clock_ns()
        for _ in range(iterations):
            execute(CALL)
        return (_clock_ns() - started) / iterations / 1000


@contextmanager
def stores(with_redis: bool) -> Iterator[dict[str, IdempotencyStore]]:
    with ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="toolspan-bench-"))
        found: dict[str, IdempotencyStore] = {
            "memory": MemoryStore(),
            "SQLite": SQLiteStore(Path(folder) / "fleet.sqlite"),
        }
        if with_redis:
            from tests.redis_server import RedisServer
            from toolspan.tracer.store import RedisStore

            server = stack.enter_context(RedisServer())
            found["Redis"] = RedisStore(server.url, prefix="bench:")
        try:
            yield found
        finally:
            for store in found.values():
                store.close()


def build(provider: TracerProvider, backends: dict[str, IdempotencyStore]) -> list[Variant]:
    def executor(**options: Any) -> Executor:
        return Executor([read_tool()], tracer_provider=provider, rng=random.Random(1), **options)

    variants = [Variant("executor (floor)", executor())]
    for name, store in backends.items():
        # Never trips: every call succeeds, so these are the success-path costs.
        budget = RetryBudget(store=store)
        breaker = CircuitBreaker(store=store, rng=random.Random(1))
        variants += [
            Variant(f"{name}: budget", executor(retry_budget=budget)),
            Variant(f"{name}: breaker", executor(circuit_breaker=breaker)),
            Variant(f"{name}: both", executor(retry_budget=budget, circuit_breaker=breaker)),
        ]
    return variants


def main() -> None:
    global _clock_ns
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpu-time", action="store_true", help="this thread's CPU time")
    parser.add_argument("--no-redis", action="store_true", help="skip the Redis variants")
    args = parser.parse_args()
    if args.cpu_time:
        _clock_ns = time.thread_time_ns
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DiscardingExporter()))
    with stores(not args.no_redis) as backends:
        variants = build(provider, backends)
        for item in variants:
            item.measure(min(200, args.iterations))  # warm up: connections, scripts, tables
        for _ in range(args.repeats):
            for item in variants:  # interleaved: drift hits every variant alike
                item.samples.append(item.measure(args.iterations))
                provider.force_flush()
    provider.shutdown()
    floor = statistics.median(variants[0].samples)
    clock = "thread CPU time" if args.cpu_time else "wall time"
    print(
        f"Python {sys.version.split()[0]}; {args.iterations} calls x {args.repeats} repeats, "
        f"median {clock}; floor = the executor without budget or breaker"
    )
    print(f"{'variant':<22} {'us/call':>9} {'min..max':>15} {'x floor':>8} {'+us':>7}")
    for item in variants:
        median = statistics.median(item.samples)
        spread = f"{min(item.samples):.1f}..{max(item.samples):.1f}"
        print(
            f"{item.label:<22} {median:>9.1f} {spread:>15} {median / floor:>7.2f}x "
            f"{median - floor:>7.1f}"
        )


if __name__ == "__main__":
    main()
