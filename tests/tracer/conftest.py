"""Fixtures for the tracer's unit tests: the real SDK with an in-memory exporter."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolspan.tracer import Executor, Tool
from toolspan.tracer.store import MemoryStore, SQLiteStore
from toolspan.tracer.testing import FakeClock

from ..redis_server import RedisServer


class Spans:
    """The SDK provider and the spans it finished, with lookups for tests."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def calls(self) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name.startswith("execute_tool ")]

    def attempts(self) -> list[ReadableSpan]:
        return sorted(
            (s for s in self.all() if s.name.startswith("attempt ")),
            key=lambda s: (s.attributes or {}).get("toolspan.attempt", 0),
        )

    def call(self) -> ReadableSpan:
        (only,) = self.calls()
        return only

    def attrs(self, span: ReadableSpan) -> dict[str, Any]:
        return dict(span.attributes or {})


@pytest.fixture
def spans() -> Iterator[Spans]:
    recorded = Spans()
    yield recorded
    recorded.provider.shutdown()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_executor(spans: Spans, clock: FakeClock) -> Callable[..., Executor]:
    def build(tools: list[Tool], **options: Any) -> Executor:
        options.setdefault("rng", random.Random(0))
        return Executor(
            tools, tracer_provider=spans.provider, sleep=clock.sleep, clock=clock, **options
        )

    return build


class Scripted:
    """A deterministic fake remote tool: answers from a script, counts calls.

    Each step is a value to return or an exception to raise.
    """

    def __init__(self, *steps: Any) -> None:
        self.steps = list(steps)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **arguments: Any) -> Any:
        self.calls.append(arguments)
        step = self.steps[min(len(self.calls), len(self.steps)) - 1]
        if isinstance(step, BaseException):
            raise step
        return step


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server on a free loopback port, for one test."""
    with RedisServer() as server:
        yield server


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    """A Memory or SQLite store on a fake wall clock, ``store.wall``, that tests move forward."""
    wall = FakeClock(start=1_767_225_600.0)
    made: Any = (
        MemoryStore(clock=wall)
        if request.param == "memory"
        else SQLiteStore(tmp_path / "guards.sqlite", clock=wall)
    )
    made.wall = wall
    yield made
    made.close()
