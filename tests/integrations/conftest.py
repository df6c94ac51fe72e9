"""Fixtures for the adapters' tests: the tracer's (real SDK, in-memory exporter, fake clock)."""

from __future__ import annotations

from tests.tracer.conftest import Scripted, Spans, clock, make_executor, spans

__all__ = ["Scripted", "Spans", "clock", "make_executor", "spans"]
