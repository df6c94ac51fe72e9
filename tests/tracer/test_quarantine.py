"""Quarantines through the executor: refused calls, scopes, expiry, lifting, fail-open."""

from __future__ import annotations

import logging
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan.tracer import (
    Executor,
    Quarantine,
    Safeguards,
    Tool,
    ToolCall,
    add_quarantine,
    lift_quarantines,
    list_quarantines,
)
from toolspan.tracer.store import MemoryStore, StoreError
from toolspan.tracer.testing import FakeClock

from .conftest import Scripted

HOUR = 3600.0


def build(spans, store, fake, **tool_options):
    clock = FakeClock()
    return Executor(
        [Tool("create_ticket", fake, side_effect="write", **tool_options)],
        tracer_provider=spans.provider,
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(0),
        safeguards=Safeguards(store=store),
    )


def ticket(call_id, conversation="conv-loop", subject="printer"):
    return ToolCall("create_ticket", call_id, {"subject": subject}, conversation_id=conversation)


def stop_tool_in(store, conversation="conv-loop", **fields):
    return add_quarantine(
        store,
        reason="loop: create_ticket ran 40 times",
        ttl_s=HOUR,
        conversation_id=conversation,
        tool="create_ticket",
        finding="loop",
        **fields,
    )


def test_a_quarantined_call_runs_nothing_and_tells_the_model_to_stop(spans, store):
    fake = Scripted({"ticket": "T1"})
    executor = build(spans, store, fake)
    quarantine = stop_tool_in(store)
    result = executor.execute(ticket("c1"))
    assert (result.ok, result.status, result.error_code, fake.calls) == (
        False,
        "quarantined",
        "quarantined",
        [],
    )
    assert result.retryable is False
    assert result.next is not None and "ask" in result.next.instruction
    assert "loop: create_ticket ran 40 times" in (result.message or "")
    call = spans.attrs(spans.call())
    assert call["toolspan.status"] == "quarantined"
    assert call["toolspan.quarantine.id"] == quarantine.id


def test_other_conversations_and_tools_are_unaffected(spans, store):
    fake = Scripted({"ticket": "T1"}, {"ticket": "T2"})
    executor = build(spans, store, fake)
    stop_tool_in(store)
    assert executor.execute(ticket("c1", conversation="conv-other")).status == "succeeded"
    assert executor.execute(ticket("c2", conversation="conv-loop")).status == "quarantined"
    assert len(fake.calls) == 1


def test_lifting_restores_service(spans, store):
    fake = Scripted({"ticket": "T1"})
    executor = build(spans, store, fake)
    quarantine = stop_tool_in(store)
    assert executor.execute(ticket("c1")).status == "quarantined"
    assert lift_quarantines(store, {quarantine.id}) == [quarantine]
    assert list_quarantines(store) == []
    assert executor.execute(ticket("c2")).status == "succeeded"


def test_a_quarantine_expires_on_the_stores_clock(spans, store):
    fake = Scripted({"ticket": "T1"})
    executor = build(spans, store, fake)
    stop_tool_in(store)
    store.wall.sleep(HOUR + 1)
    assert list_quarantines(store) == []
    assert executor.execute(ticket("c1")).status == "succeeded"


def test_a_resource_quarantine_stops_only_calls_on_that_resource(spans, store):
    fake = Scripted({"ticket": "T1"})
    executor = build(spans, store, fake, resource_key=lambda args: args["subject"])
    stop_tool_in(store, conversation=None, resource="printer")
    assert executor.execute(ticket("c1", subject="printer")).status == "quarantined"
    assert executor.execute(ticket("c2", subject="laptop")).status == "succeeded"


def test_a_second_finding_on_the_same_target_keeps_the_quarantine_and_its_id(store):
    first = stop_tool_in(store)
    store.wall.sleep(60)
    second = add_quarantine(
        store,
        reason="duplicate_write",
        ttl_s=HOUR,
        conversation_id="conv-loop",
        tool="create_ticket",
    )
    assert (second.id, second.reason) == (first.id, first.reason)
    assert second.until == first.until + 60
    assert list_quarantines(store) == [second]
    other = add_quarantine(store, reason="r", ttl_s=HOUR, tool="create_ticket")
    assert other.id != first.id and len(list_quarantines(store)) == 2


def test_evidence_older_than_a_lift_does_not_quarantine_again(store):
    # serve reads spans late: calls made before the lift must not undo it.
    first = stop_tool_in(store)
    seen_before_lift = store.wall() - 1
    store.wall.sleep(5)
    lift_quarantines(store)
    again = dict(reason="duplicate_write", ttl_s=HOUR, conversation_id="conv-loop")
    stale = add_quarantine(store, tool="create_ticket", evidence_at=seen_before_lift, **again)
    assert (stale, list_quarantines(store)) == (None, [])
    store.wall.sleep(5)
    fresh = add_quarantine(store, tool="create_ticket", evidence_at=store.wall() - 1, **again)
    assert fresh is not None and fresh.id != first.id
    assert list_quarantines(store) == [fresh]


def test_a_lift_is_remembered_only_for_the_target_and_the_quarantines_time(store):
    stop_tool_in(store)
    store.wall.sleep(5)
    lift_quarantines(store)
    elsewhere = add_quarantine(
        store, reason="r", ttl_s=HOUR, tool="other", evidence_at=store.wall() - 60
    )
    assert elsewhere is not None
    store.wall.sleep(HOUR)  # the lifted quarantine would have ended by now
    later = add_quarantine(
        store,
        reason="r",
        ttl_s=HOUR,
        conversation_id="conv-loop",
        tool="create_ticket",
        evidence_at=store.wall() - HOUR,
    )
    assert later is not None


class WriterChecking(MemoryStore):
    """Records, at each write of the quarantine record, whether a writer held
    the writers' lease: another writer claiming it then must be refused."""

    def __init__(self):
        super().__init__()
        self.held: list[bool] = []

    def _check(self, name):
        if name == "quarantine:index":
            probe = self.claim("quarantine:writer", "writer", lease_s=1, ttl_s=1)
            self.held.append(probe.outcome == "in_progress")

    def put(self, name, value, *, ttl_s):
        self._check(name)
        super().put(name, value, ttl_s=ttl_s)

    def delete(self, name):
        self._check(name)
        super().delete(name)


def test_writers_take_turns_so_a_lift_is_never_undone_by_a_stale_write():
    store = WriterChecking()
    stop_tool_in(store)
    lift_quarantines(store)
    stop_tool_in(store)
    assert store.held == [True, True, True]
    assert store.claim("quarantine:writer", "writer", lease_s=1, ttl_s=1).outcome == "acquired"


def test_a_writer_that_died_holding_the_lease_blocks_others_only_for_the_lease(store):
    store.claim("quarantine:writer", "writer", lease_s=10, ttl_s=10)  # and never released
    store.wall.sleep(11)
    assert stop_tool_in(store) is not None and len(list_quarantines(store)) == 1


class UnreadableStore(MemoryStore):
    def get(self, name):
        if name.startswith("quarantine:"):
            raise StoreError("redis: connection refused")
        return super().get(name)


def test_a_store_that_cannot_be_read_never_blocks_a_call(spans, caplog):
    fake = Scripted({"ticket": "T1"}, {"ticket": "T2"})
    executor = build(spans, UnreadableStore(), fake)
    with caplog.at_level(logging.WARNING, logger="toolspan.tracer"):
        assert executor.execute(ticket("c1")).status == "succeeded"
        assert executor.execute(ticket("c2")).status == "succeeded"
    assert len(fake.calls) == 2


def test_a_record_this_version_cannot_read_blocks_nothing(spans, store):
    fake = Scripted({"ticket": "T1"})
    executor = build(spans, store, fake)
    store.put("quarantine:index", "not json", ttl_s=HOUR)
    assert executor.execute(ticket("c1")).status == "succeeded"


def test_a_quarantine_needs_a_positive_ttl(store):
    with pytest.raises(ValueError, match="positive"):
        add_quarantine(store, reason="r", ttl_s=0)


optional = st.one_of(st.none(), st.sampled_from(["a", "b"]))


@given(conversation=optional, tool=optional, identity=optional, resource=optional)
def test_a_field_left_open_matches_every_value(conversation, tool, identity, resource):
    quarantine = Quarantine(
        reason="r",
        until=1.0,
        conversation_id=conversation,
        tool=tool,
        call_identity=identity,
        resource=resource,
    )
    for call in [("a", "a", "a", "a"), ("b", "b", "b", "b"), ("a", "b", "a", None)]:
        fields = (conversation, tool, identity, resource)
        expected = all(f is None or f == v for f, v in zip(fields, call, strict=True))
        assert quarantine.matches(*call) is expected
